//! The model repository: every registered model, loaded lazily, served
//! through its device pools. Shared as `Arc<ModelRepository>`.
//!
//! A model whose file cannot be read at registration is kept in state
//! `Failed` (see [`ModelRepository::failures`]) rather than failing
//! [`ModelRepository::new`]: the gateway decides whether to refuse to start
//! or to carry on with the other models.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::chunk;
use crate::error::RuntimeError;
use crate::identity::FileIdentity;
use crate::model::{LoadedModel, Model};
use crate::model_state::ModelState;
use crate::ort_env::environment;
use crate::rank::{Rank, DEFAULT_CLASS};
use crate::request::{request_rows, InferenceRequest, InferenceResponse, LoadReport};
use crate::signature::ModelSignature;
use crate::spec::{BatchingSpec, ModelSpec};
use crate::stats::{ModelStats, RuntimeSnapshot};
use crate::text::{encode_request, groups, RowGroup, TextEncoder};
use crate::validate::validate;

/// All models the runtime serves.
#[derive(Debug)]
pub struct ModelRepository {
    models: Vec<Arc<Model>>,
    /// Index into `models` by name. Every request looks its model up here,
    /// so it hashes with foldhash rather than the default SipHash (a
    /// fraction of the cost): its keys are the operator's model names, a
    /// client only looks names up, so there is nothing to flood.
    by_name: HashMap<String, usize, foldhash::fast::RandomState>,
    shutting_down: AtomicBool,
}

impl ModelRepository {
    /// Validates the specs, reads each model's signature with a short-lived
    /// probe session, and loads the models marked `warmup` (blocking: call
    /// at start-up). Initialises ONNX Runtime with the default library
    /// resolution if [`crate::init_onnxruntime`] was not called.
    ///
    /// Fails on an invalid spec (duplicate model name, no pool...) or a
    /// missing library. A corrupt or missing model file does not fail: that
    /// model is registered as `Failed` and listed by [`Self::failures`].
    pub fn new(specs: Vec<ModelSpec>) -> Result<Arc<Self>, RuntimeError> {
        environment()?;
        check_specs(&specs)?;
        let models: Vec<Arc<Model>> = specs.into_iter().map(|s| Arc::new(Model::register(s))).collect();
        for model in models.iter().filter(|m| m.spec.warmup && m.failure().is_none()) {
            if let Err(e) = model.load_blocking() {
                tracing::error!(model = %model.spec.name, error = %e, "warm-up load failed");
            }
        }
        Ok(Self::from_models(models))
    }

    /// A repository over models already registered (and possibly shared
    /// with another repository, see [`Self::rebuild`]).
    pub(crate) fn from_models(models: Vec<Arc<Model>>) -> Arc<Self> {
        let by_name = models.iter().enumerate().map(|(i, m)| (m.spec.name.clone(), i)).collect();
        Arc::new(ModelRepository { models, by_name, shutting_down: AtomicBool::new(false) })
    }

    /// The registered model named `name`, if any.
    pub(crate) fn find(&self, name: &str) -> Option<&Arc<Model>> {
        self.by_name.get(name).and_then(|&i| self.models.get(i))
    }

    fn model(&self, name: &str) -> Result<&Arc<Model>, RuntimeError> {
        self.find(name).ok_or_else(|| RuntimeError::UnknownModel { model: name.to_string() })
    }

    /// The model's inputs and outputs (known without loading it).
    pub fn signature(&self, model: &str) -> Result<Arc<ModelSignature>, RuntimeError> {
        self.model(model)?.signature()
    }

    /// Whether `model` is registered with a known signature (what
    /// [`Self::signature`] returns `Ok` for), without copying it.
    pub fn has_signature(&self, model: &str) -> bool {
        self.find(model).is_some_and(|m| m.has_signature())
    }

    /// The spec the model was registered with.
    pub fn spec(&self, model: &str) -> Result<ModelSpec, RuntimeError> {
        Ok(self.model(model)?.spec.clone())
    }

    /// The model's own batching (pools may override it), without copying
    /// the rest of its spec: the gateway asks on every request.
    pub fn batching(&self, model: &str) -> Result<BatchingSpec, RuntimeError> {
        Ok(self.model(model)?.spec.batching.clone())
    }

