//! `[[models]]`: the ONNX models the runtime may load, each with its
//! batching, device pools, request limits, optional tokenizer
//! ([`super::text_section`]) and routing attributes (`cost`, `quality`).

use super::issue::Issues;
use super::one_of::OneOf;
use super::schema_default::{some_u64, some_usize};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use switchyard_runtime::{BatchingSpec, DeviceKind, ModelSpec, PoolSpec, QueueOrder, RequestLimits};

/// Default model version.
pub const DEFAULT_VERSION: u64 = 1;
/// Default worker threads of a pool, and intra-op threads per worker.
pub const DEFAULT_POOL_THREADS: usize = 1;

/// A model's batching when its `batching` table leaves fields out.
pub const DEFAULT_BATCHING: BatchingSpec = BatchingSpec {
    max_batch_size: 32,
    max_queue_delay: Duration::from_micros(500),
    queue_capacity: 1024,
    idle_dispatch: true,
    inline_max: BatchingSpec::DEFAULT_INLINE_MAX,
    queue_order: QueueOrder::Deadline,
    preempt: BatchingSpec::DEFAULT_PREEMPT,
    reserve_top_class: BatchingSpec::DEFAULT_RESERVE_TOP_CLASS,
    max_batch_tokens: None,
};

/// One `[[models]]` entry.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// Name used in routes and as a V2 model name.
    pub name: String,
    /// Version reported to clients and part of cache keys; default 1.
    #[schemars(default = "some_u64::<DEFAULT_VERSION>")]
    pub version: Option<u64>,
    /// ONNX file, relative to the repository folder.
    pub path: String,
    /// Unload after this many idle seconds (scale to zero); absent = never.
    pub idle_unload_s: Option<u64>,
    /// Load at start-up and run one request through it.
    #[serde(default)]
    pub warmup: bool,
    /// Dynamic batching; absent = defaults.
    #[serde(default)]
    #[schemars(default = "default_batching")]
    pub batching: RawBatching,
    /// Device pools; absent = one CPU pool with one worker.
    #[serde(default)]
    pub pools: Vec<RawPool>,
    #[schemars(extend("exclusiveMinimum" = 0))]
    /// Relative cost of one inference (any unit, > 0); routing policies
    /// prefer cheaper models. Default: 1 + the model's position in the route.
    pub cost: Option<f64>,
    /// Accuracy rank (higher = more accurate). Default: the model's position
    /// in the route (cheapest first = least accurate).
    pub quality: Option<u32>,
    /// Makes this a text model: clients send strings, the runtime tokenises
    /// them (see [`super::text_section`]); absent = the graph's own inputs.
    pub tokenizer: Option<super::text_section::RawTokenizer>,
    /// Per-request limits `{ max_rows, max_tokens }`; absent fields take
    /// defaults from the batching (see `switchyard_runtime::limits`).
    pub limits: Option<switchyard_runtime::RequestLimits>,
    /// Each row of a batched request is answered independently of the
    /// others (a text embedding model), so the cache keeps one entry per
    /// row (`crate::cache::rows`). Absent = true for a text model (one
    /// with a `tokenizer`), false otherwise.
    pub rows_independent: Option<bool>,
}

