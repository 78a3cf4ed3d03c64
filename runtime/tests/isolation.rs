//! A failed batch is rerun request by request: only the requests that fail
//! alone get the error (400 when the model is seen running other requests,
//! 500 when it is not), the others their answers; counted in
//! `isolated_batches`. And BYTES elements with NUL bytes reach the model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::*;
use switchyard_runtime::{DataType, ErrorClass, InferenceRequest, RuntimeError, Tensor, TensorData};

fn text(value: &str) -> InferenceRequest {
    let t =
        Tensor::new(DataType::Bytes, vec![1, 1], TensorData::Strings(vec![Bytes::from(value.to_owned())]));
    InferenceRequest::new(vec![("text".into(), t.unwrap())])
}

fn number(resp: &switchyard_runtime::InferenceResponse) -> i64 {
    resp.output("n").unwrap().to_i64_vec().unwrap()[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_request_that_fails_alone_gets_the_error() {
    let repo = repo(vec![spec("cast", "str-to-int.onnx", 8, 100, 8)]);
    let results = run_paused_results(&repo, "cast", vec![text("12"), text("x"), text("7"), text("-3")]).await;
    assert_eq!(number(results[0].as_ref().unwrap()), 12);
    assert_eq!(number(results[2].as_ref().unwrap()), 7);
    assert_eq!(number(results[3].as_ref().unwrap()), -3);
    let e = results[1].as_ref().unwrap_err();
    assert!(matches!(e, RuntimeError::InputRejected { .. }), "{e}");
    assert_eq!((e.class(), e.label()), (ErrorClass::InvalidInput, "input_rejected"));
    assert!(e.to_string().contains("cannot run this request's data"), "{e}");
    let stats = pool_stats(&repo, "cast", "cpu");
    // The batch of four, then each of its requests alone.
    assert_eq!((stats.executions, stats.errors, stats.isolated_batches), (5, 1, 1));

    // Alone, on a model that has run other requests: the same 400.
    let e = within(repo.infer("cast", None, text("y"))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::InputRejected { .. }), "{e}");
    // A batch that runs is not rerun.
    let results = run_paused_results(&repo, "cast", vec![text("1"), text("2")]).await;
    assert!(results.iter().all(Result::is_ok));
    let stats = pool_stats(&repo, "cast", "cpu");
    assert_eq!((stats.executions, stats.errors, stats.isolated_batches), (7, 2, 1));

    // No evidence the model runs: a batch whose every request fails alone,
    // then a lone failure right after failures, are the model's (500).
    let results = run_paused_results(&repo, "cast", vec![text("a"), text("b")]).await;
    for r in &results {
        let e = r.as_ref().unwrap_err();
        assert!(matches!(e, RuntimeError::Execution { .. }), "every batch-mate failed: {e}");
    }
    let e = within(repo.infer("cast", None, text("c"))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::Execution { .. }), "runs keep failing: {e}");
    // Once a run succeeds, a lone failure is the request's again.
    within(repo.infer("cast", None, text("5"))).await.unwrap();
    let e = within(repo.infer("cast", None, text("d"))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::InputRejected { .. }), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_runs_nothing_fails_every_request_as_before() {
    let repo = repo(vec![spec("never", "never-runs.onnx", 8, 100, 8)]);
    let req = |v: f32| {
        let t = Tensor::from_f32(vec![1, 4], &[v; 4]).unwrap();
        InferenceRequest::new(vec![("X".into(), t)])
    };
    let results = run_paused_results(&repo, "never", vec![req(1.0), req(2.0), req(3.0)]).await;
    for r in results {
        let e = r.unwrap_err();
        assert!(matches!(e, RuntimeError::Execution { .. }), "{e}");
        assert_eq!(e.class(), ErrorClass::Internal);
    }
    let e = within(repo.infer("never", None, req(4.0))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::Execution { .. }), "alone: {e}");
    let stats = pool_stats(&repo, "never", "cpu");
    assert_eq!((stats.executions, stats.errors, stats.isolated_batches), (5, 4, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_with_nul_reach_the_model_whole() {
    let repo = repo(vec![spec("cast", "str-to-int.onnx", 8, 0, 8)]);
    // ONNX Runtime's Cast reads the string up to the NUL, as C does: it
    // got the element (the call did not fail on the NUL, as it did when
    // elements were passed as C strings).
    let resp = within(repo.infer("cast", None, text("42\0junk"))).await.unwrap();
    assert_eq!(number(&resp), 42);

    let echo = repo_echo();
    let sig = echo.signature("echo").unwrap();
    let items = vec![Bytes::from_static(b"a\0b"), Bytes::from_static(b"\0")];
    let mut inputs = Vec::new();
    for input in &sig.inputs {
        let t = match input.dtype.element_size() {
            Some(size) => {
                Tensor::new(input.dtype, vec![1, 2], TensorData::Fixed(Bytes::from(vec![0u8; 2 * size])))
            }
            None => Tensor::new(input.dtype, vec![1, 2], TensorData::Strings(items.clone())),
        };
        inputs.push((input.name.clone(), t.unwrap()));
    }
    let resp = within(echo.infer("echo", None, InferenceRequest::new(inputs))).await.unwrap();
    assert_eq!(resp.output("out_str").unwrap().data(), &TensorData::Strings(items));
}

fn repo_echo() -> std::sync::Arc<switchyard_runtime::ModelRepository> {
    repo(vec![spec("echo", "types-echo.onnx", 1, 0, 8)])
}
