//! A session reserved for the first class (`batching.reserve_top_class`,
//! the runtime's `reserve` module), through the real ONNX Runtime on the
//! project's slowest model (models/synth-heavy.onnx, ~100 MFLOP a row):
//! a class-1 request that arrives while a class-4 batch runs on the
//! pool's worker runs on the reserved session and is answered before
//! that batch ends, which is not stopped (no preemption) and answers the
//! same bytes as on a pool without the setting; the other session's run
//! goes on a thread of lowered priority, the reserved worker keeps
//! normal priority; a class-4 request never runs on the reserved
//! session. Skipped, with a note, when the model has not been generated.
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
    let mut on = spec("rsv", "unused", 2 * LOW_ROWS, 0, 64);
    on.path = path.clone();
    on.batching.reserve_top_class = true;
    let mut off = spec("plain", "unused", 2 * LOW_ROWS, 0, 64);
    off.path = path;
    repo(vec![on, off])
}

/// The nice value of each of this process's threads whose name starts
/// with `prefix` (Linux).
fn nice_of_threads(prefix: &str) -> Vec<i64> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        // Fields after the name: state is the 3rd field of the line, nice the 19th.
        let nice = stat[close + 2..].split_whitespace().nth(16).unwrap().parse().unwrap();
        found.push(nice);
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_class_request_runs_beside_a_low_batch_on_its_session_and_nothing_is_stopped() {
    let Some(path) = synth_heavy() else { return };
    let repo = models(path);

    // The reference: the same requests on a pool without the setting.
    let lows = low_batch_running(&repo, "plain", LOW, LOW_ROWS).await;
    let high = send(&repo, "plain", HIGH, 4, 9);
    let high_plain = answers(vec![high]).await.remove(0);
    let reference = answers(lows).await;
    for (_, done) in &reference {
        assert!(*done <= high_plain.1, "without the setting the high request waits for the low batch");
    }

    let lows = low_batch_running(&repo, "rsv", LOW, LOW_ROWS).await;
    if cfg!(target_os = "linux") {
        let mut lowered = Vec::new();
        wait_until("the low batch's run on its lowered thread", || {
            lowered = nice_of_threads("sy-lowered-run");
            !lowered.is_empty()
        })
        .await;
        assert_eq!(lowered, [19], "the other session's run is lowered");
        assert_eq!(nice_of_threads("sy-first-rsv"), [0], "the reserved worker is not");
    }
    let high = send(&repo, "rsv", HIGH, 4, 9);
    let high = answers(vec![high]).await.remove(0);
    assert_eq!(high.0.batch_size, 4, "the high request ran in a batch of its own");
    assert_eq!(high.0.outputs, high_plain.0.outputs, "the high answer is the model's");
    let stats = pool_stats(&repo, "rsv", "cpu");
    assert_eq!(stats.reserved_batches, 1, "{stats:?}");
    let lows = answers(lows).await;
    for ((low, done), (want, _)) in lows.iter().zip(&reference) {
        assert!(high.1 <= *done, "the high request was answered while the low batch ran");
        assert_eq!(low.batch_size, 2 * LOW_ROWS, "the low batch ran to the end, as one");
        assert_eq!(low.outputs, want.outputs, "same tensors, same bytes as without the setting");
    }

    // A low request alone never takes the reserved session.
    let low = answers(vec![send(&repo, "rsv", LOW, 4, 3)]).await.remove(0);
    let stats = pool_stats(&repo, "rsv", "cpu");
    assert_eq!(stats.reserved_batches, 1, "the low request ran on the other session: {stats:?}");
    assert_eq!(low.0.outputs, answers(vec![send(&repo, "plain", LOW, 4, 3)]).await.remove(0).0.outputs);
    assert_eq!(
        (stats.preemptions, stats.errors, stats.queue_depth, stats.in_flight),
        (0, 0, 0, 0),
        "{stats:?}"
    );
}