    /// The identity of the model's file when it was registered (what its
    /// sessions are built from); `None` when the file could not be read.
    pub fn file_identity(&self, model: &str) -> Result<Option<FileIdentity>, RuntimeError> {
        Ok(self.model(model)?.identity)
    }

    /// Registered model names, in registration order.
    pub fn model_names(&self) -> Vec<String> {
        self.models.iter().map(|m| m.spec.name.clone()).collect()
    }

    /// The model's load state.
    pub fn state(&self, model: &str) -> Result<ModelState, RuntimeError> {
        Ok(self.model(model)?.state())
    }

    /// The text stage of `model` (its tokenizer), `None` for a model
    /// without one: callers count tokens the way the model does
    /// ([`TextEncoder::count_tokens`]).
    pub fn text_encoder(&self, model: &str) -> Result<Option<Arc<TextEncoder>>, RuntimeError> {
        Ok(self.model(model)?.text_encoder())
    }

    /// Models currently `Failed`, with their errors; the gateway checks this
    /// after [`Self::new`] to refuse to start or to warn.
    pub fn failures(&self) -> Vec<(String, RuntimeError)> {
        self.models.iter().filter_map(|m| Some((m.spec.name.clone(), m.failure()?))).collect()
    }

    /// Runs one request: loads the model if needed (concurrent first calls
    /// share one load), checks its rows against the model's limit
    /// ([`ModelSpec::max_rows`], `TooLarge` beyond), tokenises a text
    /// model's input (see [`crate::text`]; `TooLarge` past
    /// [`ModelSpec::max_tokens`]), validates the inputs, queues the
    /// request on `pool` (or, with `None`, the available pool with the
    /// lowest predicted wait), in batch-sized chunks when it has more rows
    /// than one batch, and waits for the result.
    ///
    /// Dropping the returned future cancels the request: if it has not
    /// started executing, it is skipped and counted as cancelled.
    pub async fn infer(
        &self,
        model: &str,
        pool: Option<&str>,
        req: InferenceRequest,
    ) -> Result<InferenceResponse, RuntimeError> {
        self.infer_within(model, pool, req, None).await
    }

    /// [`Self::infer`] with a deadline (the caller's latency budget): a
    /// request still queued on a paused pool (see [`Self::set_paused`])
    /// once the deadline has passed gives up with
    /// [`RuntimeError::Paused`] instead of waiting for the pool to be
    /// resumed. On a pool that is not paused the deadline changes nothing:
    /// a slow queue still answers, late.
    pub async fn infer_within(
        &self,
        model: &str,
        pool: Option<&str>,
        req: InferenceRequest,
        deadline: Option<Instant>,
    ) -> Result<InferenceResponse, RuntimeError> {
        self.infer_ranked(model, pool, req, Rank::new(DEFAULT_CLASS, deadline)).await
    }

    /// [`Self::infer_within`] with a priority class: the request takes its
    /// place in the pool's queue by `rank` (class, then deadline, with
    /// aging; see [`crate::rank`]), and a full queue sheds a waiter of a
    /// lower class to take it rather than refusing it.
    pub async fn infer_ranked(
        &self,
        model: &str,
        pool: Option<&str>,
        req: InferenceRequest,
        rank: Rank,
    ) -> Result<InferenceResponse, RuntimeError> {
        self.check_open()?;
        let m = self.model(model)?;
        let pool_index = pool.map(|p| m.pool_index(p)).transpose()?;
        m.touch();
        let loaded = ensure_loaded(m).await?;
        if loaded.batch {
            // Before anything is allocated per row (e.g. tokenising texts).
            m.spec.check_rows(request_rows(&req))?;
        }
        // Only a text model has a tokenizer to look up (a lock and a count).
        let encoder = m.spec.max_tokens().and_then(|_| m.text_encoder());
        let req = match (m.spec.max_tokens(), encoder.clone()) {
            (None, _) => req,
            (Some(max_tokens), Some(encoder)) => {
                let by_bucket = loaded.batch && groups::joinable(&loaded.signature);
                let mut encoded = encode_request(&encoder, &m.spec.name, req, max_tokens, by_bucket).await?;
                if encoded.len() > 1 {
                    return run_groups(m, loaded, pool_index, &encoder, encoded, rank).await;
                }
                match encoded.pop() {
                    Some(group) => group.request,
                    None => InferenceRequest::default(),
                }
            }
            (Some(_), None) => {
                return Err(RuntimeError::DeviceUnavailable {
                    model: m.spec.name.clone(),
                    reason: "the text model's tokenizer is not loaded".into(),
                })
            }
        };
        let mut validated = validate(&m.spec.name, &loaded.signature, loaded.batch, req)?;
        if let (Some(encoder), true) = (encoder, loaded.batch) {
            tag_bucket(&encoder, &mut validated);
        }
        let result = chunk::run(m, loaded, pool_index, validated, rank).await;
        m.touch();
        result
    }

