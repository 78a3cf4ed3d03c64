//! Batches run on the caller's thread while the pool is busy (the
//! runtime's `caller_batch` module), through the real ONNX Runtime:
//! requests read together share a batch that one of their callers runs,
//! the answers are the worker's bit for bit, and nobody is left queued.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use common::*;
use switchyard_runtime::{InferenceResponse, ModelRepository};

/// Debug builds run even the tiny classifier slower than the default
/// limit; these tests are about the rule, not the limit.
const GENEROUS: Duration = Duration::from_secs(1);

fn models() -> Arc<ModelRepository> {
    let mut callers = spec("callers", "tiny-classifier.onnx", 32, 400, 512);
    callers.batching.inline_max = GENEROUS;
    let mut worker = spec("worker", "tiny-classifier.onnx", 32, 5, 512);
    worker.batching.inline_max = Duration::ZERO;
    repo(vec![callers, worker])
}

/// `n` requests spawned at once on the current runtime, answered in order.
async fn burst(repo: &Arc<ModelRepository>, model: &str, n: usize) -> Vec<InferenceResponse> {
    let handles: Vec<_> = (0..n)
        .map(|seed| {
            let (repo, model) = (Arc::clone(repo), model.to_string());
            tokio::spawn(async move { repo.infer(&model, None, classify(1 + seed % 2, seed)).await })
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for h in handles {
        out.push(within(h).await.unwrap().unwrap());
    }
    out
}

/// On one thread (a one-CPU server), 300 requests read at once: the idle
/// pool runs them inline one by one until the probe is queued; from then
/// on the requests behind it are queued beside it without waking the
/// worker, and their callers run them in shared batches (the worker's
/// 400 ms wait for company would show as a timeout otherwise). Answers
/// match the worker-only model's; the pool ends empty.
#[tokio::test(flavor = "current_thread")]
async fn callers_on_one_thread_share_batches_they_run_themselves() {
    let repo = models();
    for model in ["callers", "worker"] {
        within(repo.infer(model, None, classify(1, 0))).await.unwrap();
    }
    let n = 300;
    let (mine, theirs) = (burst(&repo, "callers", n).await, burst(&repo, "worker", n).await);
    for (x, y) in mine.iter().zip(&theirs) {
        assert_eq!(x.outputs, y.outputs, "same tensors, same bytes");
    }
    let stats = pool_stats(&repo, "callers", "cpu");
    assert!(stats.caller_batches >= 1, "{stats:?}");
    assert!(mine.iter().any(|a| a.batch_size > 2), "requests shared batches");
    assert!(
        stats.executions < stats.requests,
        "{} executions for {} requests",
        stats.executions,
        stats.requests
    );
    assert_eq!((stats.queue_depth, stats.in_flight), (0, 0));
    assert_eq!(pool_stats(&repo, "worker", "cpu").caller_batches, 0, "inline_max = 0 turns it off");
}

/// On four threads, bursts of callers never strand a request: every one
/// is answered (a hang would trip the failsafe timeout), correctly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_on_several_threads_leave_nobody_queued() {
    let repo = models();
    within(repo.infer("callers", None, classify(1, 0))).await.unwrap();
    let expected = burst(&repo, "worker", 64).await;
    for _ in 0..20 {
        let got = burst(&repo, "callers", 64).await;
        for (x, y) in got.iter().zip(&expected) {
            assert_eq!(x.outputs, y.outputs);
        }
    }
    let stats = pool_stats(&repo, "callers", "cpu");
    assert_eq!((stats.requests, stats.queue_depth, stats.in_flight), (1 + 20 * 64, 0, 0));
}

/// A caller that goes away while its request is queued without a wake-up
/// wakes the worker, which drops the request as cancelled: nothing stays
/// counted in the queue.
#[tokio::test(flavor = "current_thread")]
async fn a_caller_leaving_a_quietly_queued_request_wakes_the_worker() {
    let repo = models();
    within(repo.infer("callers", None, classify(1, 0))).await.unwrap();
    // Load that keeps the pool's arrivals in company: no inline runs.
    burst(&repo, "callers", 300).await;
    // Time for the worker to go back to sleep on the empty queue (were it
    // still awake, it could run the request before its caller leaves).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = pool_stats(&repo, "callers", "cpu");
    // Polled once (queued, then yielding), then dropped.
    let mut gone = Box::pin(repo.infer("callers", None, classify(1, 7)));
    let first = std::future::poll_fn(|cx| Poll::Ready(gone.as_mut().poll(cx))).await;
    assert!(first.is_pending(), "the request was waiting when its caller left: {first:?}");
    assert_eq!(pool_stats(&repo, "callers", "cpu").queue_depth, 1);
    drop(gone);
    wait_until("the worker took it off the queue", || pool_stats(&repo, "callers", "cpu").queue_depth == 0)
        .await;
    let after = pool_stats(&repo, "callers", "cpu");
    assert_eq!(after.cancelled, before.cancelled + 1, "dropped unrun: {after:?}");
}
