//! From a Triton configuration to Switchyard's model settings:
//!
//! | Triton | Switchyard |
//! |---|---|
//! | `platform: "onnxruntime_onnx"` / `backend: "onnxruntime"` (or neither) | served; any other platform or backend: the model is refused |
//! | `max_batch_size: 0` | no batching (each request runs alone) |
//! | `max_batch_size: N` without `dynamic_batching` | no batching (Triton runs requests as they come) |
//! | `dynamic_batching { }` | `batching.max_batch_size = N` |
//! | `preferred_batch_size: [a, b]` | batches are capped at the largest (`b`), where Triton sends them once full; smaller sizes are not targeted (warned when several) |
//! | `max_queue_delay_microseconds` | `batching.max_queue_delay` |
//! | `default_queue_policy { max_queue_size }` | `batching.queue_capacity` (0: the default) |
//! | `instance_group { kind: KIND_CPU count: c }` | a `cpu` pool of `c` workers, at most [`SpecDefaults::max_workers`] (the cores, at least 4; more is clamped and warned) |
//! | `instance_group { kind: KIND_GPU count: c }` | a `cuda` pool of `c` workers, likewise at most `max_workers` (device 0; `gpus` other than `[0]` warned) |
//! | `KIND_AUTO` | a `cpu` pool, warned (no GPU probing at configuration time) |
//! | `KIND_MODEL` | warned and skipped |
//! | no `instance_group` | one `cpu` pool of one worker |
//! | `parameters { key: "intra_op_thread_count" }` | `intra_op_threads` of every pool |
//! | `version_policy` | which versions are served ([`crate::VersionPolicy`]) |
//! | `input` / `output` | checked against the ONNX graph ([`check_signature`]) |

use std::path::PathBuf;
use std::time::Duration;

use switchyard_runtime::device::DeviceKind;
use switchyard_runtime::signature::ModelSignature;
use switchyard_runtime::spec::{BatchingSpec, ModelSpec, PoolSpec};

use super::config::{InstanceKind, TensorDecl, TritonConfig};

/// The settings a Triton configuration does not give, from the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecDefaults {
    /// Queue capacity per pool when `max_queue_size` is not set.
    pub queue_capacity: usize,
    /// ONNX Runtime intra-op threads per worker when
    /// `intra_op_thread_count` is not set.
    pub intra_op_threads: usize,
    /// Unload after this long idle (`None`: never).
    pub idle_unload: Option<Duration>,
    /// Load at registration instead of on first use.
    pub warmup: bool,
    /// Most workers one `instance_group` becomes (default
    /// [`default_max_workers`]). Each worker is a thread and a whole ONNX
    /// Runtime session (its own copy of the model's weights); past one per
    /// core they only take memory and contend, and a `count: 1000` copied
    /// from elsewhere would start a thousand sessions. A larger count is
    /// clamped to this with a warning, so a configuration Triton serves is
    /// still served.
    pub max_workers: usize,
}

impl Default for SpecDefaults {
    fn default() -> Self {
        SpecDefaults {
            queue_capacity: 1024,
            intra_op_threads: 1,
            idle_unload: None,
            warmup: false,
            max_workers: default_max_workers(),
        }
    }
}

/// The machine's cores, but at least 4, so that the small counts common in
/// Triton configurations are honoured as written on small machines too.
pub fn default_max_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).max(4)
}

/// A model's Switchyard settings, ready to become a [`ModelSpec`] per version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedModel {
    /// Device pools.
    pub pools: Vec<PoolSpec>,
    /// Dynamic batching.
    pub batching: BatchingSpec,
    /// What could not be mapped exactly.
    pub warnings: Vec<String>,
}

/// Parameters of Triton's ONNX Runtime backend that are mapped.
const MAPPED_PARAMETERS: &[&str] = &["intra_op_thread_count"];

