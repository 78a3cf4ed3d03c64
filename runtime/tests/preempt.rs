//! Preempting a running low-class batch for a high-class request
//! (`batching.preempt`, the runtime's `preempt` module), through the real
//! ONNX Runtime on the project's slowest model (models/synth-heavy.onnx,
//! ~100 MFLOP a row): the high request is answered before the low batch
//! it interrupted, the low requests run again and get the same bytes as
//! without preemption, and a batch is preempted at most once. Skipped,
//! with a note, when the model has not been generated.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::ranked::*;
use common::*;
use switchyard_runtime::ModelRepository;

const LOW: u8 = 4;
const HIGH: u8 = 1;
/// Rows of each of the two low requests: one batch of 256 rows runs for
/// a good fraction of a second, long enough to be caught running.
const LOW_ROWS: usize = 128;

fn models(path: PathBuf) -> Arc<ModelRepository> {
    let mut on = spec("on", "unused", 2 * LOW_ROWS, 0, 64);
    on.path = path.clone();
    on.batching.preempt = true;
    let mut off = spec("off", "unused", 2 * LOW_ROWS, 0, 64);
    off.path = path;
    off.batching.preempt = false;
    repo(vec![on, off])
}

/// With `preempt` on, a class-1 request that arrives while a class-4
/// batch runs is answered first; the low requests run again (each alone)
/// and answer the same bytes as on the model that does not preempt
/// (where they shared a batch); one preemption counted, no error. A second
/// class-1 request sent while the rerun runs does not preempt it again.
/// With `preempt` off the high request waits for the low batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_class_request_preempts_a_running_low_batch_once_and_the_low_answers_do_not_change() {
    let Some(path) = synth_heavy() else { return };
    let repo = models(path);

    // Without preemption: the high request waits for the low batch.
    let lows = low_batch_running(&repo, "off", LOW, LOW_ROWS).await;
    let high = send(&repo, "off", HIGH, 4, 9);
    let high = answers(vec![high]).await.remove(0);
    let reference = answers(lows).await;
    for (low, done) in &reference {
        assert!(*done <= high.1, "without preemption the low batch finishes first");
        assert_eq!(low.batch_size, 2 * LOW_ROWS);
    }
    let off = pool_stats(&repo, "off", "cpu");
    assert_eq!((off.preemptions, off.errors), (0, 0), "{off:?}");

    // With preemption.
    let lows = low_batch_running(&repo, "on", LOW, LOW_ROWS).await;
    let high = send(&repo, "on", HIGH, 4, 9);
    let high = answers(vec![high]).await.remove(0);
    assert_eq!(high.0.batch_size, 4, "the high request ran in a batch of its own");
    let stats = pool_stats(&repo, "on", "cpu");
    assert_eq!(stats.preemptions, 1, "{stats:?}");
    // The lows are queued again or running their second time: a second
    // high request does not stop them again.
    let second = send(&repo, "on", HIGH, 4, 10);
    let preempted = answers(lows).await;
    let second = answers(vec![second]).await.remove(0);
    for ((low, done), (want, _)) in preempted.iter().zip(&reference) {
        assert!(high.1 <= *done, "the high request was answered before the batch it preempted");
        assert_eq!(low.outputs, want.outputs, "same tensors, same bytes as without preemption");
        assert_eq!(low.batch_size, LOW_ROWS, "a preempted request runs again alone");
    }
    let stats = pool_stats(&repo, "on", "cpu");
    assert_eq!(stats.preemptions, 1, "a batch is preempted at most once: {stats:?}");
    assert_eq!((stats.errors, stats.queue_depth, stats.in_flight), (0, 0, 0), "{stats:?}");
    assert_eq!(
        stats.executions,
        off.executions + 2,
        "the lows ran alone, the second high request too; the preempted run is not an execution: {stats:?} {off:?}"
    );
    assert_eq!(high.0.outputs, answers_of(&repo, "off", 9).await, "the high answer is the model's");
    assert_eq!(second.0.outputs, answers_of(&repo, "off", 10).await);
}

/// `seed`'s 4-row request answered alone by `model`.
async fn answers_of(
    repo: &Arc<ModelRepository>,
    model: &str,
    seed: usize,
) -> Vec<(String, switchyard_runtime::Tensor)> {
    within(repo.infer(model, None, classify(4, seed))).await.unwrap().outputs
}
