//! The parts of a Triton `config.pbtxt` that Switchyard maps, read out of
//! the parsed message into plain types. Every field that is set but not
//! mapped becomes a warning naming its path (`optimization`,
//! `instance_group[0].rate_limiter`); fields that change what a model
//! computes or how it must be called and cannot be honoured (sequence
//! batching, ensembles, decoupled responses) make the model unservable.

use std::collections::BTreeMap;

use prost_reflect::{DynamicMessage, MapKey, Value};
use switchyard_runtime::tensor::{DataType, ALL_DATA_TYPES};

use crate::versions::VersionPolicy;

use super::schema::parse_config;

/// Triton's default model file in a version folder.
pub const DEFAULT_MODEL_FILENAME: &str = "model.onnx";

/// A declared input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDecl {
    /// Tensor name in the graph.
    pub name: String,
    /// Element type.
    pub dtype: DataType,
    /// Shape without the batch dimension when `max_batch_size > 0`
    /// (Triton's convention); `-1` is a dynamic dimension.
    pub dims: Vec<i64>,
}

/// One `instance_group` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceGroup {
    /// The group's name (empty when not given).
    pub name: String,
    /// `KIND_AUTO`, `KIND_GPU`, `KIND_CPU` or `KIND_MODEL`.
    pub kind: InstanceKind,
    /// Instances (Triton's default 1).
    pub count: u32,
    /// GPU ids listed (empty: all).
    pub gpus: Vec<i32>,
}

/// Where an instance group runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceKind {
    /// GPU when available, else CPU.
    Auto,
    /// GPU.
    Gpu,
    /// CPU.
    Cpu,
    /// Decided by the backend.
    Model,
}

/// `dynamic_batching { ... }`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicBatching {
    /// Preferred batch sizes (may be empty).
    pub preferred_batch_size: Vec<u32>,
    /// How long a request may wait for others (Triton's default 0).
    pub max_queue_delay_microseconds: u64,
    /// `default_queue_policy.max_queue_size` (0: unbounded).
    pub max_queue_size: u32,
}

/// The mapped part of a model's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TritonConfig {
    /// `name`, when given (it must equal the folder name).
    pub name: Option<String>,
    /// `platform` (`onnxruntime_onnx`), possibly empty.
    pub platform: String,
    /// `backend` (`onnxruntime`), possibly empty.
    pub backend: String,
    /// `max_batch_size` (0: the model does not batch; dims are full shapes).
    pub max_batch_size: u32,
    /// Declared inputs.
    pub inputs: Vec<TensorDecl>,
    /// Declared outputs.
    pub outputs: Vec<TensorDecl>,
    /// The dynamic batcher, when enabled.
    pub dynamic_batching: Option<DynamicBatching>,
    /// Instance groups, in order.
    pub instance_groups: Vec<InstanceGroup>,
    /// Which versions to serve.
    pub version_policy: VersionPolicy,
    /// The model file in each version folder.
    pub default_model_filename: String,
    /// `parameters { key: "k" value: { string_value: "v" } }`.
    pub parameters: BTreeMap<String, String>,
    /// Fields set in the file that Switchyard does not map.
    pub warnings: Vec<String>,
}

/// Fields of `ModelConfig` read here; the rest are warned about.
const MAPPED: &[&str] = &[
    "name",
    "platform",
    "backend",
    "version_policy",
    "max_batch_size",
    "input",
    "output",
    "dynamic_batching",
    "instance_group",
    "default_model_filename",
    "parameters",
];

/// Fields that make the model unservable: Switchyard cannot call such a
/// model correctly.
const REFUSED: &[(&str, &str)] = &[
    ("sequence_batching", "stateful sequence batching is not supported"),
    ("ensemble_scheduling", "ensembles are not supported (serve the steps as models behind a route)"),
    ("model_transaction_policy", "decoupled (streaming) models are not supported"),
    ("batch_input", "batch inputs are not supported"),
    ("batch_output", "batch outputs are not supported"),
];

impl TritonConfig {
    /// Parses `text` (a `config.pbtxt`). The error is `(position, reason)`
    /// with a 1-based `line:column` when known.
    pub fn parse(text: &str) -> Result<TritonConfig, (Option<(usize, usize)>, String)> {
        let msg = parse_config(text).map_err(|e| (e.position, e.reason))?;
        let mut config = TritonConfig::from_message(&msg).map_err(|reason| (None, reason))?;
        config.default_model_filename = Some(config.default_model_filename)
            .filter(|f| !f.is_empty())
            .unwrap_or_else(|| DEFAULT_MODEL_FILENAME.to_string());
        Ok(config)
    }