/// Maps `config` (see the module table). Fails when the model is not an
/// ONNX Runtime model or a setting cannot be honoured.
pub fn map_config(config: &TritonConfig, defaults: &SpecDefaults) -> Result<MappedModel, String> {
    check_backend(config)?;
    let mut warnings = config.warnings.clone();
    let intra_op_threads = match config.parameters.get("intra_op_thread_count") {
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map_err(|_| format!("parameters.intra_op_thread_count {v:?} is not a number"))?,
        None => defaults.intra_op_threads,
    };
    for key in config.parameters.keys().filter(|k| !MAPPED_PARAMETERS.contains(&k.as_str())) {
        warnings.push(format!("parameters.{key}: not supported by Switchyard; ignored"));
    }
    let batching = batching(config, defaults, &mut warnings);
    let pools = pools(config, intra_op_threads, defaults.max_workers.max(1), &mut warnings);
    Ok(MappedModel { pools, batching, warnings })
}

fn check_backend(config: &TritonConfig) -> Result<(), String> {
    let platform_ok = matches!(config.platform.as_str(), "" | "onnxruntime_onnx");
    let backend_ok = matches!(config.backend.as_str(), "" | "onnxruntime");
    if platform_ok && backend_ok {
        return Ok(());
    }
    let what = if platform_ok {
        format!("backend {:?}", config.backend)
    } else {
        format!("platform {:?}", config.platform)
    };
    Err(format!(
        "{what} is not supported: Switchyard serves ONNX models with ONNX Runtime (onnxruntime_onnx)"
    ))
}

fn batching(config: &TritonConfig, defaults: &SpecDefaults, warnings: &mut Vec<String>) -> BatchingSpec {
    let Some(db) = config.dynamic_batching.as_ref().filter(|_| config.max_batch_size > 0) else {
        if config.dynamic_batching.is_some() {
            warnings.push("dynamic_batching: ignored because max_batch_size is 0".into());
        }
        return BatchingSpec {
            max_batch_size: 1,
            max_queue_delay: Duration::ZERO,
            queue_capacity: defaults.queue_capacity,
            idle_dispatch: true,
            inline_max: BatchingSpec::DEFAULT_INLINE_MAX,
            queue_order: switchyard_runtime::QueueOrder::Deadline,
            preempt: BatchingSpec::DEFAULT_PREEMPT,
            reserve_top_class: BatchingSpec::DEFAULT_RESERVE_TOP_CLASS,
            max_batch_tokens: None,
        };
    };
    let mut max_batch_size = config.max_batch_size as usize;
    if let Some(&largest) = db.preferred_batch_size.iter().max() {
        max_batch_size = (largest as usize).clamp(1, max_batch_size);
        if db.preferred_batch_size.len() > 1 {
            warnings.push(format!(
                "dynamic_batching.preferred_batch_size {:?}: batches are capped at {max_batch_size}; smaller preferred sizes are not targeted",
                db.preferred_batch_size
            ));
        }
    }
    BatchingSpec {
        max_batch_size,
        max_queue_delay: Duration::from_micros(db.max_queue_delay_microseconds),
        queue_capacity: if db.max_queue_size > 0 {
            db.max_queue_size as usize
        } else {
            defaults.queue_capacity
        },
        idle_dispatch: true,
        inline_max: BatchingSpec::DEFAULT_INLINE_MAX,
        queue_order: switchyard_runtime::QueueOrder::Deadline,
        preempt: BatchingSpec::DEFAULT_PREEMPT,
        reserve_top_class: BatchingSpec::DEFAULT_RESERVE_TOP_CLASS,
        max_batch_tokens: None,
    }
}