/// A model's `batching = { ... }`.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawBatching {
    /// Rows per batch, default 32; 0 or 1 disables batching.
    pub max_batch_size: Option<usize>,
    /// How long the first request waits for others, default 500 us.
    pub max_queue_delay_us: Option<u64>,
    /// Queued requests per pool before `Overloaded`, default 1024.
    #[schemars(range(min = 1))]
    pub queue_capacity: Option<usize>,
    /// Dispatch at once when nobody else is likely to join the batch
    /// instead of waiting out the delay, default true (see `BatchingSpec::idle_dispatch`).
    pub idle_dispatch: Option<bool>,
    /// A request into an idle CPU pool whose batch is predicted to run
    /// within this many microseconds runs on the caller's thread, default
    /// 50; 0 turns it off (see `BatchingSpec::inline_max`).
    pub inline_max_us: Option<u64>,
    /// How the pool's queue orders requests of one priority class:
    /// `"deadline"` (earliest deadline first, then arrival; default) or
    /// `"fifo"` (arrival only, deadlines ignored). Classes and aging apply
    /// either way (see the Tenants and limits page).
    pub queue_order: Option<OneOf<QueueOrderWord>>,
    /// A CPU pool whose sessions are all busy stops a running batch when a
    /// request of a strictly higher class than all of its requests
    /// arrives; the stopped requests go back into the queue at their
    /// place and run again (each at most once stopped), and the pool's
    /// batches hold one class each. Default false; CUDA pools never
    /// preempt (see the Tenants and limits page).
    pub preempt: Option<bool>,
    /// A CPU pool keeps one more session, beside its workers, for
    /// requests of the first class (`x-priority: 1`, as asked, not by
    /// aging) and runs its other workers at the lowest OS scheduling
    /// priority, so a first-class request neither waits for a lower
    /// class's batch nor shares the CPU with one. Costs one session's
    /// memory; the other workers yield to every thread of normal
    /// priority. Default false; CUDA pools never reserve (see the Tenants
    /// and limits page).
    pub reserve_top_class: Option<bool>,
    /// Text models only: most padded tokens per batch. A batch of one
    /// length bucket holds at most this many tokens divided by the
    /// bucket's length in rows (at least one request, at most
    /// `max_batch_size`), so short texts batch wider than long ones.
    /// Absent = rows alone limit a batch (see `BatchingSpec::max_batch_tokens`).
    #[schemars(range(min = 1))]
    pub max_batch_tokens: Option<usize>,
}

/// The words of `batching.queue_order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QueueOrderWord {
    /// Earliest deadline first within a class.
    Deadline,
    /// Arrival order within a class.
    Fifo,
}

impl From<QueueOrderWord> for QueueOrder {
    fn from(word: QueueOrderWord) -> Self {
        match word {
            QueueOrderWord::Deadline => QueueOrder::Deadline,
            QueueOrderWord::Fifo => QueueOrder::Fifo,
        }
    }
}

/// One entry of a model's `pools = [ ... ]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    /// Pool name, default the device name (`cpu`, `cuda`).
    pub name: Option<String>,
    /// `cpu` or `cuda`.
    pub device: OneOf<PoolDevice>,
    /// Worker threads, each with its own session; default 1.
    #[schemars(default = "some_usize::<DEFAULT_POOL_THREADS>", range(min = 1))]
    pub workers: Option<usize>,
    /// ONNX Runtime intra-op threads per worker; default 1.
    #[schemars(default = "some_usize::<DEFAULT_POOL_THREADS>", range(min = 1))]
    pub intra_op_threads: Option<usize>,
    #[schemars(extend("exclusiveMinimum" = 0))]
    /// Relative cost of running here vs. the model's other pools (> 0);
    /// the cheapest pool that fits the budget is used. Default 1.
    pub cost: Option<f64>,
    /// This pool's own batching (fields left out take the model's), e.g.
    /// larger batches on a GPU pool than on a CPU pool.
    pub batching: Option<RawBatching>,
}

/// Where a pool runs: the devices a config may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PoolDevice {
    /// ONNX Runtime's CPU execution provider.
    Cpu,
    /// ONNX Runtime's CUDA execution provider.
    Cuda,
}

impl From<PoolDevice> for DeviceKind {
    fn from(device: PoolDevice) -> Self {
        match device {
            PoolDevice::Cpu => DeviceKind::Cpu,
            PoolDevice::Cuda => DeviceKind::Cuda,
        }
    }
}

/// What routing policies know about one model beyond its [`ModelSpec`]:
/// the optional `cost` and `quality` of its `[[models]]` entry and each
/// pool's `cost`. Absent values get route-position defaults when the
/// fleet view is built (see `routing::fleet`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRouting {
    /// Relative cost of one inference, if configured.
    pub cost: Option<f64>,
    /// Accuracy rank (higher = more accurate), if configured.
    pub quality: Option<u32>,
    /// Relative cost of each pool, by pool name (default 1.0).
    pub pool_costs: HashMap<String, f64>,
}

