//! Queue flow control and life cycle: overload, cancellation, single
//! loading, unloading (explicit and idle), shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use switchyard_runtime::{ErrorClass, ModelRepository, ModelState, RuntimeError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_is_overloaded() {
    let repo = repo(vec![spec("tiny", "tiny-classifier.onnx", 1, 0, 2)]);
    repo.load("tiny").await.unwrap();
    repo.set_paused("tiny", "cpu", true).unwrap();
    let held = fill_queue(&repo, "tiny", "cpu", 3).await;
    let rejected_before = pool_stats(&repo, "tiny", "cpu").rejected;
    for pool in [None, Some("cpu")] {
        let e = within(repo.infer("tiny", pool, classify(1, 0))).await.unwrap_err();
        match &e {
            RuntimeError::Overloaded { model, pool, retry_after } => {
                assert_eq!((model.as_str(), pool.as_str()), ("tiny", "cpu"));
                assert!(*retry_after > Duration::ZERO);
            }
            other => panic!("expected Overloaded, got {other}"),
        }
        assert_eq!((e.class(), e.label()), (ErrorClass::Overloaded, "overloaded"));
    }
    let stats = pool_stats(&repo, "tiny", "cpu");
    assert_eq!(stats.rejected, rejected_before + 2);
    assert_eq!((stats.queue_depth, stats.queue_capacity), (3, 2));
    repo.set_paused("tiny", "cpu", false).unwrap();
    for h in held {
        within(h).await.unwrap().unwrap();
    }
    let stats = pool_stats(&repo, "tiny", "cpu");
    assert_eq!((stats.executions, stats.requests, stats.queue_depth), (3, 3, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_requests_are_not_executed() {
    let repo = repo(vec![spec("tiny", "tiny-classifier.onnx", 4, 20, 8)]);
    repo.load("tiny").await.unwrap();
    repo.set_paused("tiny", "cpu", true).unwrap();
    // Queue: doomed (held by the paused worker), kept, doomed.
    let mut handles = Vec::new();
    for i in 0..3 {
        let r = Arc::clone(&repo);
        handles.push(tokio::spawn(async move { r.infer("tiny", None, classify(1, i)).await }));
        wait_until("request queued", || pool_stats(&repo, "tiny", "cpu").queue_depth == i + 1).await;
    }
    let kept = handles.remove(1);
    for doomed in handles {
        doomed.abort();
        assert!(doomed.await.unwrap_err().is_cancelled());
    }
    repo.set_paused("tiny", "cpu", false).unwrap();
    let resp = within(kept).await.unwrap().unwrap();
    assert_eq!(resp.batch_size, 1);
    let stats = pool_stats(&repo, "tiny", "cpu");
    assert_eq!((stats.requests, stats.cancelled), (3, 2));
    assert_eq!((stats.executions, stats.executed_rows), (1, 1));
    assert_eq!((stats.queue_depth, stats.in_flight, stats.errors), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_calls_share_one_load() {
    let repo = repo(vec![spec("tiny", "tiny-classifier.onnx", 8, 1, 64)]);
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let r = Arc::clone(&repo);
            tokio::spawn(async move { r.infer("tiny", None, classify(1, i)).await })
        })
        .collect();
    for h in handles {
        within(h).await.unwrap().unwrap();
    }
    let stats = repo.stats();
    let m = stats.model("tiny").unwrap();
    assert_eq!(m.loads, 1);
    assert!(m.last_cold_start.is_some());
    assert_eq!(m.state, ModelState::Ready);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_unload_then_transparent_reload() {
    let repo = repo(vec![spec("tiny", "tiny-classifier.onnx", 1, 0, 8)]);
    let report = repo.load("tiny").await.unwrap();
    assert_eq!(report.pools, vec![("cpu".to_string(), Ok(()))]);
    assert_eq!(repo.state("tiny").unwrap(), ModelState::Ready);
    repo.unload("tiny").unwrap();
    assert_eq!(repo.state("tiny").unwrap(), ModelState::Unloaded);
    within(repo.infer("tiny", None, classify(1, 0))).await.unwrap();
    assert_eq!(repo.stats().model("tiny").unwrap().loads, 2);
    assert!(matches!(repo.unload("nope"), Err(RuntimeError::UnknownModel { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_models_are_unloaded_and_reload_on_demand() {
    let mut idle = spec("idle", "tiny-classifier.onnx", 1, 0, 8);
    idle.idle_unload = Some(Duration::from_millis(100));
    let keep = spec("keep", "tiny-classifier.onnx", 1, 0, 8);
    let repo = repo(vec![idle, keep]);
    let reaper = repo.start_idle_reaper().unwrap();
    within(repo.infer("idle", None, classify(1, 0))).await.unwrap();
    within(repo.infer("keep", None, classify(1, 0))).await.unwrap();
    wait_until("idle model unloaded", || repo.state("idle").unwrap() == ModelState::Unloaded).await;
    assert_eq!(repo.state("keep").unwrap(), ModelState::Ready, "no idle_unload: kept");

    let resp = within(repo.infer("idle", None, classify(2, 1))).await.unwrap();
    assert_eq!(resp.batch_size, 2);
    let stats = repo.stats();
    let m = stats.model("idle").unwrap();
    assert_eq!(m.loads, 2);
    assert!(m.last_cold_start.is_some());
    assert_eq!(m.pool("cpu").unwrap().executions, 2, "counters survive the reload");

    drop(repo);
    wait_until("reaper exits with the repository", || reaper.is_finished()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_refuses_new_work_and_drains_the_queue() {
    let repo: Arc<ModelRepository> = repo(vec![spec("tiny", "tiny-classifier.onnx", 1, 0, 8)]);
    within(repo.infer("tiny", None, classify(1, 0))).await.unwrap();
    repo.set_paused("tiny", "cpu", true).unwrap();
    let queued = {
        let r = Arc::clone(&repo);
        tokio::spawn(async move { r.infer("tiny", None, classify(1, 1)).await })
    };
    wait_until("request queued", || pool_stats(&repo, "tiny", "cpu").queue_depth == 1).await;
    repo.shutdown();
    let e = within(repo.infer("tiny", None, classify(1, 0))).await.unwrap_err();
    assert!(matches!(e, RuntimeError::ShuttingDown));
    assert_eq!(repo.state("tiny").unwrap(), ModelState::Unloaded);
    within(queued).await.unwrap().expect("queued before shutdown: still served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_pool_ends_a_request_at_its_deadline() {
    let repo = repo(vec![spec("tiny", "tiny-classifier.onnx", 4, 1, 8)]);
    repo.load("tiny").await.unwrap();
    repo.set_paused("tiny", "cpu", true).unwrap();
    assert!(pool_stats(&repo, "tiny", "cpu").paused);
    let started = std::time::Instant::now();
    let deadline = Some(started + Duration::from_millis(50));
    let e = within(repo.infer_within("tiny", None, classify(1, 7), deadline)).await.unwrap_err();
    assert!(matches!(&e, RuntimeError::Paused { model, pool } if model == "tiny" && pool == "cpu"), "{e}");
    assert_eq!((e.class(), e.label(), e.is_retryable()), (ErrorClass::Unavailable, "paused", true));
    assert!(started.elapsed() >= Duration::from_millis(50));
    repo.set_paused("tiny", "cpu", false).unwrap();
    let stats = pool_stats(&repo, "tiny", "cpu");
    wait_until("the expired entry skipped", || pool_stats(&repo, "tiny", "cpu").cancelled == 1).await;
    assert_eq!((stats.requests, pool_stats(&repo, "tiny", "cpu").executions), (1, 0));
    // Past its deadline on a pool that serves: it still runs, late.
    let late = Some(started - Duration::from_secs(1));
    within(repo.infer_within("tiny", None, classify(1, 8), late)).await.unwrap();
    let stats = pool_stats(&repo, "tiny", "cpu");
    assert_eq!((stats.cancelled, stats.executions, stats.queue_depth, stats.paused), (1, 1, 0, false));
}
