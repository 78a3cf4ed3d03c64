//! One registered model: its spec, signature, load state, and (when
//! loaded) its running pools. Loading is blocking (sessions are built
//! synchronously); the repository runs it off the async threads and makes
//! sure only one load per model runs at a time.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::RuntimeError;
use crate::execute::PoolContext;
use crate::histogram::{Histogram, COLD_START_US_BOUNDS};
use crate::identity::FileIdentity;
use crate::last_use::LastUse;
use crate::model_state::ModelState;
use crate::pool::PoolRuntime;
use crate::pool_shared::PoolShared;
use crate::request::LoadReport;
use crate::session::probe_signature;
use crate::signature::ModelSignature;
use crate::spec::ModelSpec;
use crate::text::TextEncoder;
use crate::validate::batchable;

/// The running part of a loaded model; dropped on unload.
#[derive(Debug)]
pub struct LoadedModel {
    /// Per pool in spec order; `None` when the pool is unavailable.
    pub pools: Vec<Option<PoolRuntime>>,
    /// The graph's signature (what the workers feed; for a text model the
    /// token tensors, not the public `BYTES` input).
    pub signature: ModelSignature,
    /// Whether requests are merged into batches.
    pub batch: bool,
}

#[derive(Debug)]
struct Inner {
    state: ModelState,
    loaded: Option<Arc<LoadedModel>>,
    failure: Option<RuntimeError>,
    last_report: Option<LoadReport>,
    loads: u64,
    unloads: u64,
}

/// A registered model.
#[derive(Debug)]
pub struct Model {
    /// Its spec.
    pub spec: ModelSpec,
    /// `spec.name`, shared: statistics read on every routing decision
    /// ([`crate::ModelRepository::load_of`]) copy a pointer, not the text.
    pub name: Arc<str>,
    /// Per-pool state that survives reloads, in spec order.
    pub pools: Vec<Arc<PoolShared>>,
    /// Serialises loads; waiters see the result of the load they waited on.
    pub load_lock: tokio::sync::Mutex<()>,
    /// Incremented by every load attempt.
    pub load_attempts: AtomicU64,
    /// The model file's identity when the model was registered; a load
    /// that finds another file there warns (see [`Model::load_blocking`]).
    pub identity: Option<FileIdentity>,
    /// True while a sourced model's signature is the declared one (its
    /// file not fetched and probed yet).
    awaiting_file: AtomicBool,
    /// Cold-start time of each successful load (µs).
    pub cold_starts: Histogram,
    signature: Mutex<Option<ModelSignature>>,
    /// What [`Self::signature`] returns, made once from `signature` (and
    /// the text stage); cleared whenever either is set.
    public_signature: Mutex<Option<Arc<ModelSignature>>>,
    text: Mutex<Option<Arc<TextEncoder>>>,
    inner: Mutex<Inner>,
    /// Uses, for idle unloading: marked by every request without taking
    /// the model's lock or reading the clock.
    last_use: LastUse,
}

/// [`probe`], then the graph checked against what `source` declared (a
/// mismatch fails the model like a corrupt file).
fn probe_checked(
    spec: &ModelSpec,
    source: &crate::source::ModelSource,
) -> Result<(ModelSignature, Option<Arc<TextEncoder>>), RuntimeError> {
    let (graph, text) = probe(spec)?;
    let problems = source.fetcher.check(&graph);
    if !problems.is_empty() {
        return Err(RuntimeError::CorruptModel {
            model: spec.name.clone(),
            path: spec.path.clone(),
            reason: format!("the graph does not match its declared signature: {}", problems.join("; ")),
        });
    }
    Ok((graph, text))
}

/// Why a load stopped: the file could not be fetched (the model stays
/// unloaded and is tried again) or the model cannot serve (it fails).
enum FetchOrFail {
    Fetch(RuntimeError),
    Fail(RuntimeError),
}

impl FetchOrFail {
    fn into_error(self) -> RuntimeError {
        match self {
            FetchOrFail::Fetch(e) | FetchOrFail::Fail(e) => e,
        }
    }
}

