//! Where a model's file comes from when it is not simply a file on local
//! disk: a model store pulls it into its cache. A [`ModelSpec`] with a
//! [`ModelSource`] can be registered before its file exists (the source
//! declares the signature clients see), is fetched on its first load, and
//! has its graph checked against what the source declared.
//!
//! [`ModelSpec`]: crate::ModelSpec

use std::fmt;
use std::sync::Arc;

use crate::error::RuntimeError;
use crate::signature::ModelSignature;

/// Fetches a model's file to the spec's `path`. Implemented by the model
/// store (`switchyard_store::triton::StoreFetcher`, a crate above this
/// one); called on a blocking thread, never on an async one.
pub trait ModelFetcher: Send + Sync + fmt::Debug {
    /// Makes the spec's `path` exist (blocking). An error leaves the model
    /// unloaded, so the next request tries again (a store that was down
    /// may answer by then).
    fn fetch(&self) -> Result<(), RuntimeError>;

    /// Differences between what the source declared and the graph's
    /// signature (empty when they agree).
    fn check(&self, graph: &ModelSignature) -> Vec<String>;

    /// Names the source and its content (store, model, version, object
    /// ETags): two sources with the same key deliver the same file, so a
    /// reload keeps a model whose key did not change.
    fn key(&self) -> &str;
}

/// A model's source and the signature it declares.
#[derive(Clone, Debug)]
pub struct ModelSource {
    /// The signature clients see until the file is fetched and probed.
    pub declared: ModelSignature,
    /// The fetcher.
    pub fetcher: Arc<dyn ModelFetcher>,
}

impl PartialEq for ModelSource {
    fn eq(&self, other: &Self) -> bool {
        self.declared == other.declared && self.fetcher.key() == other.fetcher.key()
    }
}

impl Eq for ModelSource {}
