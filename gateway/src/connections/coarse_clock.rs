//! The connection table's millisecond clock, read from the kernel's
//! coarse monotonic clock.
//!
//! Every request moves its connection through three phases, each stamped
//! with the time (see [`super::state`]), and the read guard checks the head
//! deadline on each read: three or four clock reads per request that need
//! only millisecond resolution against timeouts of seconds.
//! `CLOCK_MONOTONIC_COARSE` is the time of the last timer tick: read from
//! the vDSO without reading the TSC, several times cheaper than
//! `Instant::now`, and up to one tick (1-4 ms) behind it. Deadlines made
//! from it ([`CoarseClock::instant_at`]) are therefore up to one tick early
//! or late, which no connection timeout can tell.

use std::time::{Duration, Instant};

/// Milliseconds since the clock was made, on the coarse clock; falls back
/// to [`Instant`] where the coarse clock cannot be read.
#[derive(Debug)]
pub struct CoarseClock {
    epoch: Instant,
    coarse_epoch: Option<Duration>,
}

impl CoarseClock {
    /// A clock whose zero is now.
    pub fn new() -> CoarseClock {
        CoarseClock { epoch: Instant::now(), coarse_epoch: coarse_now() }
    }

    /// Milliseconds since the clock was made.
    pub fn now_ms(&self) -> u64 {
        let elapsed = match (self.coarse_epoch, coarse_now()) {
            (Some(epoch), Some(now)) => now.saturating_sub(epoch),
            _ => self.epoch.elapsed(),
        };
        u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
    }

    /// The instant that `ms` on this clock stands for (within one tick).
    pub fn instant_at(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }
}

impl Default for CoarseClock {
    fn default() -> Self {
        CoarseClock::new()
    }
}

/// `CLOCK_MONOTONIC_COARSE` now, `None` if the kernel refuses it.
fn coarse_now() -> Option<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `clock_gettime` only writes the `timespec` we own and pass by
    // a valid, exclusive pointer.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } == 0;
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    ok.then(|| Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coarse_clock_is_read_on_linux() {
        assert!(coarse_now().is_some());
        assert!(CoarseClock::new().coarse_epoch.is_some());
    }

    #[test]
    fn the_clock_moves_forward_with_real_time_within_a_tick() {
        let clock = CoarseClock::new();
        let before = clock.now_ms();
        std::thread::sleep(Duration::from_millis(60));
        let after = clock.now_ms();
        // At least the sleep less one tick (the coarse clock is <= 4 ms behind
        // at HZ=250, 10 ms at HZ=100), and never backwards.
        assert!(after >= before + 50, "{before} -> {after}");
    }

    #[test]
    fn instants_follow_the_epoch() {
        let clock = CoarseClock::new();
        assert_eq!(clock.instant_at(1500) - clock.instant_at(500), Duration::from_secs(1));
    }
}
