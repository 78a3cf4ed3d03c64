//! Helpers for the tests of ranked requests on the project's slowest model
//! (`preempt.rs`, `reserve.rs`): a low-class batch caught running, and a
//! higher-class request sent beside it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::{classify, pool_stats, wait_until, within};
use switchyard_runtime::{InferenceResponse, ModelRepository, Rank, RuntimeError};

/// models/synth-heavy.onnx (~100 MFLOP a row), or `None` with a note when
/// it has not been generated.
pub fn synth_heavy() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/synth-heavy.onnx");
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("skipping: {} not generated (run models/generate.py)", path.display());
        None
    }
}

/// An answer and the moment it arrived.
pub type Answer = (Result<InferenceResponse, RuntimeError>, Instant);

/// Sends `seed`'s request of `rows` rows in `class` to `model`.
pub fn send(
    repo: &Arc<ModelRepository>,
    model: &str,
    class: u8,
    rows: usize,
    seed: usize,
) -> tokio::task::JoinHandle<Answer> {
    let (repo, model) = (Arc::clone(repo), model.to_string());
    tokio::spawn(async move {
        let answer = repo.infer_ranked(&model, None, classify(rows, seed), Rank::new(class, None)).await;
        (answer, Instant::now())
    })
}

/// Queues two requests of `rows` rows in `class` on the paused pool,
/// resumes it and waits until their (shared) batch runs.
pub async fn low_batch_running(
    repo: &Arc<ModelRepository>,
    model: &str,
    class: u8,
    rows: usize,
) -> Vec<tokio::task::JoinHandle<Answer>> {
    repo.load(model).await.unwrap();
    repo.set_paused(model, "cpu", true).unwrap();
    let before = pool_stats(repo, model, "cpu").requests;
    let lows = vec![send(repo, model, class, rows, 1), send(repo, model, class, rows, 2)];
    // Counted in `requests` once queued (the depth counts a request a
    // moment before): both are in the queue, so they share a batch.
    wait_until("both low requests queued", || {
        let stats = pool_stats(repo, model, "cpu");
        stats.queue_depth == 2 && stats.requests == before + 2
    })
    .await;
    repo.set_paused(model, "cpu", false).unwrap();
    wait_until(&format!("the low batch running on {model}"), || {
        pool_stats(repo, model, "cpu").in_flight == 2
    })
    .await;
    lows
}

/// The answers of `handles`, in order, each with its arrival.
pub async fn answers(handles: Vec<tokio::task::JoinHandle<Answer>>) -> Vec<(InferenceResponse, Instant)> {
    let mut out = Vec::new();
    for h in handles {
        let (answer, at) = within(h).await.unwrap();
        out.push((answer.unwrap(), at));
    }
    out
}