impl From<RuntimeError> for FetchOrFail {
    fn from(e: RuntimeError) -> Self {
        FetchOrFail::Fail(e)
    }
}

/// Reads the graph's signature and, for a text model, builds its encoder
/// (a tokenizer that cannot be read fails the model like a corrupt file).
fn probe(spec: &ModelSpec) -> Result<(ModelSignature, Option<Arc<TextEncoder>>), RuntimeError> {
    let graph = probe_signature(spec)?;
    let Some(text) = &spec.text else { return Ok((graph, None)) };
    let encoder = TextEncoder::new(text, &graph).map_err(|reason| RuntimeError::CorruptModel {
        model: spec.name.clone(),
        path: text.tokenizer.clone(),
        reason,
    })?;
    Ok((graph, Some(Arc::new(encoder))))
}

impl Model {
    /// Registers a model: probes its signature; a probe failure leaves the
    /// model `Failed` with the error (other models are unaffected).
    ///
    /// A model with a [`crate::ModelSource`] whose file is not there yet
    /// registers with the signature its source declares and fetches the
    /// file on first load; one whose file is there has its graph checked
    /// against that declaration.
    pub fn register(spec: ModelSpec) -> Model {
        let pools = spec.pools.iter().map(|p| Arc::new(PoolShared::new(p.clone()))).collect();
        let identity = FileIdentity::of(&spec.path);
        let awaiting_file = spec.source.is_some() && !spec.path.exists();
        let registered = match &spec.source {
            Some(source) if awaiting_file => Ok((source.declared.clone(), None)),
            Some(source) => probe_checked(&spec, source),
            None => probe(&spec),
        };
        let (signature, text, state, failure) = match registered {
            Ok((sig, text)) => (Some(sig), text, ModelState::Unloaded, None),
            Err(e) => {
                tracing::error!(model = %spec.name, error = %e, "model cannot be registered");
                (None, None, ModelState::Failed(e.to_string()), Some(e))
            }
        };
        Model {
            name: spec.name.as_str().into(),
            spec,
            pools,
            load_lock: tokio::sync::Mutex::new(()),
            load_attempts: AtomicU64::new(0),
            identity,
            awaiting_file: AtomicBool::new(awaiting_file),
            cold_starts: Histogram::new(COLD_START_US_BOUNDS),
            signature: Mutex::new(signature),
            public_signature: Mutex::new(None),
            text: Mutex::new(text),
            inner: Mutex::new(Inner {
                state,
                loaded: None,
                failure,
                last_report: None,
                loads: 0,
                unloads: 0,
            }),
            last_use: LastUse::new(),
        }
    }

    /// The signature clients see (a text model's `BYTES` input in place of
    /// its token tensors), or the registration error. Shared, not copied:
    /// the gateway asks on every request.
    pub fn signature(&self) -> Result<Arc<ModelSignature>, RuntimeError> {
        // Held while it is made, so a signature set meanwhile (which
        // clears this after setting `signature`) is never overwritten by
        // one made from the old graph.
        let mut public = self.public_signature.lock();
        if let Some(sig) = public.as_ref() {
            return Ok(Arc::clone(sig));
        }
        let graph = self.signature.lock().clone();
        if let Some(graph) = graph {
            let made = Arc::new(match self.text_encoder() {
                Some(encoder) => encoder.public_signature(&graph),
                None => graph,
            });
            *public = Some(Arc::clone(&made));
            return Ok(made);
        }
        drop(public);
        Err(self.failure().unwrap_or_else(|| RuntimeError::CorruptModel {
            model: self.spec.name.clone(),
            path: self.spec.path.clone(),
            reason: "signature unknown".into(),
        }))
    }

    /// Whether the signature is known (what [`Self::signature`] would
    /// return `Ok` for), without copying it: existence checks on the
    /// request path ask this.
    pub fn has_signature(&self) -> bool {
        self.signature.lock().is_some()
    }

