//! Typed errors: bad inputs, unknown names, corrupt files, unavailable
//! devices, invalid specs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;

use bytes::Bytes;
use common::*;
use switchyard_runtime::{
    DataType, DeviceKind, ErrorClass, InferenceRequest, ModelRepository, ModelState, PoolSpec, RuntimeError,
    Tensor, TensorData,
};

fn x(t: Tensor) -> InferenceRequest {
    InferenceRequest::new(vec![("X".into(), t)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_typed_errors() {
    let repo = repo(vec![spec("tiny", "tiny-classifier.onnx", 8, 1, 8)]);
    let infer = |req: InferenceRequest| {
        let repo = repo.clone();
        async move { within(repo.infer("tiny", None, req)).await.unwrap_err() }
    };

    let mut req = classify(1, 0);
    req.inputs.push(("Y".into(), features(1, 0)));
    let e = infer(req).await;
    assert!(matches!(&e, RuntimeError::UnknownInput { input, .. } if input == "Y"), "{e}");
    assert_eq!((e.class(), e.label()), (ErrorClass::InvalidInput, "unknown_input"));

    let mut req = classify(1, 0);
    req.inputs.push(("X".into(), features(1, 0)));
    assert!(matches!(infer(req).await, RuntimeError::DuplicateInput { .. }));

    let e = infer(InferenceRequest::default()).await;
    assert!(matches!(&e, RuntimeError::MissingInput { input, .. } if input == "X"), "{e}");

    let ints =
        Tensor::new(DataType::I64, vec![1, 64], TensorData::Fixed(Bytes::from(vec![0u8; 512]))).unwrap();
    let e = infer(x(ints)).await;
    assert!(
        matches!(e, RuntimeError::WrongDtype { expected: DataType::F32, actual: DataType::I64, .. }),
        "{e}"
    );

    let e = infer(x(Tensor::from_f32(vec![1, 63], &[0.0; 63]).unwrap())).await;
    assert!(matches!(&e, RuntimeError::WrongShape { actual, .. } if actual == &vec![1, 63]), "{e}");
    assert_eq!(e.class(), ErrorClass::InvalidInput);
    let e = infer(x(Tensor::from_f32(vec![64], &[0.0; 64]).unwrap())).await;
    assert!(matches!(e, RuntimeError::WrongShape { .. }), "wrong rank: {e}");
    let e = infer(x(Tensor::from_f32(vec![0, 64], &[]).unwrap())).await;
    assert!(matches!(e, RuntimeError::WrongShape { .. }), "empty batch: {e}");

    let mut req = classify(1, 0);
    req.outputs = Some(vec!["logits".into()]);
    let e = infer(req).await;
    assert!(matches!(&e, RuntimeError::UnknownOutput { output, .. } if output == "logits"), "{e}");
    assert_eq!(e.class(), ErrorClass::NotFound);

    let e = within(repo.infer("nope", None, classify(1, 0))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::UnknownModel { .. }));
    let e = within(repo.infer("tiny", Some("gpu9"), classify(1, 0))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::UnknownPool { .. }));
    assert!(matches!(repo.signature("nope"), Err(RuntimeError::UnknownModel { .. })));

    // Bad requests never reach a worker.
    let stats = pool_stats(&repo, "tiny", "cpu");
    assert_eq!((stats.requests, stats.executions, stats.errors), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_utf8_bytes_are_invalid_data() {
    let repo = repo(vec![spec("echo", "types-echo.onnx", 1, 0, 8)]);
    let sig = repo.signature("echo").unwrap();
    let mut inputs = Vec::new();
    for input in &sig.inputs {
        let t = match input.dtype.element_size() {
            Some(size) => {
                Tensor::new(input.dtype, vec![1, 2], TensorData::Fixed(Bytes::from(vec![0u8; 2 * size])))
            }
            None => Tensor::new(
                input.dtype,
                vec![1, 2],
                TensorData::Strings(vec![Bytes::from_static(b"ok"), Bytes::from_static(&[0xff, 0xfe])]),
            ),
        };
        inputs.push((input.name.clone(), t.unwrap()));
    }
    let e = within(repo.infer("echo", None, InferenceRequest::new(inputs))).await.unwrap_err();
    assert!(matches!(&e, RuntimeError::InvalidData { input, .. } if input == "in_str"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_model_fails_alone() {
    let mut garbage = tempfile::Builder::new().suffix(".onnx").tempfile().unwrap();
    garbage.write_all(b"this is not an onnx model \x00\x01\x02\x03 at all").unwrap();
    let mut bad = spec("bad", "unused.onnx", 1, 0, 8);
    bad.path = garbage.path().to_path_buf();
    let missing = spec("missing", "does-not-exist.onnx", 1, 0, 8);
    let repo = repo(vec![bad, spec("good", "tiny-classifier.onnx", 1, 0, 8), missing]);

    assert!(matches!(repo.state("bad").unwrap(), ModelState::Failed(_)));
    let failures = repo.failures();
    assert_eq!(failures.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), vec!["bad", "missing"]);
    assert!(failures.iter().all(|(_, e)| matches!(e, RuntimeError::CorruptModel { .. })));

    let e = repo.load("bad").await.unwrap_err();
    assert!(matches!(e, RuntimeError::CorruptModel { .. }), "{e}");
    assert_eq!(e.class(), ErrorClass::Unavailable);
    let e = within(repo.infer("bad", None, classify(1, 0))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::CorruptModel { .. }), "{e}");
    assert!(matches!(repo.signature("bad"), Err(RuntimeError::CorruptModel { .. })));

    let resp = within(repo.infer("good", None, classify(2, 0))).await.unwrap();
    assert_eq!(resp.output("label").unwrap().shape(), &[2]);
    assert_eq!(repo.state("good").unwrap(), ModelState::Ready);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_cuda_pool_is_reported_and_cpu_serves() {
    let mut mixed = spec("mixed", "tiny-classifier.onnx", 4, 1, 8);
    let gpu = PoolSpec {
        name: "gpu".into(),
        device: DeviceKind::Cuda,
        workers: 1,
        intra_op_threads: 1,
        batching: None,
    };
    mixed.pools = vec![gpu.clone(), cpu_pool("cpu", 1)];
    let mut gpu_only = spec("gpu-only", "tiny-classifier.onnx", 1, 0, 8);
    gpu_only.pools = vec![gpu];
    let repo = repo(vec![mixed, gpu_only]);

    let report = repo.load("mixed").await.unwrap();
    assert_eq!(report.pools.len(), 2);
    assert!(report.pools[1].1.is_ok());
    let gpu_ok = report.pools[0].1.is_ok();
    let resp = within(repo.infer("mixed", None, classify(1, 0))).await.unwrap();
    if gpu_ok {
        // Only on a machine with CUDA and the `cuda` feature.
        let resp = within(repo.infer("mixed", Some("gpu"), classify(1, 0))).await.unwrap();
        assert_eq!(resp.device, DeviceKind::Cuda);
        return;
    }
    assert_eq!((resp.pool.as_str(), resp.device), ("cpu", DeviceKind::Cpu));
    let stats = repo.stats();
    let gpu_stats = stats.model("mixed").unwrap().pool("gpu").unwrap();
    assert!(!gpu_stats.available);
    let reason = gpu_stats.unavailable_reason.clone().unwrap();
    assert!(reason.to_lowercase().contains("cuda"), "{reason}");
    let e = within(repo.infer("mixed", Some("gpu"), classify(1, 0))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::DeviceUnavailable { .. }), "{e}");
    assert_eq!(e.class(), ErrorClass::Unavailable);

    let e = within(repo.infer("gpu-only", None, classify(1, 0))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::DeviceUnavailable { .. }), "{e}");
    assert!(matches!(repo.state("gpu-only").unwrap(), ModelState::Failed(_)));
    assert!(repo.failures().iter().any(|(n, _)| n == "gpu-only"));
}

#[test]
fn invalid_specs_are_rejected() {
    init();
    let dup = vec![spec("a", "tiny-classifier.onnx", 1, 0, 8), spec("a", "tiny-classifier.onnx", 1, 0, 8)];
    assert!(matches!(ModelRepository::new(dup), Err(RuntimeError::InvalidSpec { .. })));
    let mut no_workers = spec("a", "tiny-classifier.onnx", 1, 0, 8);
    no_workers.pools[0].workers = 0;
    assert!(matches!(ModelRepository::new(vec![no_workers]), Err(RuntimeError::InvalidSpec { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsplittable_batch_output_is_answered_by_running_each_request_alone() {
    let repo = repo(vec![spec("total", "total-sum.onnx", 8, 100, 8)]);
    let req = |v: f32| {
        let t = Tensor::from_f32(vec![1, 4], &[v; 4]).unwrap();
        InferenceRequest::new(vec![("X".into(), t)])
    };
    // Alone, the scalar output is returned as is.
    let resp = within(repo.infer("total", None, req(1.0))).await.unwrap();
    assert_eq!(resp.output("S").unwrap().to_f32_vec().unwrap(), vec![4.0]);
    // Batched, it cannot be split back: the batch fails, and each request
    // is run again alone (see isolation.rs), which answers it.
    let results = run_paused_results(&repo, "total", vec![req(1.0), req(2.0)]).await;
    let sums: Vec<Vec<f32>> =
        results.iter().map(|r| r.as_ref().unwrap().output("S").unwrap().to_f32_vec().unwrap()).collect();
    assert_eq!(sums, vec![vec![4.0], vec![8.0]]);
    let stats = pool_stats(&repo, "total", "cpu");
    assert_eq!((stats.executions, stats.errors, stats.isolated_batches), (4, 0, 1));
}