    /// A configuration with every field at Triton's default (a model folder
    /// without `config.pbtxt`).
    pub fn defaults() -> TritonConfig {
        TritonConfig { default_model_filename: DEFAULT_MODEL_FILENAME.into(), ..TritonConfig::default() }
    }

    fn from_message(msg: &DynamicMessage) -> Result<TritonConfig, String> {
        let mut warnings = Vec::new();
        for (field, _) in msg.fields() {
            let name = field.name();
            if let Some((_, why)) = REFUSED.iter().find(|(f, _)| *f == name) {
                if name != "model_transaction_policy" || bool_at(msg, "model_transaction_policy", "decoupled")
                {
                    return Err(format!("{name}: {why}"));
                }
            }
            if !MAPPED.contains(&name) {
                warnings.push(format!("{name}: not supported by Switchyard; ignored"));
            }
        }
        let max_batch_size = u32::try_from(int(msg, "max_batch_size"))
            .map_err(|_| "max_batch_size must not be negative".to_string())?;
        let config = TritonConfig {
            name: Some(string(msg, "name")).filter(|n| !n.is_empty()),
            platform: string(msg, "platform"),
            backend: string(msg, "backend"),
            max_batch_size,
            inputs: tensors(
                msg,
                "input",
                &["name", "data_type", "dims", "format", "reshape"],
                &mut warnings,
            )?,
            outputs: tensors(msg, "output", &["name", "data_type", "dims", "reshape"], &mut warnings)?,
            dynamic_batching: message(msg, "dynamic_batching").map(|m| dynamic_batching(&m, &mut warnings)),
            instance_groups: instance_groups(msg, &mut warnings)?,
            version_policy: version_policy(msg)?,
            default_model_filename: string(msg, "default_model_filename"),
            parameters: parameters(msg),
            warnings,
        };
        Ok(config)
    }
}

fn field<'a>(msg: &'a DynamicMessage, name: &str) -> Option<std::borrow::Cow<'a, Value>> {
    msg.has_field_by_name(name).then(|| msg.get_field_by_name(name)).flatten()
}

