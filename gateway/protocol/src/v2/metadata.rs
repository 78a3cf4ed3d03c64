//! JSON documents of the metadata endpoints: server metadata (`GET /v2`),
//! model metadata (`GET /v2/models/{m}`) and Triton's model configuration
//! (`GET /v2/models/{m}/config`), in the shapes `tritonclient` and
//! `perf_analyzer` read.

use serde_json::{Map, Value};
use switchyard_runtime::signature::{ModelSignature, TensorSpec};
use switchyard_runtime::{DeviceKind, ModelSpec};

/// Server name reported by `GET /v2`.
pub const SERVER_NAME: &str = "switchyard";
/// Protocol extensions Switchyard implements, as reported by `GET /v2`.
pub const EXTENSIONS: [&str; 5] =
    ["binary_tensor_data", "parameters", "model_configuration", "classification", "statistics"];
/// The `platform` of ONNX models, as Triton names it.
pub const ONNX_PLATFORM: &str = "onnxruntime_onnx";
/// The `backend` of ONNX models, as Triton names it.
pub const ONNX_BACKEND: &str = "onnxruntime";

/// Builds a JSON object from its fields (serialized with sorted keys).
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<String, Value>>())
}

/// `GET /v2`: `{"name":"switchyard","version":...,"extensions":[...]}`.
pub fn server_metadata() -> Value {
    object([
        ("name", Value::from(SERVER_NAME)),
        ("version", Value::from(env!("CARGO_PKG_VERSION"))),
        ("extensions", Value::from(EXTENSIONS.to_vec())),
    ])
}

/// One V2 metadata tensor: name, datatype, full shape (`-1` = dynamic).
fn metadata_tensor(spec: &TensorSpec) -> Value {
    object([
        ("name", Value::from(spec.name.as_str())),
        ("datatype", Value::from(spec.dtype.v2_name())),
        ("shape", Value::from(spec.shape.clone())),
    ])
}

/// `GET /v2/models/{m}`: name, versions, platform, and inputs/outputs with
/// their full shapes, batch dimension included.
pub fn model_metadata(name: &str, versions: &[String], platform: &str, signature: &ModelSignature) -> Value {
    object([
        ("name", Value::from(name)),
        ("versions", Value::from(versions.to_vec())),
        ("platform", Value::from(platform)),
        ("inputs", Value::from(signature.inputs.iter().map(metadata_tensor).collect::<Vec<_>>())),
        ("outputs", Value::from(signature.outputs.iter().map(metadata_tensor).collect::<Vec<_>>())),
    ])
}

/// A tensor's Triton `dims` (the shape without the batch dimension when
/// the model batches) and, when that leaves no dimension, the `reshape`
/// Triton uses for it (`dims: [1]`, `reshape: {shape: []}`).
fn config_dims(spec: &TensorSpec, batched: bool) -> (Vec<i64>, Option<Value>) {
    let dims: Vec<i64> =
        if batched { spec.shape.iter().skip(1).copied().collect() } else { spec.shape.clone() };
    if dims.is_empty() {
        (vec![1], Some(object([("shape", Value::Array(Vec::new()))])))
    } else {
        (dims, None)
    }
}

fn config_input(spec: &TensorSpec, batched: bool) -> Value {
    let (dims, reshape) = config_dims(spec, batched);
    let mut value = object([
        ("name", Value::from(spec.name.as_str())),
        ("data_type", Value::from(spec.dtype.triton_config_name())),
        ("format", Value::from("FORMAT_NONE")),
        ("dims", Value::from(dims)),
        ("is_shape_tensor", Value::Bool(false)),
        ("allow_ragged_batch", Value::Bool(false)),
        ("optional", Value::Bool(false)),
    ]);
    if let (Some(reshape), Value::Object(map)) = (reshape, &mut value) {
        map.insert("reshape".to_owned(), reshape);
    }
    value
}

fn config_output(spec: &TensorSpec, batched: bool) -> Value {
    let (dims, reshape) = config_dims(spec, batched);
    let mut value = object([
        ("name", Value::from(spec.name.as_str())),
        ("data_type", Value::from(spec.dtype.triton_config_name())),
        ("dims", Value::from(dims)),
        ("label_filename", Value::from("")),
        ("is_shape_tensor", Value::Bool(false)),
    ]);
    if let (Some(reshape), Value::Object(map)) = (reshape, &mut value) {
        map.insert("reshape".to_owned(), reshape);
    }
    value
}

