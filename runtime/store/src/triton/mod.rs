//! Triton model repositories: `<model>/config.pbtxt` parsed with a real
//! protobuf text-format parser ([`schema`]) against Triton's schema, the
//! fields Switchyard maps read out ([`config`]) and turned into pools and
//! batching ([`mapping`], which has the mapping table), and whole
//! repositories read from a [`crate::ModelStore`] ([`repository`]).

pub mod config;
pub mod fetcher;
pub mod mapping;
pub mod repository;
pub mod schema;
#[cfg(test)]
mod tests;

pub use config::{DynamicBatching, InstanceGroup, InstanceKind, TensorDecl, TritonConfig};
pub use fetcher::{declared_signature, StoreFetcher};
pub use mapping::{check_signature, map_config, MappedModel, SpecDefaults};
pub use repository::{
    load_repository, scan_repository, served_name, LoadedRepository, RepositoryScan, TritonModel,
};