/// The schema's `models[].batching` default: [`DEFAULT_BATCHING`] as
/// the table would be written. A pool's `batching` has none: its fields
/// default to the model's.
fn default_batching() -> serde_json::Value {
    let d = DEFAULT_BATCHING;
    serde_json::json!({
        "max_batch_size": d.max_batch_size,
        "max_queue_delay_us": d.max_queue_delay.as_micros(),
        "queue_capacity": d.queue_capacity,
        "idle_dispatch": d.idle_dispatch,
        "inline_max_us": d.inline_max.as_micros(),
        "queue_order": d.queue_order.as_str(),
        "preempt": d.preempt,
        "reserve_top_class": d.reserve_top_class,
    })
}

/// Checks every `[[models]]` entry (`repo_dir`: where relative paths
/// start): the runtime's specs, in config order, and each model's routing
/// attributes by name.
pub fn check(
    raw: &[RawModel],
    repo_dir: &Path,
    issues: &mut Issues,
) -> (Vec<ModelSpec>, HashMap<String, ModelRouting>) {
    let mut models: Vec<ModelSpec> = Vec::new();
    let mut routing = HashMap::new();
    for (i, model) in raw.iter().enumerate() {
        let path = format!("models[{i}]");
        routing.insert(model.name.clone(), routing_of(model, &path, issues));
        if models.iter().any(|m| m.name == model.name) {
            issues.push(format!("{path}.name"), format!("duplicate model name {:?}", model.name));
        }
        models.push(model_spec(model, repo_dir, &path, issues));
    }
    (models, routing)
}

fn model_spec(raw: &RawModel, repo_dir: &Path, path: &str, issues: &mut Issues) -> ModelSpec {
    if raw.name.is_empty() || raw.name.contains('/') {
        issues.push(format!("{path}.name"), "must be non-empty and contain no '/'");
    }
    let batching = batching_spec(&raw.batching, &DEFAULT_BATCHING, &format!("{path}.batching"), issues);
    token_budget_needs_text(raw, path, issues);
    let mut pools: Vec<PoolSpec> = Vec::new();
    for (j, pool) in raw.pools.iter().enumerate() {
        if let Some(spec) = pool_spec(pool, &batching, &format!("{path}.pools[{j}]"), issues) {
            if pools.iter().any(|p| p.name == spec.name) {
                issues
                    .push(format!("{path}.pools[{j}].name"), format!("duplicate pool name {:?}", spec.name));
            }
            pools.push(spec);
        }
    }
    if raw.pools.is_empty() {
        pools.push(PoolSpec {
            name: "cpu".into(),
            device: DeviceKind::Cpu,
            workers: DEFAULT_POOL_THREADS,
            intra_op_threads: DEFAULT_POOL_THREADS,
            batching: None,
        });
    }
    let file = PathBuf::from(&raw.path);
    ModelSpec {
        name: raw.name.clone(),
        version: raw.version.unwrap_or(DEFAULT_VERSION),
        path: if file.is_absolute() { file } else { repo_dir.join(file) },
        pools,
        batching,
        idle_unload: raw.idle_unload_s.map(Duration::from_secs),
        warmup: raw.warmup,
        text: super::text_section::check(raw.tokenizer.as_ref(), repo_dir, path, issues),
        limits: request_limits(raw, path, issues),
        source: None,
    }
}

/// A model's `limits`; a limit of 0 is an error under its own field.
fn request_limits(raw: &RawModel, path: &str, issues: &mut Issues) -> RequestLimits {
    let limits = raw.limits.unwrap_or_default();
    for (field, value) in [("max_rows", limits.max_rows), ("max_tokens", limits.max_tokens)] {
        if value == Some(0) {
            issues.push(format!("{path}.limits.{field}"), "must be at least 1");
        }
    }
    if limits.max_tokens.is_some() && raw.tokenizer.is_none() {
        issues.push(format!("{path}.limits.max_tokens"), NOT_TEXT);
    }
    limits
}

/// Why a token setting is refused on a model without a tokenizer.
const NOT_TEXT: &str = "only a text model (with a tokenizer) has tokens";

/// A `batching.max_batch_tokens` on a model without a tokenizer (its own
/// or a pool's) is refused at its path.
fn token_budget_needs_text(raw: &RawModel, path: &str, issues: &mut Issues) {
    if raw.tokenizer.is_some() {
        return;
    }
    if raw.batching.max_batch_tokens.is_some() {
        issues.push(format!("{path}.batching.max_batch_tokens"), NOT_TEXT);
    }
    for (j, pool) in raw.pools.iter().enumerate() {
        if pool.batching.as_ref().is_some_and(|b| b.max_batch_tokens.is_some()) {
            issues.push(format!("{path}.pools[{j}].batching.max_batch_tokens"), NOT_TEXT);
        }
    }
}