/// How a local model runs, as a Triton model configuration shows it
/// (`max_batch_size`, `dynamic_batching`, `instance_group`). Upstream
/// models run elsewhere: their view is [`ServingView::default`] (no
/// batching, no instance groups).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServingView {
    /// Most rows per batch; 0 when the model does not batch (its shapes are
    /// then shown whole).
    pub max_batch_size: usize,
    /// `Some` when requests are batched dynamically.
    pub dynamic: Option<DynamicBatchingView>,
    /// One group per device pool: Triton's `kind` (`KIND_CPU`,
    /// `KIND_GPU`) and the pool's worker count.
    pub instance_groups: Vec<(&'static str, usize)>,
}

impl ServingView {
    /// What a local model's configuration shows of its batching and pools.
    pub fn of(spec: &ModelSpec) -> ServingView {
        let batching = &spec.batching;
        let batched = batching.max_batch_size > 1;
        let dynamic = batched.then(|| DynamicBatchingView {
            max_queue_delay_us: u64::try_from(batching.max_queue_delay.as_micros()).unwrap_or(u64::MAX),
            preferred_batch_size: batching.max_batch_size,
            max_queue_size: batching.queue_capacity,
        });
        let instance_groups = spec
            .pools
            .iter()
            .map(|pool| match pool.device {
                DeviceKind::Cpu => ("KIND_CPU", pool.workers),
                DeviceKind::Cuda => ("KIND_GPU", pool.workers),
            })
            .collect();
        ServingView {
            max_batch_size: if batched { batching.max_batch_size } else { 0 },
            dynamic,
            instance_groups,
        }
    }
}

/// The `dynamic_batching` block of a [`ServingView`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicBatchingView {
    /// How long a batch waits to fill, in microseconds.
    pub max_queue_delay_us: u64,
    /// Batches are sent once this full (Switchyard's one preferred size is
    /// its `max_batch_size`).
    pub preferred_batch_size: usize,
    /// Requests each pool may hold waiting.
    pub max_queue_size: usize,
}

/// `GET /v2/models/{m}/config`: a Triton model configuration.
///
/// With `max_batch_size > 0` the first dimension of every signature shape
/// is taken as the batch dimension and left out of `dims`, as Triton does;
/// with 0 the shapes are shown whole. `dynamic_batching` (its presence
/// tells `perf_analyzer` the model batches dynamically) appears only when
/// the model batches dynamically, and `instance_group` lists the model's
/// device pools, so a Triton-layout repository's `config.pbtxt` settings
/// can be checked as they were applied.
pub fn model_config(name: &str, signature: &ModelSignature, serving: &ServingView) -> Value {
    let batched = serving.max_batch_size > 0;
    let mut config = Map::new();
    config.insert("name".to_owned(), Value::from(name));
    config.insert("platform".to_owned(), Value::from(ONNX_PLATFORM));
    config.insert("backend".to_owned(), Value::from(ONNX_BACKEND));
    config.insert(
        "version_policy".to_owned(),
        object([("latest", object([("num_versions", Value::from(1))]))]),
    );
    config.insert("max_batch_size".to_owned(), Value::from(serving.max_batch_size));
    config.insert(
        "input".to_owned(),
        Value::from(signature.inputs.iter().map(|s| config_input(s, batched)).collect::<Vec<_>>()),
    );
    config.insert(
        "output".to_owned(),
        Value::from(signature.outputs.iter().map(|s| config_output(s, batched)).collect::<Vec<_>>()),
    );
    config.insert("batch_input".to_owned(), Value::Array(Vec::new()));
    config.insert("batch_output".to_owned(), Value::Array(Vec::new()));
    if let Some(dynamic) = &serving.dynamic {
        config.insert("dynamic_batching".to_owned(), dynamic_batching(dynamic));
    }
    if !serving.instance_groups.is_empty() {
        let groups = serving.instance_groups.iter().enumerate().map(|(i, (kind, count))| {
            object([
                ("name", Value::from(format!("{name}_{i}"))),
                ("kind", Value::from(*kind)),
                ("count", Value::from(*count)),
            ])
        });
        config.insert("instance_group".to_owned(), Value::from(groups.collect::<Vec<_>>()));
    }
    config.insert("default_model_filename".to_owned(), Value::from("model.onnx"));
    config.insert("model_transaction_policy".to_owned(), object([("decoupled", Value::Bool(false))]));
    config.insert("parameters".to_owned(), Value::Object(Map::new()));
    Value::Object(config)
}

