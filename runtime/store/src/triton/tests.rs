//! Tests of `config.pbtxt` reading and mapping, with configurations
//! written as Triton's documentation writes them.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use switchyard_runtime::device::DeviceKind;
use switchyard_runtime::signature::{ModelSignature, TensorSpec};
use switchyard_runtime::tensor::DataType;

use super::config::{InstanceKind, TritonConfig};
use super::mapping::{check_signature, map_config, SpecDefaults};
use crate::versions::VersionPolicy;

const DIGITS: &str = r#"
name: "digits"
platform: "onnxruntime_onnx"
max_batch_size: 64
input [
  {
    name: "X"
    data_type: TYPE_FP32
    dims: [ 64 ]
  }
]
output [
  { name: "label", data_type: TYPE_INT64, dims: [ 1 ], reshape: { shape: [ ] } },
  { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] }
]
dynamic_batching {
  preferred_batch_size: [ 16, 32 ]
  max_queue_delay_microseconds: 300
  default_queue_policy { max_queue_size: 512 }
}
instance_group [
  { kind: KIND_CPU, count: 2 },
  { name: "gpu", kind: KIND_GPU, count: 1, gpus: [ 0 ] }
]
version_policy: { latest: { num_versions: 2 } }
parameters { key: "intra_op_thread_count" value: { string_value: "2" } }
"#;

#[test]
fn a_documented_config_maps_to_pools_and_batching() {
    let config = TritonConfig::parse(DIGITS).unwrap();
    assert_eq!(config.name.as_deref(), Some("digits"));
    assert_eq!(config.max_batch_size, 64);
    assert_eq!(config.inputs[0].dtype, DataType::F32);
    assert_eq!(config.inputs[0].dims, [64]);
    assert_eq!(config.outputs.len(), 2);
    assert!(config.outputs[0].dims.is_empty(), "dims [1] + reshape [] = one scalar per row");
    assert_eq!(config.instance_groups[0].kind, InstanceKind::Cpu);
    assert_eq!(config.version_policy, VersionPolicy::Latest(2));
    assert_eq!(config.default_model_filename, "model.onnx");
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);

    let mapped = map_config(&config, &SpecDefaults::default()).unwrap();
    assert_eq!(mapped.batching.max_batch_size, 32, "capped at the largest preferred size");
    assert_eq!(mapped.batching.max_queue_delay, Duration::from_micros(300));
    assert_eq!(mapped.batching.queue_capacity, 512);
    let pools: Vec<_> =
        mapped.pools.iter().map(|p| (p.name.as_str(), p.device, p.workers, p.intra_op_threads)).collect();
    assert_eq!(pools, [("cpu", DeviceKind::Cpu, 2, 2), ("gpu", DeviceKind::Cuda, 1, 2)]);
    assert_eq!(mapped.warnings.len(), 1, "two preferred sizes: {:?}", mapped.warnings);
    assert!(mapped.warnings[0].contains("preferred_batch_size"));
}

#[test]
fn unsupported_fields_are_warnings_with_their_path() {
    let text = r#"
backend: "onnxruntime"
max_batch_size: 8
optimization { execution_accelerators { gpu_execution_accelerator : [ { name : "tensorrt" } ] } }
model_warmup [{ name: "w" batch_size: 1 inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 64 ] zero_data: true } } }]
response_cache { enable: true }
instance_group [ { count: 1 kind: KIND_GPU gpus: [ 1 ] rate_limiter { priority: 2 } } ]
input [ { name: "X" data_type: TYPE_FP32 dims: [ 64 ] reshape: { shape: [ 8, 8 ] } } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 10 ] label_filename: "labels.txt" } ]
dynamic_batching { preserve_ordering: true }
parameters [ { key: "cudnn_conv_algo_search" value: { string_value: "1" } } ]
"#;
    let config = TritonConfig::parse(text).unwrap();
    let mapped = map_config(&config, &SpecDefaults::default()).unwrap();
    let all = mapped.warnings.join("\n");
    for path in [
        "optimization",
        "model_warmup",
        "response_cache",
        "instance_group[0].rate_limiter",
        "instance_group[0].gpus [1]",
        "input[0].reshape",
        "output[0].label_filename",
        "dynamic_batching.preserve_ordering",
        "parameters.cudnn_conv_algo_search",
    ] {
        assert!(all.contains(path), "no warning for {path}:\n{all}");
    }
    assert_eq!(mapped.batching.max_batch_size, 8);
    assert_eq!(mapped.pools[0].device, DeviceKind::Cuda);
}

#[test]
fn models_switchyard_cannot_serve_are_refused() {
    for (text, why) in [
        ("platform: \"tensorrt_plan\"", "tensorrt_plan"),
        ("backend: \"python\"", "python"),
        ("sequence_batching { max_sequence_idle_microseconds: 5 }", "sequence batching"),
        (
            "platform: \"ensemble\" ensemble_scheduling { step [ { model_name: \"a\" model_version: -1 } ] }",
            "ensemble",
        ),
        ("model_transaction_policy { decoupled: true }", "decoupled"),
    ] {
        let refused = TritonConfig::parse(text)
            .map_err(|(_, r)| r)
            .and_then(|c| map_config(&c, &SpecDefaults::default()).map(|_| ()));
        let err = refused.unwrap_err();
        assert!(err.contains(why), "{text}: {err}");
    }
    assert!(TritonConfig::parse("model_transaction_policy { decoupled: false }").is_ok());
    assert!(TritonConfig::parse("max_batch_size: -1").is_err());
    assert!(TritonConfig::parse("input [ { name: \"X\" dims: [ 1 ] } ]").is_err(), "TYPE_INVALID");
}