    /// Loads the model's sessions now (or returns the last report if it is
    /// loaded). Unlike `infer`, this retries a `Failed` model, re-reading a
    /// file that was corrupt at registration.
    pub async fn load(&self, model: &str) -> Result<LoadReport, RuntimeError> {
        self.check_open()?;
        let m = self.model(model)?;
        let _guard = m.load_lock.lock().await;
        if m.loaded().is_some() {
            if let Some(report) = m.last_report() {
                return Ok(report);
            }
        }
        m.load_attempts.fetch_add(1, Ordering::SeqCst);
        load_off_thread(m).await
    }

    /// Drops the model's sessions; requests already queued still complete,
    /// and the next request loads it again.
    pub fn unload(&self, model: &str) -> Result<(), RuntimeError> {
        let m = self.model(model)?;
        if m.unload() {
            tracing::info!(model = %m.spec.name, "model unloaded");
        }
        Ok(())
    }

    /// Holds (`true`) or releases a pool's workers between batches; queued
    /// requests wait (and may be cancelled) meanwhile, those with a
    /// deadline ([`Self::infer_within`]) at most until it has passed. The
    /// pool's statistics say `paused`, so routing sends new requests
    /// elsewhere when it can, and a request without a named pool goes to
    /// a paused pool only when the model has no other. A maintenance and
    /// test hook, for taking a device out of service or deterministic
    /// batching and cancellation tests; not used in normal serving.
    pub fn set_paused(&self, model: &str, pool: &str, paused: bool) -> Result<(), RuntimeError> {
        let m = self.model(model)?;
        let i = m.pool_index(pool)?;
        if let Some(shared) = m.pools.get(i) {
            shared.gate.set(paused);
        }
        Ok(())
    }

    /// The load of the models named in `names` (a route's list), for a
    /// routing decision on every request: state and per-pool load and
    /// latency, without the distributions and cold-start history of
    /// [`Self::stats`] (left empty), and without the models the route does
    /// not name. Unknown names are left out.
    pub fn load_of(&self, names: &[String]) -> RuntimeSnapshot {
        let models =
            names.iter().filter_map(|name| self.find(name)).map(|m| model_stats(m, Detail::Load)).collect();
        RuntimeSnapshot { models }
    }

    /// Statistics of every model and pool.
    pub fn stats(&self) -> RuntimeSnapshot {
        let models = self.models.iter().map(|m| model_stats(m, Detail::Full)).collect();
        RuntimeSnapshot { models }
    }

    /// Refuses new requests (`ShuttingDown`) and unloads every model;
    /// requests already queued still complete (paused pools are resumed).
    pub fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        for m in &self.models {
            m.unload();
            m.pools.iter().for_each(|p| p.gate.set(false));
        }
    }

    /// True once [`Self::shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    fn check_open(&self) -> Result<(), RuntimeError> {
        if self.is_shutting_down() {
            return Err(RuntimeError::ShuttingDown);
        }
        Ok(())
    }

    /// The registered models (for the idle reaper).
    pub(crate) fn models(&self) -> &[Arc<Model>] {
        &self.models
    }
}