fn string(msg: &DynamicMessage, name: &str) -> String {
    field(msg, name).and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn int(msg: &DynamicMessage, name: &str) -> i64 {
    field(msg, name)
        .and_then(|v| match v.as_ref() {
            Value::I32(x) | Value::EnumNumber(x) => Some(i64::from(*x)),
            Value::U32(x) => Some(i64::from(*x)),
            Value::I64(x) => Some(*x),
            Value::U64(x) => i64::try_from(*x).ok(),
            _ => None,
        })
        .unwrap_or(0)
}

fn message(msg: &DynamicMessage, name: &str) -> Option<DynamicMessage> {
    field(msg, name).and_then(|v| v.as_message().cloned())
}

fn list(msg: &DynamicMessage, name: &str) -> Vec<Value> {
    field(msg, name).and_then(|v| v.as_list().map(<[Value]>::to_vec)).unwrap_or_default()
}

fn bool_at(msg: &DynamicMessage, outer: &str, inner: &str) -> bool {
    message(msg, outer).and_then(|m| field(&m, inner).and_then(|v| v.as_bool())).unwrap_or(false)
}

/// Warns about every set field of `msg` (at `path`) not in `known`.
fn warn_unmapped(msg: &DynamicMessage, path: &str, known: &[&str], warnings: &mut Vec<String>) {
    for (field, _) in msg.fields() {
        if !known.contains(&field.name()) {
            warnings.push(format!("{path}.{}: not supported by Switchyard; ignored", field.name()));
        }
    }
}

fn tensors(
    msg: &DynamicMessage,
    name: &str,
    known: &[&str],
    warnings: &mut Vec<String>,
) -> Result<Vec<TensorDecl>, String> {
    let mut out = Vec::new();
    for (i, value) in list(msg, name).iter().enumerate() {
        let Some(t) = value.as_message() else { continue };
        let path = format!("{name}[{i}]");
        warn_unmapped(t, &path, known, warnings);
        if int(t, "format") != 0 {
            warnings.push(format!("{path}.format: informational in Switchyard (no layout conversion)"));
        }
        let dtype_number = int(t, "data_type");
        let dtype =
            data_type(dtype_number).ok_or_else(|| format!("{path}.data_type: TYPE_INVALID or unknown"))?;
        let mut dims: Vec<i64> = list(t, "dims").iter().filter_map(|d| d.as_i64()).collect();
        if let Some(reshape) = message(t, "reshape") {
            // `dims: [1] reshape: { shape: [] }` is Triton's spelling of one
            // scalar per batch row (a graph shape of `[batch]`); other
            // reshapes would need a tensor reshape Switchyard does not do.
            if dims == [1] && list(&reshape, "shape").is_empty() {
                dims.clear();
            } else {
                warnings.push(format!("{path}.reshape: not supported by Switchyard; ignored"));
            }
        }
        out.push(TensorDecl { name: string(t, "name"), dtype, dims });
    }
    Ok(out)
}

/// Triton's `DataType` number -> Switchyard's type (by the names both use).
fn data_type(number: i64) -> Option<DataType> {
    const NAMES: [&str; 15] = [
        "TYPE_INVALID",
        "TYPE_BOOL",
        "TYPE_UINT8",
        "TYPE_UINT16",
        "TYPE_UINT32",
        "TYPE_UINT64",
        "TYPE_INT8",
        "TYPE_INT16",
        "TYPE_INT32",
        "TYPE_INT64",
        "TYPE_FP16",
        "TYPE_FP32",
        "TYPE_FP64",
        "TYPE_STRING",
        "TYPE_BF16",
    ];
    let name = NAMES.get(usize::try_from(number).ok()?)?;
    ALL_DATA_TYPES.into_iter().find(|d| d.triton_config_name() == *name)
}

fn dynamic_batching(msg: &DynamicMessage, warnings: &mut Vec<String>) -> DynamicBatching {
    let known = ["preferred_batch_size", "max_queue_delay_microseconds", "default_queue_policy"];
    warn_unmapped(msg, "dynamic_batching", &known, warnings);
    let queue = message(msg, "default_queue_policy");
    if let Some(q) = &queue {
        warn_unmapped(q, "dynamic_batching.default_queue_policy", &["max_queue_size"], warnings);
    }
    DynamicBatching {
        preferred_batch_size: list(msg, "preferred_batch_size")
            .iter()
            .filter_map(|v| v.as_i32().and_then(|x| u32::try_from(x).ok()))
            .collect(),
        max_queue_delay_microseconds: u64::try_from(int(msg, "max_queue_delay_microseconds")).unwrap_or(0),
        max_queue_size: queue.map_or(0, |q| u32::try_from(int(&q, "max_queue_size")).unwrap_or(0)),
    }
}

fn instance_groups(msg: &DynamicMessage, warnings: &mut Vec<String>) -> Result<Vec<InstanceGroup>, String> {
    let mut groups = Vec::new();
    for (i, value) in list(msg, "instance_group").iter().enumerate() {
        let Some(g) = value.as_message() else { continue };
        let path = format!("instance_group[{i}]");
        warn_unmapped(g, &path, &["name", "kind", "count", "gpus"], warnings);
        let kind = match int(g, "kind") {
            1 => InstanceKind::Gpu,
            2 => InstanceKind::Cpu,
            3 => InstanceKind::Model,
            _ => InstanceKind::Auto,
        };
        let count = match int(g, "count") {
            0 => 1,
            n => u32::try_from(n).map_err(|_| format!("{path}.count must be positive"))?,
        };
        let gpus = list(g, "gpus").iter().filter_map(Value::as_i32).collect();
        groups.push(InstanceGroup { name: string(g, "name"), kind, count, gpus });
    }
    Ok(groups)
}

fn version_policy(msg: &DynamicMessage) -> Result<VersionPolicy, String> {
    let Some(policy) = message(msg, "version_policy") else { return Ok(VersionPolicy::default()) };
    if let Some(latest) = message(&policy, "latest") {
        let n = u32::try_from(int(&latest, "num_versions")).unwrap_or(0);
        return Ok(VersionPolicy::Latest(n.max(1)));
    }
    if message(&policy, "all").is_some() {
        return Ok(VersionPolicy::All);
    }
    if let Some(specific) = message(&policy, "specific") {
        let versions: Vec<u64> = list(&specific, "versions")
            .iter()
            .filter_map(|v| v.as_i64().and_then(|x| u64::try_from(x).ok()))
            .collect();
        if versions.is_empty() {
            return Err("version_policy.specific lists no versions".into());
        }
        return Ok(VersionPolicy::Specific(versions));
    }
    Ok(VersionPolicy::default())
}

fn parameters(msg: &DynamicMessage) -> BTreeMap<String, String> {
    let Some(map) = field(msg, "parameters").and_then(|v| v.as_map().cloned()) else {
        return BTreeMap::new();
    };
    map.into_iter()
        .filter_map(|(k, v)| {
            let MapKey::String(key) = k else { return None };
            let value = v.as_message().map(|m| string(m, "string_value")).unwrap_or_default();
            Some((key, value))
        })
        .collect()
}
