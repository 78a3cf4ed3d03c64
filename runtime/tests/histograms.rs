//! Pool and model distributions recorded by the real workers: rows per
//! batch, batch execution time, queue wait, cold starts, unloads.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use switchyard_runtime::HistogramSnapshot;

/// Index of the bucket holding `value`.
fn bucket_of(h: &HistogramSnapshot, value: u64) -> usize {
    h.upper_bounds.iter().position(|&b| value <= b).unwrap_or(h.upper_bounds.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_batch_records_its_rows_time_and_each_wait() {
    let repo = repo(vec![spec("batched", "tiny-classifier.onnx", 16, 5_000, 64)]);
    let reqs = [1, 2, 3].iter().enumerate().map(|(i, &rows)| classify(rows, i)).collect();
    let results = run_paused_results(&repo, "batched", reqs).await;
    let responses: Vec<_> = results.into_iter().map(Result::unwrap).collect();
    assert!(responses.iter().all(|r| r.batch_size == 6), "the three requests ran as one batch");

    let h = pool_stats(&repo, "batched", "cpu").histograms;
    assert_eq!(h.batch_rows.count(), 1);
    assert_eq!(h.batch_rows.sum, 6);
    assert_eq!(h.batch_rows.counts[bucket_of(&h.batch_rows, 6)], 1);

    assert_eq!(h.execution_us.count(), 1);
    let exec_us = responses[0].exec_time.as_micros() as u64;
    assert_eq!(h.execution_us.counts[bucket_of(&h.execution_us, exec_us)], 1);

    assert_eq!(h.queue_wait_us.count(), 3, "one wait per executed request");
    let waits: u64 = responses.iter().map(|r| r.queue_time.as_micros() as u64).sum();
    // The worker records the same durations it reports (µs rounding aside).
    assert!(h.queue_wait_us.sum.abs_diff(waits) <= 3, "{} vs {waits}", h.queue_wait_us.sum);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_unloads_and_cold_starts_are_counted() {
    let repo = repo(vec![spec("tiny", "tiny-classifier.onnx", 1, 0, 8)]);
    let first = repo.load("tiny").await.unwrap();
    repo.unload("tiny").unwrap();
    repo.unload("tiny").unwrap(); // already unloaded: not counted again
    within(repo.infer("tiny", None, classify(1, 0))).await.unwrap();
    let stats = repo.stats();
    let m = stats.model("tiny").unwrap();
    assert_eq!((m.loads, m.unloads), (2, 1));
    assert_eq!(m.cold_starts.count(), 2);
    let first_us = first.cold_start.as_micros() as u64;
    assert!(m.cold_starts.sum >= first_us);
    assert!(m.cold_starts.counts[bucket_of(&m.cold_starts, first_us)] >= 1);
}