/// Checks each spec on its own and that no two share a name.
pub(crate) fn check_specs(specs: &[ModelSpec]) -> Result<(), RuntimeError> {
    let mut names = std::collections::HashSet::with_capacity(specs.len());
    for spec in specs {
        spec.validate()?;
        if !names.insert(spec.name.as_str()) {
            return Err(RuntimeError::InvalidSpec {
                model: spec.name.clone(),
                reason: "two models have this name".into(),
            });
        }
    }
    Ok(())
}

/// The loaded model, loading it first if needed. Concurrent callers queue
/// on the model's load lock; those that waited on a load that failed get
/// its error instead of trying again. A `Failed` model is not retried here.
async fn ensure_loaded(m: &Arc<Model>) -> Result<Arc<LoadedModel>, RuntimeError> {
    if let Some(loaded) = m.loaded() {
        return Ok(loaded);
    }
    if let Some(failure) = m.failure() {
        return Err(failure);
    }
    let attempt = m.load_attempts.load(Ordering::SeqCst);
    let _guard = m.load_lock.lock().await;
    if let Some(loaded) = m.loaded() {
        return Ok(loaded);
    }
    if m.load_attempts.load(Ordering::SeqCst) != attempt {
        if let Some(failure) = m.failure() {
            return Err(failure);
        }
    }
    m.load_attempts.fetch_add(1, Ordering::SeqCst);
    load_off_thread(m).await?;
    m.loaded().ok_or_else(|| RuntimeError::DeviceUnavailable {
        model: m.spec.name.clone(),
        reason: "unloaded right after loading".into(),
    })
}

/// Runs the blocking load on tokio's blocking pool.
async fn load_off_thread(m: &Arc<Model>) -> Result<LoadReport, RuntimeError> {
    let model = Arc::clone(m);
    tokio::task::spawn_blocking(move || model.load_blocking()).await.unwrap_or_else(|e| {
        Err(RuntimeError::Execution { model: m.spec.name.clone(), reason: format!("load task failed: {e}") })
    })
}

/// How much of a model's statistics to copy.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// Everything, distributions included (metrics and admin pages).
    Full,
    /// State, load and latency only: what a routing decision reads.
    Load,
}

/// One model's statistics, at `detail`.
fn model_stats(m: &Model, detail: Detail) -> ModelStats {
    let full = detail == Detail::Full;
    ModelStats {
        name: Arc::clone(&m.name),
        version: m.spec.version,
        state: m.state(),
        last_cold_start: m.last_cold_start(),
        loads: m.loads(),
        unloads: m.unloads(),
        cold_starts: if full { m.cold_starts.snapshot() } else { Default::default() },
        pools: m
            .pools
            .iter()
            .map(|p| {
                let batching = m.spec.pool_batching(&p.spec);
                if full {
                    p.stats(batching)
                } else {
                    p.load(batching)
                }
            })
            .collect(),
    }
}

/// Tags a text request with its length bucket: token tensors of any
/// length batch together within one bucket, the worker padding them to the
/// batch's longest.
fn tag_bucket(encoder: &TextEncoder, validated: &mut crate::validate::Validated) {
    let length = validated.inputs.first().and_then(|t| t.shape().get(1).copied()).unwrap_or(0);
    validated.group = Some(vec![vec![encoder.bucket(length)]]);
}

/// Runs a text request's length groups ([`groups`]) as requests of their
/// own, concurrently, and assembles the answer in the request's row order.
async fn run_groups(
    m: &Model,
    loaded: Arc<LoadedModel>,
    pool: Option<usize>,
    encoder: &TextEncoder,
    encoded: Vec<RowGroup>,
    rank: Rank,
) -> Result<InferenceResponse, RuntimeError> {
    let total = encoded.iter().map(|g| g.rows.len()).sum();
    let mut runs = Vec::with_capacity(encoded.len());
    let mut positions = Vec::with_capacity(encoded.len());
    for group in encoded {
        let mut validated = validate(&m.spec.name, &loaded.signature, loaded.batch, group.request)?;
        tag_bucket(encoder, &mut validated);
        positions.push(group.rows);
        runs.push(chunk::run(m, Arc::clone(&loaded), pool, validated, rank));
    }
    drop(loaded);
    let answers = futures::future::try_join_all(runs).await;
    m.touch();
    groups::join(&m.spec.name, total, positions.into_iter().zip(answers?).collect())
}
