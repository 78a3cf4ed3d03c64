//! How many pool worker threads are alive in this process. Workers are
//! detached threads that own their ONNX Runtime sessions; a process that
//! returns from `main` while they still hold them races the C++ runtime's
//! exit-time teardown (CUDA's in particular: the GPU check saw a
//! segmentation fault at exit). [`wait_for_workers`] lets the process wait,
//! after unloading its models, until every worker has dropped its session.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

static LIVE: Mutex<usize> = Mutex::new(0);
static CHANGED: Condvar = Condvar::new();

fn live() -> MutexGuard<'static, usize> {
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Counts one worker as alive from its creation until it is dropped; the
/// worker thread drops it after its session.
#[derive(Debug)]
pub(crate) struct WorkerTicket(());

impl WorkerTicket {
    /// Counts a worker that is about to start.
    pub(crate) fn new() -> WorkerTicket {
        *live() += 1;
        WorkerTicket(())
    }
}

impl Drop for WorkerTicket {
    fn drop(&mut self) {
        let mut n = live();
        *n = n.saturating_sub(1);
        CHANGED.notify_all();
    }
}

/// Pool worker threads alive now.
pub fn live_workers() -> usize {
    *live()
}

/// Waits until no pool worker is alive, at most `timeout`; true when none
/// is. Call after [`crate::ModelRepository::shutdown`] (which lets every
/// worker finish its queue and exit) and before the process exits.
pub fn wait_for_workers(timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut n = live();
    while *n > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        n = CHANGED.wait_timeout(n, left).map(|(guard, _)| guard).unwrap_or_else(|e| e.into_inner().0);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_ends_when_the_last_ticket_is_dropped() {
        let ticket = WorkerTicket::new();
        assert!(live_workers() >= 1);
        let dropper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(ticket);
        });
        // Other tests of this binary may hold workers; this waits for all.
        assert!(wait_for_workers(Duration::from_secs(30)));
        dropper.join().unwrap();
    }
}