/// Batching settings; fields left out take `defaults` (the built-in ones
/// for a model, the model's own for a pool override).
fn batching_spec(
    raw: &RawBatching,
    defaults: &BatchingSpec,
    path: &str,
    issues: &mut Issues,
) -> BatchingSpec {
    BatchingSpec {
        max_batch_size: raw.max_batch_size.unwrap_or(defaults.max_batch_size),
        max_queue_delay: raw.max_queue_delay_us.map_or(defaults.max_queue_delay, Duration::from_micros),
        queue_capacity: issues.positive(
            raw.queue_capacity,
            defaults.queue_capacity,
            format!("{path}.queue_capacity"),
        ),
        idle_dispatch: raw.idle_dispatch.unwrap_or(defaults.idle_dispatch),
        inline_max: raw.inline_max_us.map_or(defaults.inline_max, Duration::from_micros),
        queue_order: raw
            .queue_order
            .as_ref()
            .and_then(|w| w.check("queue order", format!("{path}.queue_order"), issues))
            .map_or(defaults.queue_order, QueueOrder::from),
        preempt: raw.preempt.unwrap_or(defaults.preempt),
        reserve_top_class: raw.reserve_top_class.unwrap_or(defaults.reserve_top_class),
        max_batch_tokens: match raw.max_batch_tokens {
            Some(0) => {
                issues.push(format!("{path}.max_batch_tokens"), "must be at least 1");
                defaults.max_batch_tokens
            }
            Some(tokens) => Some(tokens),
            None => defaults.max_batch_tokens,
        },
    }
}

fn pool_spec(
    raw: &RawPool,
    model_batching: &BatchingSpec,
    path: &str,
    issues: &mut Issues,
) -> Option<PoolSpec> {
    let device = raw.device.check("device", format!("{path}.device"), issues)?;
    if device == PoolDevice::Cuda && raw.batching.as_ref().is_some_and(|b| b.preempt == Some(true)) {
        issues.push(
            format!("{path}.batching.preempt"),
            "only CPU pools preempt; a CUDA pool runs its batches to the end",
        );
    }
    if device == PoolDevice::Cuda && raw.batching.as_ref().is_some_and(|b| b.reserve_top_class == Some(true))
    {
        issues.push(
            format!("{path}.batching.reserve_top_class"),
            "only CPU pools reserve a session for the first class",
        );
    }
    Some(PoolSpec {
        name: raw.name.clone().unwrap_or_else(|| raw.device.text().to_string()),
        device: device.into(),
        workers: issues.positive(raw.workers, DEFAULT_POOL_THREADS, format!("{path}.workers")),
        intra_op_threads: issues.positive(
            raw.intra_op_threads,
            DEFAULT_POOL_THREADS,
            format!("{path}.intra_op_threads"),
        ),
        batching: raw
            .batching
            .as_ref()
            .map(|b| batching_spec(b, model_batching, &format!("{path}.batching"), issues)),
    })
}

/// The models' explicit `rows_independent` settings, by name; a model
/// left out takes the default ([`crate::config::Config::rows_independent`]).
pub fn rows_independent(raw: &[RawModel]) -> HashMap<String, bool> {
    raw.iter().filter_map(|m| Some((m.name.clone(), m.rows_independent?))).collect()
}

/// A model's routing attributes: `cost` and `quality`, and each pool's
/// `cost`; costs must be finite and > 0.
fn routing_of(raw: &RawModel, path: &str, issues: &mut Issues) -> ModelRouting {
    let cost = issues.cost(raw.cost, format!("{path}.cost"));
    let mut pool_costs = HashMap::new();
    for (j, pool) in raw.pools.iter().enumerate() {
        if let Some(c) = issues.cost(pool.cost, format!("{path}.pools[{j}].cost")) {
            pool_costs.insert(pool.name.clone().unwrap_or_else(|| pool.device.text().to_string()), c);
        }
    }
    ModelRouting { cost, quality: raw.quality, pool_costs }
}
