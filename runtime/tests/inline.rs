//! Requests run on the caller's thread when their pool is idle (the
//! runtime's `inline` module), through the real ONNX Runtime: the same
//! answers as through the worker thread, counted, probed, and never when
//! the model's batching says no.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::*;
use switchyard_runtime::{InferenceResponse, ModelRepository};

/// Debug builds run even the tiny classifier slower than the default
/// limit; these tests are about the rule, not the limit.
const GENEROUS: Duration = Duration::from_secs(1);

async fn answers(repo: &ModelRepository, model: &str, n: usize) -> Vec<InferenceResponse> {
    let mut out = Vec::with_capacity(n);
    for seed in 0..n {
        out.push(within(repo.infer(model, None, classify(1 + seed % 3, seed))).await.unwrap());
    }
    out
}

/// One caller at a time: the first request is queued (no latency estimate
/// yet), then every request runs inline except the probe after 255 inline
/// runs in a row; answers match a model whose requests all go through the
/// worker, bit for bit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_at_a_time_runs_inline_with_the_workers_answers() {
    let mut inline = spec("inline", "tiny-classifier.onnx", 8, 5, 64);
    inline.batching.inline_max = GENEROUS;
    let mut queued = spec("queued", "tiny-classifier.onnx", 8, 5, 64);
    queued.batching.inline_max = Duration::ZERO;
    let repo = repo(vec![inline, queued]);
    let n = 260;
    let (a, b) = (answers(&repo, "inline", n).await, answers(&repo, "queued", n).await);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.outputs, y.outputs, "same tensors, same bytes");
        assert_eq!((x.batch_size, x.pool.as_str()), (y.batch_size, "cpu"));
    }
    let stats = pool_stats(&repo, "inline", "cpu");
    assert_eq!((stats.requests, stats.executions), (n as u64, n as u64));
    assert_eq!(stats.inline_runs, n as u64 - 2, "all but the first request and the probe");
    assert_eq!(pool_stats(&repo, "queued", "cpu").inline_runs, 0, "inline_max = 0 turns it off");
}

/// With `idle_dispatch = false` every request waits for company in the
/// queue, as the operator asked: none runs inline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_always_waits_for_company_never_runs_inline() {
    let mut patient = spec("patient", "tiny-classifier.onnx", 8, 1, 64);
    patient.batching.inline_max = GENEROUS;
    patient.batching.idle_dispatch = false;
    let repo = repo(vec![patient]);
    answers(&repo, "patient", 5).await;
    assert_eq!(pool_stats(&repo, "patient", "cpu").inline_runs, 0);
}

/// Requests held in the queue of a paused pool still batch together after
/// inline runs: a caller never jumps a queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_queued_behind_a_paused_pool_still_share_a_batch() {
    let mut m = spec("m", "tiny-classifier.onnx", 8, 400, 64);
    m.batching.inline_max = GENEROUS;
    let repo = repo(vec![m]);
    answers(&repo, "m", 5).await;
    let before = pool_stats(&repo, "m", "cpu").inline_runs;
    assert!(before >= 3, "{before}");
    let held = run_paused_results(&repo, "m", (0..4).map(|i| classify(1, i)).collect()).await;
    let sizes: Vec<usize> = held.into_iter().map(|a| a.unwrap().batch_size).collect();
    assert_eq!(sizes, vec![4; 4]);
    assert_eq!(pool_stats(&repo, "m", "cpu").inline_runs, before, "none of them ran inline");
}
