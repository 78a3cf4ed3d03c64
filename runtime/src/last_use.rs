//! How long a model has gone without requests, for idle unloading,
//! without reading the clock on the request path.
//!
//! Every request marks its model twice (when it starts and when it ends),
//! and a load marks it once; a mark is one relaxed atomic increment. The
//! clock is read only by [`LastUse::idle_for`], which the idle reaper
//! calls once per tick: when the count moved since its last call, the
//! model was used since, and that call's time stands in for the last use.
//! The idle time it reports is therefore never longer than the real one
//! (a model is never unloaded early), and shorter by at most the reaper's
//! tick (a quarter of the shortest `idle_unload`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A model's use count and when [`LastUse::idle_for`] last saw it move.
#[derive(Debug)]
pub struct LastUse {
    uses: AtomicU64,
    seen: Mutex<(u64, Instant)>,
}

impl LastUse {
    /// Starts idle now.
    pub fn new() -> Self {
        LastUse { uses: AtomicU64::new(0), seen: Mutex::new((0, Instant::now())) }
    }

    /// Marks a use: a request starting or ending, a load.
    pub fn mark(&self) {
        self.uses.fetch_add(1, Ordering::Relaxed);
    }

    /// How long since the last use, as the module docs say: zero when
    /// there was a use since the previous call.
    pub fn idle_for(&self) -> Duration {
        let uses = self.uses.load(Ordering::Relaxed);
        let mut seen = self.seen.lock();
        if seen.0 != uses {
            *seen = (uses, Instant::now());
            return Duration::ZERO;
        }
        seen.1.elapsed()
    }
}

impl Default for LastUse {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_time_grows_without_uses_and_restarts_at_the_first_call_after_one() {
        let last = LastUse::new();
        std::thread::sleep(Duration::from_millis(20));
        assert!(last.idle_for() >= Duration::from_millis(20), "idle since it was made");
        last.mark();
        assert_eq!(last.idle_for(), Duration::ZERO, "a use since the last call");
        std::thread::sleep(Duration::from_millis(20));
        let idle = last.idle_for();
        assert!(idle >= Duration::from_millis(20), "{idle:?}: timed from the call that saw the use");
    }
}
