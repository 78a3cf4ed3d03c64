//! Switchyard's ONNX Runtime execution layer: model repository, device
//! pools with dynamic batching, and pool statistics. Knows nothing of HTTP,
//! Redis or config files.
//!
//! Start-up: [`init_onnxruntime`] (once per process), then
//! [`ModelRepository::new`] with the [`ModelSpec`]s, then optionally
//! [`ModelRepository::start_idle_reaper`]. Serving:
//! [`ModelRepository::infer`]. Observing: [`ModelRepository::stats`].
//!
//! Models kept in object storage or in a Triton-layout repository are the
//! `switchyard-store` crate's (`runtime/store`): it lists and pulls them
//! into a local cache, turns `config.pbtxt` files into [`ModelSpec`]s and
//! fetches a model's file through this crate's [`ModelFetcher`]; this crate
//! never names it.
//!
//! Inside, each pool is a bounded queue (taken by priority class, then
//! deadline: [`rank`]) feeding worker threads that each own one ONNX
//! Runtime session: `repository` ([`limits`] on rows and
//! tokens; -> [`text`], a text model's tokenizer) -> `chunk` (cut a large
//! request into batch-sized chunks) -> `inline` (a request into an idle
//! pool of a microsecond model runs on the caller's thread) or `dispatch`
//! (pick a pool) -> `queue` (collect a batch) -> `worker` (`batch` concat,
//! run and record in `execute`, split; a batch that fails goes to
//! `isolate`, which reruns its requests alone so that only those that
//! fail alone get the error; a batch stopped for a higher class goes back
//! into the queue: `preempt`);
//! `wait` awaits each answer within the caller's deadline on a paused
//! pool.
//!
//! The modules sit in the layers of `runtime/ARCHITECTURE.md`, with leaf
//! types ([`DeviceKind`], [`RequestLimits`], [`TextSpec`], [`ModelState`])
//! at the bottom where every module may use them; `gateway/tests/layers.rs`
//! fails on an import that runs up a layer or closes a circle.

#![warn(missing_docs)]

mod batch;
mod caller_batch;
mod chunk;
mod convert;
pub mod device;
mod dispatch;
pub mod error;
mod execute;
pub mod histogram;
pub mod identity;
mod inline;
mod isolate;
mod last_use;
pub mod limits;
mod model;
mod model_state;
pub mod ort_env;
mod pause;
mod pool;
mod pool_shared;
mod preempt;
mod queue;
pub mod rank;
mod ranked_queue;
mod reaper;
mod rebuild;
mod repository;
pub mod request;
mod reserve;
mod row_limit;
pub mod session;
pub mod signature;
pub mod source;
pub mod spec;
pub mod stats;
pub mod tensor;
pub mod text;
pub mod text_spec;
mod validate;
mod wait;
mod worker;
pub mod worker_census;

/// Joining tensors along the batch dimension and splitting them back: what
/// the batcher does, and what the gateway's per-row cache does with a
/// request's rows.
pub use batch::{concat as concat_rows, split as split_rows};
pub use device::DeviceKind;
pub use error::{ErrorClass, RuntimeError};
pub use histogram::{HistogramSnapshot, PoolHistogramSnapshot};
pub use identity::FileIdentity;
pub use limits::RequestLimits;
pub use model_state::ModelState;
pub use ort_env::init_onnxruntime;
pub use rank::{QueueOrder, Rank, DEFAULT_CLASS, PRIORITY_LEVELS};
pub use rebuild::{ModelChange, RebuildError, RebuildReport};
pub use repository::ModelRepository;
pub use request::{InferenceRequest, InferenceResponse, LoadReport};
pub use signature::{ModelSignature, TensorSpec};
pub use source::{ModelFetcher, ModelSource};
pub use spec::{BatchingSpec, ModelSpec, PoolSpec};
pub use stats::{LatencyBucket, ModelStats, PoolStats, RuntimeSnapshot};
pub use tensor::{DataType, Tensor, TensorData, TensorError};
pub use text::TextEncoder;
pub use text_spec::TextSpec;
