//! Giving freed memory back to the operating system once the server is
//! idle.
//!
//! glibc's malloc keeps what the process frees in its arenas for reuse
//! (one arena per group of threads, and the gateway has many threads: the
//! HTTP workers, tokio's blocking pool, one per pool worker, ONNX Runtime's
//! own), and returns it only when the free space happens to sit at the top
//! of a heap. After a burst of large requests the resident size therefore
//! stays near its peak, although the memory is free. A background thread
//! calls `malloc_trim(0)`, which hands every arena's free pages back, once
//! no request has arrived for [`IDLE_BEFORE_TRIM`] and some were served
//! since the last trim: only when idle, because trimming walks the arenas
//! under their locks and the pages it returns cost a page fault when
//! reused. The `switchyard` binary's own Rust heap is mimalloc, which
//! returns freed pages by itself; the trimmer is for what still lives in
//! glibc's arenas: ONNX Runtime's buffers and every other C/C++ library's.
//! Other C libraries: nothing to do (the thread is not started).

use crate::lifecycle::Lifecycle;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long without a new request before the server counts as idle.
pub const IDLE_BEFORE_TRIM: Duration = Duration::from_secs(2);

/// How often the thread looks at the request counters.
const CHECK_EVERY: Duration = Duration::from_millis(500);

/// Starts the idle trimmer when the process uses glibc's malloc.
pub fn spawn_idle_trimmer(lifecycle: Arc<Lifecycle>) -> std::io::Result<()> {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return Ok(());
    }
    std::thread::Builder::new().name("sy-trim".into()).spawn(move || {
        let mut watch = IdleWatch::new(lifecycle.entered(), Instant::now());
        loop {
            std::thread::sleep(CHECK_EVERY);
            if watch.observe(lifecycle.entered(), lifecycle.in_flight(), Instant::now()) {
                let released = trim();
                tracing::debug!(released, "idle: freed memory handed back to the OS");
            }
        }
    })?;
    Ok(())
}

/// Decides when to trim: after [`IDLE_BEFORE_TRIM`] without new or
/// in-flight requests, once per idle period that followed some work.
#[derive(Debug)]
struct IdleWatch {
    seen: u64,
    trimmed_at: u64,
    quiet_since: Instant,
}

impl IdleWatch {
    fn new(entered: u64, now: Instant) -> Self {
        IdleWatch { seen: entered, trimmed_at: entered, quiet_since: now }
    }

    /// True when it is time to trim, given the counters now.
    fn observe(&mut self, entered: u64, in_flight: usize, now: Instant) -> bool {
        if entered != self.seen || in_flight > 0 {
            self.seen = entered;
            self.quiet_since = now;
            return false;
        }
        if self.trimmed_at == entered || now.duration_since(self.quiet_since) < IDLE_BEFORE_TRIM {
            return false;
        }
        self.trimmed_at = entered;
        true
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: glibc's malloc_trim takes no pointers and may be called from
    // any thread at any time; it only locks and walks malloc's own arenas.
    unsafe { malloc_trim(0) != 0 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_per_idle_period_after_work() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut w = IdleWatch::new(0, t0);
        assert!(!w.observe(0, 0, at(5_000)), "no work yet: nothing to give back");
        assert!(!w.observe(3, 1, at(5_500)), "busy");
        assert!(!w.observe(3, 0, at(6_000)), "quiet for 0.5 s only");
        assert!(!w.observe(3, 0, at(7_000)));
        assert!(w.observe(3, 0, at(8_000)), "2.5 s without a request");
        assert!(!w.observe(3, 0, at(20_000)), "once per idle period");
        assert!(!w.observe(4, 0, at(20_500)), "a request: busy again");
        assert!(w.observe(4, 0, at(23_000)));
    }
}
