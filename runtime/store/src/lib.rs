//! Switchyard's model store: model repositories in S3-compatible object
//! storage (`s3://bucket/prefix`) or local folders (`file://`), pulled on
//! demand into a bounded local disk cache, and read as Triton model
//! repositories. Knows nothing of HTTP or config files, and of the
//! runtime only the leaf types it hands over: it produces
//! `switchyard_runtime::ModelSpec`s and implements the runtime's
//! `ModelFetcher`, so the runtime never names this crate.
//!
//! Pieces, in the order a pull uses them (layers in `ARCHITECTURE.md`):
//! - [`uri`] and [`settings`]: what to open; [`aws_env`]: credentials,
//!   region and endpoint by the AWS conventions (environment, profile
//!   files), never logged;
//! - `backend`: `object_store`'s S3 or local client, and its errors as
//!   [`StoreError`]s (each with its HTTP class);
//! - `object_list`: listing the objects under a prefix, page by page,
//!   skipping keys the client cannot parse;
//! - [`listing`]: the repository tree and what changed between two polls;
//! - [`model_store`]: [`ModelStore`], listing, pulling (one shared
//!   download per version), polling, serving the cache when the store is
//!   down;
//! - `pull`, `download`, `part_writer`, [`integrity`]: one version's
//!   files, fetched in parallel ranges written in place as they arrive,
//!   and checked against ETag or checksum objects;
//! - `disk_cache`, [`manifest`]: the disk cache (atomic installs, LRU eviction
//!   under a size bound, leases on served versions);
//! - [`versions`]: Triton's version policies;
//! - [`triton`]: `config.pbtxt` and whole Triton repositories as
//!   [`switchyard_runtime::ModelSpec`]s.
//!
//! Typical use (the gateway at start-up and on each reload):
//! [`ModelStore::open`], then [`triton::load_repository`] (specs plus the
//! local versions to hold while serving them), and [`ModelStore::poll`] on
//! an interval to notice new versions.

#![warn(missing_docs)]

pub mod aws_env;
mod backend;
mod disk_cache;
mod download;
pub mod error;
pub mod integrity;
pub mod listing;
pub mod manifest;
pub mod model_store;
mod object_list;
mod part_writer;
mod pull;
pub mod settings;
mod stats;
pub mod triton;
pub mod uri;
pub mod versions;

pub use aws_env::{AwsEnv, Secret};
pub use disk_cache::DiskCacheLease;
pub use error::StoreError;
pub use listing::{ObjectInfo, RepositoryChange, RepositoryListing};
pub use model_store::{LocalVersion, ModelStore, VersionSource};
pub use settings::{DiskCacheSettings, IntegritySettings, S3Settings, StoreSettings, TransferSettings};
pub use stats::StoreStats;
pub use uri::StoreUri;
pub use versions::{VersionPolicy, VersionSelection};