    /// The text stage, for a text model whose files were read.
    pub fn text_encoder(&self) -> Option<Arc<TextEncoder>> {
        self.text.lock().clone()
    }

    /// Current state.
    pub fn state(&self) -> ModelState {
        self.inner.lock().state.clone()
    }

    /// The running pools, if loaded.
    pub fn loaded(&self) -> Option<Arc<LoadedModel>> {
        self.inner.lock().loaded.clone()
    }

    /// The error of the last failed registration or load, while `Failed`.
    pub fn failure(&self) -> Option<RuntimeError> {
        self.inner.lock().failure.clone()
    }

    /// The report of the last successful load.
    pub fn last_report(&self) -> Option<LoadReport> {
        self.inner.lock().last_report.clone()
    }

    /// How long the last successful load took: the part of
    /// [`Self::last_report`] every routing decision reads, without copying
    /// the report.
    pub fn last_cold_start(&self) -> Option<std::time::Duration> {
        self.inner.lock().last_report.as_ref().map(|r| r.cold_start)
    }

    /// Successful loads so far (reloads after idle unloading included).
    pub fn loads(&self) -> u64 {
        self.inner.lock().loads
    }

    /// Unloads so far (idle or explicit).
    pub fn unloads(&self) -> u64 {
        self.inner.lock().unloads
    }

    /// Marks the model as just used (for idle unloading).
    pub fn touch(&self) {
        self.last_use.mark();
    }

    /// How long since the last request (or load), as the idle reaper sees
    /// it (see the `last_use` module).
    pub fn idle_for(&self) -> Duration {
        self.last_use.idle_for()
    }

    /// Drops the running pools; queued requests still complete. Returns
    /// whether anything was loaded.
    pub fn unload(&self) -> bool {
        let mut inner = self.inner.lock();
        let was_loaded = inner.loaded.take().is_some();
        if was_loaded {
            inner.state = ModelState::Unloaded;
            inner.unloads += 1;
        }
        was_loaded
    }

    /// Builds every pool (blocking). Call only while holding `load_lock`.
    ///
    /// When the file on disk is no longer the one registered (replaced
    /// without a config reload, then loaded lazily, e.g. after an idle
    /// unload), the new file is loaded and a warning says to reload, so the
    /// model gets a new cache generation.
    pub fn load_blocking(&self) -> Result<LoadReport, RuntimeError> {
        let started = Instant::now();
        if self.identity.is_some() && FileIdentity::of(&self.spec.path) != self.identity {
            tracing::warn!(model = %self.spec.name, path = %self.spec.path.display(),
                "model file changed on disk since it was registered; reload the config to serve it as a new generation");
        }
        self.inner.lock().state = ModelState::Loading;
        let result = self.build_pools(started);
        let mut inner = self.inner.lock();
        match &result {
            Ok((loaded, report)) => {
                inner.state = ModelState::Ready;
                inner.loaded = Some(Arc::clone(loaded));
                inner.failure = None;
                inner.last_report = Some(report.clone());
                inner.loads += 1;
                self.touch();
                self.cold_starts.record_duration(report.cold_start);
            }
            // The store could not deliver the file: unloaded, tried again
            // by the next request.
            Err(FetchOrFail::Fetch(_)) => inner.state = ModelState::Unloaded,
            Err(FetchOrFail::Fail(e)) => {
                inner.state = ModelState::Failed(e.to_string());
                inner.failure = Some(e.clone());
            }
        }
        result.map(|(_, report)| report).map_err(FetchOrFail::into_error)
    }

