//! Inference through the real ONNX Runtime: batching correctness,
//! concurrency, shape grouping, datatype conversion, pool choice, stats.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::*;
use switchyard_runtime::{
    DataType, InferenceRequest, InferenceResponse, ModelRepository, ModelState, Tensor, TensorData,
};

fn assert_close(a: &InferenceResponse, b: &InferenceResponse) {
    let (pa, pb) = (a.output("probabilities").unwrap(), b.output("probabilities").unwrap());
    assert_eq!(pa.shape(), pb.shape());
    for (x, y) in pa.to_f32_vec().unwrap().iter().zip(pb.to_f32_vec().unwrap()) {
        assert!((x - y).abs() <= 1e-6, "{x} vs {y}");
    }
    assert_eq!(a.output("label").unwrap(), b.output("label").unwrap());
}

async fn run_paused(
    repo: &Arc<ModelRepository>,
    model: &str,
    reqs: Vec<InferenceRequest>,
) -> Vec<InferenceResponse> {
    run_paused_results(repo, model, reqs).await.into_iter().map(Result::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_request_returns_all_outputs_in_graph_order() {
    let repo = repo(vec![spec("tiny", "tiny-classifier.onnx", 1, 0, 8)]);
    assert_eq!(repo.state("tiny").unwrap(), ModelState::Unloaded);
    let sig = repo.signature("tiny").unwrap();
    assert_eq!(sig.inputs[0].name, "X");
    assert_eq!(sig.inputs[0].dtype, DataType::F32);
    assert_eq!(sig.inputs[0].shape, vec![-1, 64]);
    let resp = within(repo.infer("tiny", None, classify(3, 1))).await.unwrap();
    assert_eq!(repo.state("tiny").unwrap(), ModelState::Ready);
    assert_eq!(
        resp.outputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        vec!["label", "probabilities"]
    );
    assert_eq!(resp.output("label").unwrap().shape(), &[3]);
    assert_eq!(resp.output("label").unwrap().dtype(), DataType::I64);
    let probs = resp.output("probabilities").unwrap().to_f32_vec().unwrap();
    assert_eq!(probs.len(), 30);
    for row in probs.chunks(10) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
    assert_eq!((resp.model.as_str(), resp.version, resp.pool.as_str()), ("tiny", 1, "cpu"));
    assert_eq!(resp.device.to_string(), "cpu");
    assert_eq!(resp.batch_size, 3);

    let mut req = classify(1, 2);
    req.outputs = Some(vec!["probabilities".into()]);
    let resp = within(repo.infer("tiny", Some("cpu"), req)).await.unwrap();
    assert_eq!(resp.outputs.len(), 1);
    assert_eq!(resp.outputs[0].0, "probabilities");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_results_equal_unbatched() {
    let repo = repo(vec![
        spec("plain", "tiny-classifier.onnx", 1, 0, 64),
        spec("batched", "tiny-classifier.onnx", 12, 5_000, 64),
    ]);
    let rows = [1, 2, 1, 2, 1, 2, 1, 2];
    let mut reference = Vec::new();
    for (i, &r) in rows.iter().enumerate() {
        let resp = within(repo.infer("plain", None, classify(r, i))).await.unwrap();
        assert_eq!(resp.batch_size, r);
        reference.push(resp);
    }
    let reqs = rows.iter().enumerate().map(|(i, &r)| classify(r, i)).collect();
    let batched = run_paused(&repo, "batched", reqs).await;
    for (b, r) in batched.iter().zip(&reference) {
        assert_eq!(b.batch_size, 12, "all eight requests ran as one batch of 12 rows");
        assert_close(b, r);
    }
    let stats = pool_stats(&repo, "batched", "cpu");
    assert_eq!((stats.executions, stats.executed_rows, stats.requests), (1, 12, 8));
    assert_eq!((stats.cancelled, stats.errors, stats.queue_depth, stats.in_flight), (0, 0, 0, 0));
    let bucket16 = stats.latency.iter().find(|b| b.max_batch == 16).unwrap();
    assert_eq!(bucket16.samples, 1);
    assert!(stats.predict_exec(12).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_callers_get_their_own_results() {
    let mut batched = spec("batched", "tiny-classifier.onnx", 16, 2, 256);
    batched.pools = vec![cpu_pool("cpu", 2)];
    let repo = repo(vec![spec("plain", "tiny-classifier.onnx", 1, 0, 256), batched]);
    let rows = |i: usize| 1 + i % 3;
    let mut reference = Vec::new();
    for i in 0..64 {
        reference.push(within(repo.infer("plain", None, classify(rows(i), i))).await.unwrap());
    }
    let handles: Vec<_> = (0..64)
        .map(|i| {
            let repo = Arc::clone(&repo);
            tokio::spawn(async move { repo.infer("batched", None, classify(rows(i), i)).await })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let resp = within(h).await.unwrap().unwrap();
        assert_eq!(resp.output("label").unwrap().shape(), &[rows(i)]);
        assert_close(&resp, &reference[i]);
    }
    let stats = pool_stats(&repo, "batched", "cpu");
    assert_eq!(stats.requests, 64);
    assert_eq!(stats.executed_rows, (0..64).map(rows).sum::<usize>() as u64);
    assert!(stats.executions <= 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_with_different_inner_dims_are_grouped_not_failed() {
    let repo = repo(vec![spec("seq", "seq-sum.onnx", 3, 200, 16)]);
    let req = |rows: usize, len: usize, v: f32| {
        let t = Tensor::from_f32(vec![rows, len], &vec![v; rows * len]).unwrap();
        InferenceRequest::new(vec![("X".into(), t)])
    };
    let out = run_paused(&repo, "seq", vec![req(1, 3, 1.0), req(1, 5, 2.0), req(2, 3, 3.0)]).await;
    assert_eq!(out[0].output("Y").unwrap().to_f32_vec().unwrap(), vec![3.0]);
    assert_eq!(out[1].output("Y").unwrap().to_f32_vec().unwrap(), vec![10.0]);
    assert_eq!(out[2].output("Y").unwrap().to_f32_vec().unwrap(), vec![9.0, 9.0]);
    assert_eq!((out[0].batch_size, out[1].batch_size, out[2].batch_size), (3, 1, 3));
    let stats = pool_stats(&repo, "seq", "cpu");
    assert_eq!((stats.executions, stats.executed_rows), (2, 4));
}

fn typed(dtype: DataType, rows: usize, seed: u8) -> Tensor {
    let n = rows * 2;
    match dtype.element_size() {
        Some(size) => {
            let bytes: Vec<u8> = (0..n * size)
                .map(|i| {
                    if dtype == DataType::Bool {
                        (i as u8 + seed) % 2
                    } else {
                        seed.wrapping_mul(13) ^ i as u8
                    }
                })
                .collect();
            Tensor::new(dtype, vec![rows, 2], TensorData::Fixed(Bytes::from(bytes))).unwrap()
        }
        None => {
            let items = (0..n).map(|i| Bytes::from(format!("s{seed}-{i}-é"))).collect();
            Tensor::new(dtype, vec![rows, 2], TensorData::Strings(items)).unwrap()
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_datatype_round_trips_through_a_batch() {
    let types = [
        ("f64", DataType::F64),
        ("i32", DataType::I32),
        ("i8", DataType::I8),
        ("u8", DataType::U8),
        ("bool", DataType::Bool),
        ("f16", DataType::F16),
        ("i64", DataType::I64),
        ("str", DataType::Bytes),
    ];
    let repo = repo(vec![spec("echo", "types-echo.onnx", 8, 5_000, 16)]);
    let request = |rows: usize, seed: u8| {
        InferenceRequest::new(types.iter().map(|(s, d)| (format!("in_{s}"), typed(*d, rows, seed))).collect())
    };
    let out = run_paused(&repo, "echo", vec![request(1, 1), request(3, 2), request(4, 3)]).await;
    for (resp, (rows, seed)) in out.iter().zip([(1, 1), (3, 2), (4, 3)]) {
        assert_eq!(resp.batch_size, 8);
        for (s, d) in types {
            assert_eq!(resp.output(&format!("out_{s}")).unwrap(), &typed(d, rows, seed), "{s}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_and_automatic_pool_choice() {
    let mut two = spec("two", "tiny-classifier.onnx", 1, 0, 1);
    two.pools = vec![cpu_pool("a", 1), cpu_pool("b", 1)];
    let repo = repo(vec![two]);
    let resp = within(repo.infer("two", Some("b"), classify(1, 0))).await.unwrap();
    assert_eq!(resp.pool, "b");
    let resp = within(repo.infer("two", None, classify(1, 0))).await.unwrap();
    assert!(resp.pool == "a" || resp.pool == "b");
    // With pool "a" held and its queue (capacity 1) full, automatic choice
    // overflows to "b" whatever the latency estimates say.
    repo.set_paused("two", "a", true).unwrap();
    let held = fill_queue(&repo, "two", "a", 2).await;
    let resp = within(repo.infer("two", None, classify(1, 2))).await.unwrap();
    assert_eq!(resp.pool, "b");
    repo.set_paused("two", "a", false).unwrap();
    for h in held {
        assert_eq!(within(h).await.unwrap().unwrap().pool, "a");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warmup_loads_at_registration() {
    let mut s = spec("warm", "tiny-classifier.onnx", 4, 1, 8);
    s.warmup = true;
    let repo = repo(vec![s]);
    assert_eq!(repo.state("warm").unwrap(), ModelState::Ready);
    let stats = repo.stats();
    let m = stats.model("warm").unwrap();
    assert_eq!(m.loads, 1);
    assert!(m.last_cold_start.is_some());
    assert_eq!(m.pool("cpu").unwrap().executions, 0, "warm-up runs are not counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_larger_than_a_batch_runs_in_chunks_with_the_same_answer() {
    let repo = repo(vec![
        spec("tiny", "tiny-classifier.onnx", 4, 0, 8),
        spec("alone", "tiny-classifier.onnx", 1, 0, 8),
    ]);
    let chunked = within(repo.infer("tiny", None, classify(10, 3))).await.unwrap();
    let whole = within(repo.infer("alone", None, classify(10, 3))).await.unwrap();
    assert_close(&chunked, &whole);
    assert_eq!((chunked.batch_size, whole.batch_size), (4, 10));
    let stats = pool_stats(&repo, "tiny", "cpu");
    assert_eq!(
        (stats.executions, stats.executed_rows, stats.requests),
        (3, 10, 3),
        "chunks of 4, 4 and 2 rows"
    );
    let e = within(repo.infer("tiny", None, classify(65, 3))).await.unwrap_err();
    assert_eq!((e.label(), e.class()), ("too_large", switchyard_runtime::ErrorClass::TooLarge));
    assert!(e.to_string().contains("65 rows") && e.to_string().contains("64 rows"), "{e}");
}

/// A lone request on an idle pool is dispatched at once (`idle_dispatch`,
/// the default) instead of waiting out `max_queue_delay` for company that
/// cannot come; with `idle_dispatch = false` it waits the delay, as
/// Triton's dynamic batcher does. Queue time is what the worker reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_pool_dispatches_a_lone_request_without_waiting_the_delay() {
    let delay = std::time::Duration::from_millis(400);
    let mut eager = spec("eager", "tiny-classifier.onnx", 8, 400, 64);
    let mut patient = spec("patient", "tiny-classifier.onnx", 8, 400, 64);
    assert!(eager.batching.idle_dispatch, "on by default");
    patient.batching.idle_dispatch = false;
    eager.warmup = true;
    patient.warmup = true;
    let repo = repo(vec![eager, patient]);
    for _ in 0..3 {
        let fast = within(repo.infer("eager", None, classify(1, 0))).await.unwrap();
        assert_eq!(fast.batch_size, 1);
        assert!(fast.queue_time < delay / 2, "idle pool waited {:?}", fast.queue_time);
        let slow = within(repo.infer("patient", None, classify(1, 0))).await.unwrap();
        assert!(slow.queue_time >= delay, "waited only {:?}", slow.queue_time);
    }
    // Requests queued while the pool is held still share one batch.
    let answers = run_paused(&repo, "eager", (0..5).map(|i| classify(1, i)).collect()).await;
    assert!(
        answers.iter().all(|a| a.batch_size == 5),
        "{:?}",
        answers.iter().map(|a| a.batch_size).collect::<Vec<_>>()
    );
}
