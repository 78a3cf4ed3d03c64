//! A store model's [`ModelFetcher`]: pulls one version into the cache on
//! the model's first load (`repository.warmup = false`), and checks the
//! graph against the inputs and outputs its `config.pbtxt` declares.

use std::sync::Arc;

use parking_lot::Mutex;
use switchyard_runtime::error::RuntimeError;
use switchyard_runtime::signature::{ModelSignature, TensorSpec};
use switchyard_runtime::source::{ModelFetcher, ModelSource};
use tokio::runtime::Handle;

use crate::listing::VersionListing;
use crate::{LocalVersion, ModelStore, StoreError};

use super::config::{TensorDecl, TritonConfig};
use super::mapping::check_signature;

/// Fetches one model version from a [`ModelStore`].
#[derive(Debug)]
pub struct StoreFetcher {
    store: Arc<ModelStore>,
    served: String,
    model: String,
    version: u64,
    listing: Option<VersionListing>,
    config: TritonConfig,
    runtime: Handle,
    key: String,
    held: Mutex<Option<LocalVersion>>,
}

impl StoreFetcher {
    /// The source of version `version` of `model`, served as `served`,
    /// whose files `listing` lists (from the last listing of the store);
    /// downloads run on `runtime` (the store's).
    pub fn source(
        store: &Arc<ModelStore>,
        served: &str,
        model: &str,
        version: u64,
        listing: Option<VersionListing>,
        config: &TritonConfig,
        runtime: Handle,
    ) -> ModelSource {
        let objects = listing.as_ref().map_or_else(String::new, |l| {
            l.files
                .values()
                .map(|f| format!("{}:{}:{}", f.key, f.size, f.etag.as_deref().unwrap_or("")))
                .collect()
        });
        let key = format!("{}|{model}|{version}|{objects}", store.uri());
        let fetcher = StoreFetcher {
            store: Arc::clone(store),
            served: served.to_string(),
            model: model.to_string(),
            version,
            listing,
            config: config.clone(),
            runtime,
            key,
            held: Mutex::new(None),
        };
        ModelSource { declared: declared_signature(config), fetcher: Arc::new(fetcher) }
    }

    fn unavailable(&self, e: &StoreError) -> RuntimeError {
        RuntimeError::StoreUnavailable {
            model: self.served.clone(),
            class: e.class(),
            label: e.label(),
            message: e.to_string(),
        }
    }
}

impl ModelFetcher for StoreFetcher {
    fn fetch(&self) -> Result<(), RuntimeError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (store, model, version, listing) =
            (Arc::clone(&self.store), self.model.clone(), self.version, self.listing.clone());
        self.runtime.spawn(async move {
            let _ = tx.send(store.materialize_listed(&model, version, listing.as_ref()).await);
        });
        let pulled = rx.recv().map_err(|_| {
            self.unavailable(&StoreError::Backend {
                store: self.store.uri().to_string(),
                reason: "the model store's task stopped".into(),
            })
        })?;
        let local = pulled.map_err(|e| self.unavailable(&e))?;
        // Held as long as the model is registered: keeps the files from eviction.
        *self.held.lock() = Some(local);
        Ok(())
    }

    fn check(&self, graph: &ModelSignature) -> Vec<String> {
        check_signature(&self.config, graph)
    }

    fn key(&self) -> &str {
        &self.key
    }
}

/// The signature a `config.pbtxt` declares, with the batch dimension
/// (`-1`) in front when `max_batch_size > 0`, as the graph has it.
pub fn declared_signature(config: &TritonConfig) -> ModelSignature {
    let batched = config.max_batch_size > 0;
    let spec = |d: &TensorDecl| TensorSpec {
        name: d.name.clone(),
        dtype: d.dtype,
        shape: if batched {
            std::iter::once(-1).chain(d.dims.iter().copied()).collect()
        } else {
            d.dims.clone()
        },
    };
    ModelSignature {
        inputs: config.inputs.iter().map(spec).collect(),
        outputs: config.outputs.iter().map(spec).collect(),
    }
}