fn pools(
    config: &TritonConfig,
    intra_op_threads: usize,
    max_workers: usize,
    warnings: &mut Vec<String>,
) -> Vec<PoolSpec> {
    let mut pools: Vec<PoolSpec> = Vec::new();
    for (i, group) in config.instance_groups.iter().enumerate() {
        let device = match group.kind {
            InstanceKind::Cpu => DeviceKind::Cpu,
            InstanceKind::Gpu => DeviceKind::Cuda,
            InstanceKind::Auto => {
                warnings.push(format!(
                    "instance_group[{i}].kind KIND_AUTO: mapped to a CPU pool; use KIND_GPU for CUDA"
                ));
                DeviceKind::Cpu
            }
            InstanceKind::Model => {
                warnings.push(format!("instance_group[{i}].kind KIND_MODEL: not supported; group skipped"));
                continue;
            }
        };
        if device == DeviceKind::Cuda && group.gpus.iter().any(|&g| g != 0) {
            warnings.push(format!(
                "instance_group[{i}].gpus {:?}: Switchyard's CUDA pools run on device 0",
                group.gpus
            ));
        }
        let base = if group.name.is_empty() { device.to_string() } else { group.name.clone() };
        let name = unique_name(&pools, &base);
        let mut workers = group.count as usize;
        if workers > max_workers {
            warnings.push(format!(
                "instance_group[{i}].count {workers}: capped at {max_workers} workers (one per core of this \
                 machine, at least 4); each worker is a thread and a whole ONNX Runtime session"
            ));
            workers = max_workers;
        }
        pools.push(PoolSpec { name, device, workers, intra_op_threads, batching: None });
    }
    if pools.is_empty() {
        pools.push(PoolSpec {
            name: "cpu".into(),
            device: DeviceKind::Cpu,
            workers: 1,
            intra_op_threads,
            batching: None,
        });
    }
    pools
}

fn unique_name(pools: &[PoolSpec], base: &str) -> String {
    let taken = |n: &str| pools.iter().any(|p| p.name == n);
    if !taken(base) {
        return base.to_string();
    }
    (2..).map(|i| format!("{base}-{i}")).find(|n| !taken(n)).unwrap_or_else(|| base.to_string())
}

impl MappedModel {
    /// The spec of one version of the model, named `name`, its model file
    /// at `path`.
    pub fn spec(&self, name: &str, version: u64, path: PathBuf, defaults: &SpecDefaults) -> ModelSpec {
        ModelSpec {
            name: name.to_string(),
            version,
            path,
            pools: self.pools.clone(),
            batching: self.batching.clone(),
            idle_unload: defaults.idle_unload,
            warmup: defaults.warmup,
            text: None,
            limits: switchyard_runtime::limits::RequestLimits::default(),
            source: None,
        }
    }
}

/// Differences between the declared inputs/outputs and the ONNX graph's
/// signature (empty when they agree). Declared dims exclude the batch
/// dimension when `max_batch_size > 0`; `-1` matches any size, and a
/// declared size matches a dynamic graph dimension.
pub fn check_signature(config: &TritonConfig, signature: &ModelSignature) -> Vec<String> {
    let mut problems = Vec::new();
    let batch = config.max_batch_size > 0;
    let mut check = |kind: &str,
                     declared: &[TensorDecl],
                     actual: &[switchyard_runtime::signature::TensorSpec]| {
        for d in declared {
            let Some(a) = actual.iter().find(|a| a.name == d.name) else {
                problems.push(format!("{kind} '{}' is declared but the model has no such {kind}", d.name));
                continue;
            };
            if a.dtype != d.dtype {
                problems
                    .push(format!("{kind} '{}': declared {}, the model has {}", d.name, d.dtype, a.dtype));
            }
            let shape: Vec<i64> = if batch {
                std::iter::once(-1).chain(d.dims.iter().copied()).collect()
            } else {
                d.dims.clone()
            };
            let agree = shape.len() == a.shape.len()
                && shape.iter().zip(&a.shape).all(|(&want, &have)| want == -1 || have == -1 || want == have);
            if !agree {
                problems.push(format!(
                    "{kind} '{}': declared shape {shape:?}, the model has {:?}",
                    d.name, a.shape
                ));
            }
        }
    };
    check("input", &config.inputs, &signature.inputs);
    check("output", &config.outputs, &signature.outputs);
    problems
}