#[test]
fn an_instance_count_past_the_cap_is_clamped_with_a_warning() {
    let text = "instance_group [ { kind: KIND_CPU count: 1000 }, { kind: KIND_GPU count: 3 } ]";
    let config = TritonConfig::parse(text).unwrap();
    let mapped = map_config(&config, &SpecDefaults { max_workers: 3, ..SpecDefaults::default() }).unwrap();
    let workers: Vec<_> = mapped.pools.iter().map(|p| (p.device, p.workers)).collect();
    assert_eq!(workers, [(DeviceKind::Cpu, 3), (DeviceKind::Cuda, 3)], "at the cap: as written");
    assert_eq!(mapped.warnings.len(), 1, "{:?}", mapped.warnings);
    assert!(mapped.warnings[0].starts_with("instance_group[0].count 1000: capped at 3 workers"));
    assert!(super::mapping::default_max_workers() >= 4, "small counts are honoured on any machine");
}

#[test]
fn defaults_batching_off_and_kinds() {
    let no_batching = TritonConfig::parse("max_batch_size: 16").unwrap();
    let mapped = map_config(&no_batching, &SpecDefaults::default()).unwrap();
    assert_eq!(mapped.batching.max_batch_size, 1, "no dynamic_batching: requests run as they come");
    assert_eq!(mapped.pools.len(), 1);
    assert_eq!((mapped.pools[0].name.as_str(), mapped.pools[0].workers), ("cpu", 1));

    let empty = TritonConfig::parse("max_batch_size: 4 dynamic_batching { }").unwrap();
    let mapped = map_config(&empty, &SpecDefaults { queue_capacity: 77, ..SpecDefaults::default() }).unwrap();
    assert_eq!((mapped.batching.max_batch_size, mapped.batching.queue_capacity), (4, 77));
    assert_eq!(mapped.batching.max_queue_delay, Duration::ZERO, "Triton's default delay is 0");

    let zero = TritonConfig::parse("max_batch_size: 0 dynamic_batching { }").unwrap();
    let mapped = map_config(&zero, &SpecDefaults::default()).unwrap();
    assert_eq!(mapped.batching.max_batch_size, 1);
    assert!(mapped.warnings.iter().any(|w| w.contains("max_batch_size is 0")));

    let kinds = "instance_group [ { kind: KIND_AUTO }, { kind: KIND_MODEL }, { kind: KIND_CPU count: 3 } ]";
    let mapped = map_config(&TritonConfig::parse(kinds).unwrap(), &SpecDefaults::default()).unwrap();
    let names: Vec<_> = mapped.pools.iter().map(|p| (p.name.as_str(), p.workers)).collect();
    assert_eq!(names, [("cpu", 1), ("cpu-2", 3)], "AUTO -> cpu, MODEL skipped, names unique");
    assert_eq!(mapped.warnings.len(), 2, "{:?}", mapped.warnings);

    let policies = [
        ("version_policy: { all { } }", VersionPolicy::All),
        ("version_policy: { specific: { versions: [1, 3] } }", VersionPolicy::Specific(vec![1, 3])),
        ("", VersionPolicy::Latest(1)),
    ];
    for (text, policy) in policies {
        assert_eq!(TritonConfig::parse(text).unwrap().version_policy, policy, "{text}");
    }
    assert!(
        TritonConfig::parse("default_model_filename: \"net.onnx\"").unwrap().default_model_filename
            == "net.onnx"
    );
}

#[test]
fn parse_errors_point_at_the_line() {
    let (pos, reason) =
        TritonConfig::parse("name: \"m\"\nmax_batch_size: 8\ndynamic_batchin { }\n").unwrap_err();
    assert_eq!(pos, Some((3, 1)));
    assert!(reason.contains("dynamic_batchin"), "{reason}");
}

#[test]
fn declared_signature_is_checked_against_the_graph() {
    let config = TritonConfig::parse(DIGITS).unwrap();
    let spec =
        |name: &str, dtype, shape: &[i64]| TensorSpec { name: name.into(), dtype, shape: shape.to_vec() };
    let graph = ModelSignature {
        inputs: vec![spec("X", DataType::F32, &[-1, 64])],
        outputs: vec![spec("label", DataType::I64, &[-1]), spec("probabilities", DataType::F32, &[-1, 10])],
    };
    assert!(check_signature(&config, &graph).is_empty(), "{:?}", check_signature(&config, &graph));
    let wrong = ModelSignature {
        inputs: vec![spec("X", DataType::F64, &[-1, 32])],
        outputs: vec![spec("label", DataType::I64, &[-1])],
    };
    let problems = check_signature(&config, &wrong).join("\n");
    assert!(problems.contains("declared FP32, the model has FP64"), "{problems}");
    assert!(problems.contains("declared shape [-1, 64]"), "{problems}");
    assert!(problems.contains("output 'probabilities' is declared"), "{problems}");
}