/// The `dynamic_batching` block.
fn dynamic_batching(view: &DynamicBatchingView) -> Value {
    object([
        ("preferred_batch_size", Value::from(vec![view.preferred_batch_size])),
        ("max_queue_delay_microseconds", Value::from(view.max_queue_delay_us)),
        ("preserve_ordering", Value::Bool(false)),
        ("priority_levels", Value::from(0)),
        ("default_priority_level", Value::from(0)),
        ("default_queue_policy", object([("max_queue_size", Value::from(view.max_queue_size))])),
        ("priority_queue_policy", Value::Object(Map::new())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_runtime::tensor::DataType;

    fn signature() -> ModelSignature {
        ModelSignature {
            inputs: vec![
                TensorSpec { name: "X".to_owned(), dtype: DataType::F32, shape: vec![-1, 64] },
                TensorSpec { name: "ids".to_owned(), dtype: DataType::I64, shape: vec![-1] },
            ],
            outputs: vec![TensorSpec {
                name: "probabilities".to_owned(),
                dtype: DataType::F32,
                shape: vec![-1, 10],
            }],
        }
    }

    #[test]
    fn server_metadata_lists_binary_extension() {
        let v = server_metadata();
        assert_eq!(v["name"], "switchyard");
        assert!(v["version"].is_string());
        assert!(v["extensions"].as_array().unwrap().contains(&Value::from("binary_tensor_data")));
    }

    #[test]
    fn model_metadata_keeps_batch_dim() {
        let v = model_metadata("digits", &["1".to_owned()], ONNX_PLATFORM, &signature());
        let expected = r#"{"inputs":[{"datatype":"FP32","name":"X","shape":[-1,64]},{"datatype":"INT64","name":"ids","shape":[-1]}],"name":"digits","outputs":[{"datatype":"FP32","name":"probabilities","shape":[-1,10]}],"platform":"onnxruntime_onnx","versions":["1"]}"#;
        assert_eq!(v.to_string(), expected);
    }

    #[test]
    fn config_drops_batch_dim_when_batching() {
        let serving = ServingView {
            max_batch_size: 64,
            dynamic: Some(DynamicBatchingView {
                max_queue_delay_us: 500,
                preferred_batch_size: 64,
                max_queue_size: 256,
            }),
            instance_groups: vec![("KIND_CPU", 2), ("KIND_GPU", 1)],
        };
        let v = model_config("digits", &signature(), &serving);
        assert_eq!(v["max_batch_size"], 64);
        assert_eq!(v["platform"], "onnxruntime_onnx");
        assert_eq!(v["backend"], "onnxruntime");
        assert_eq!(v["input"][0]["data_type"], "TYPE_FP32");
        assert_eq!(v["input"][0]["dims"], serde_json::json!([64]));
        assert_eq!(v["input"][1]["dims"], serde_json::json!([1]));
        assert_eq!(v["input"][1]["reshape"]["shape"], serde_json::json!([]));
        assert_eq!(v["output"][0]["dims"], serde_json::json!([10]));
        assert_eq!(v["dynamic_batching"]["max_queue_delay_microseconds"], 500);
        assert_eq!(v["dynamic_batching"]["preferred_batch_size"], serde_json::json!([64]));
        assert_eq!(v["dynamic_batching"]["default_queue_policy"]["max_queue_size"], 256);
        assert_eq!(v["instance_group"][0]["kind"], "KIND_CPU");
        assert_eq!(v["instance_group"][0]["count"], 2);
        assert_eq!(v["instance_group"][1]["kind"], "KIND_GPU");
        assert_eq!(v["model_transaction_policy"]["decoupled"], false);
    }

    #[test]
    fn config_keeps_full_shape_without_batching() {
        let v = model_config("digits", &signature(), &ServingView::default());
        assert_eq!(v["max_batch_size"], 0);
        assert_eq!(v["input"][0]["dims"], serde_json::json!([-1, 64]));
        assert!(v.get("dynamic_batching").is_none());
    }
}