    fn build_pools(&self, started: Instant) -> Result<(Arc<LoadedModel>, LoadReport), FetchOrFail> {
        let signature = self.fetched_signature()?;
        let batch = self.spec.any_batching() && batchable(&signature);
        if self.spec.any_batching() && !batch {
            tracing::warn!(model = %self.spec.name, "inputs have a fixed batch dimension; batching disabled");
        }
        let mut pools = Vec::with_capacity(self.pools.len());
        let mut outcomes = Vec::with_capacity(self.pools.len());
        for shared in &self.pools {
            let ctx = Arc::new(PoolContext {
                model: self.spec.name.clone(),
                version: self.spec.version,
                signature: signature.clone(),
                shared: Arc::clone(shared),
                pad: self.text_encoder().map(|e| e.pad_values()),
                served: AtomicBool::new(false),
                failures_in_a_row: AtomicU32::new(0),
            });
            let outcome = PoolRuntime::start(&self.spec, ctx, batch);
            *shared.unavailable.lock() = outcome.as_ref().err().cloned();
            if let Err(reason) = &outcome {
                tracing::warn!(model = %self.spec.name, pool = %shared.spec.name, device = %shared.spec.device,
                    %reason, "pool unavailable; the model serves from its other pools");
            }
            outcomes.push((shared.spec.name.clone(), outcome.as_ref().map(|_| ()).map_err(Clone::clone)));
            pools.push(outcome.ok());
        }
        if pools.iter().all(Option::is_none) {
            return Err(FetchOrFail::Fail(RuntimeError::DeviceUnavailable {
                model: self.spec.name.clone(),
                reason: describe_failures(&outcomes),
            }));
        }
        let report = LoadReport { cold_start: started.elapsed(), pools: outcomes };
        tracing::info!(model = %self.spec.name, cold_start_ms = report.cold_start.as_millis() as u64, "model loaded");
        Ok((Arc::new(LoadedModel { pools, signature, batch }), report))
    }

    /// A sourced model's graph signature: the file fetched if it is not
    /// there (an error leaves the model unloaded, to be tried again), then
    /// probed and checked against the source's declaration (a mismatch
    /// fails the model like a corrupt file).
    fn fetched_signature(&self) -> Result<ModelSignature, FetchOrFail> {
        let Some(source) = self.spec.source.as_ref().filter(|_| self.awaiting_file.load(Ordering::SeqCst))
        else {
            return Ok(self.signature_or_probe()?);
        };
        if !self.spec.path.exists() {
            source.fetcher.fetch().map_err(FetchOrFail::Fetch)?;
        }
        let (graph, text) = probe_checked(&self.spec, source)?;
        *self.signature.lock() = Some(graph.clone());
        *self.text.lock() = text;
        *self.public_signature.lock() = None;
        self.awaiting_file.store(false, Ordering::SeqCst);
        Ok(graph)
    }

    fn signature_or_probe(&self) -> Result<ModelSignature, RuntimeError> {
        let mut slot = self.signature.lock();
        if let Some(sig) = slot.as_ref() {
            return Ok(sig.clone());
        }
        let (sig, text) = probe(&self.spec)?;
        *slot = Some(sig.clone());
        *self.text.lock() = text;
        *self.public_signature.lock() = None;
        Ok(sig)
    }

    /// Index of the pool named `name`.
    pub fn pool_index(&self, name: &str) -> Result<usize, RuntimeError> {
        self.pools.iter().position(|p| p.spec.name == name).ok_or_else(|| RuntimeError::UnknownPool {
            model: self.spec.name.clone(),
            pool: name.to_string(),
        })
    }

    /// True when the file at the spec's path is still the one registered.
    pub fn file_unchanged(&self) -> bool {
        self.identity.is_some() && FileIdentity::of(&self.spec.path) == self.identity
    }

    /// True when any pool has queued or executing requests.
    pub fn busy(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.pools
            .iter()
            .any(|p| p.counters.queue_depth.load(Relaxed) + p.counters.in_flight.load(Relaxed) > 0)
    }
}

impl Drop for Model {
    /// Opens any pause gate, so paused workers drain their queues and exit
    /// instead of blocking forever once nobody can resume them.
    fn drop(&mut self) {
        for pool in &self.pools {
            pool.gate.set(false);
        }
    }
}

fn describe_failures(outcomes: &[(String, Result<(), String>)]) -> String {
    outcomes
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|e| format!("pool '{name}': {e}")))
        .collect::<Vec<_>>()
        .join("; ")
}
