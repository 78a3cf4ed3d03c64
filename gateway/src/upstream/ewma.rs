//! Peak-EWMA latency of one upstream address (the estimator of Finagle's
//! and Linkerd's load balancers).
//!
//! 1. A sample above the estimate replaces it at once (the "peak"): an
//!    address that turns slow is avoided from its next request on.
//! 2. A sample below it is blended in with weight `1 - exp(-dt / DECAY)`,
//!    `dt` the time since the previous sample: the estimate comes back
//!    down over a few `DECAY`s, faster the more often the address answers.
//! 3. No sample yet: no estimate (selection and the fleet view use a prior).
//!
//! Time is passed in, so the estimator is tested without sleeping.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// Time constant of the decay towards lower samples.
pub const DECAY: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
struct State {
    estimate_ns: f64,
    last: Option<Instant>,
    samples: u64,
}

/// One address's latency estimate; cheap to update (one uncontended lock).
#[derive(Debug, Default)]
pub struct PeakEwma {
    state: Mutex<State>,
}

/// A copy of the estimator's state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySnapshot {
    /// The current estimate.
    pub estimate: Duration,
    /// Samples observed so far.
    pub samples: u64,
    /// When the last sample was taken.
    pub last: Instant,
}

impl PeakEwma {
    /// Adds one observed latency, taken at `now`.
    pub fn observe(&self, latency: Duration, now: Instant) {
        let sample = latency.as_nanos() as f64;
        let mut s = self.state.lock();
        s.estimate_ns = match s.last {
            None => sample,
            Some(_) if sample >= s.estimate_ns => sample,
            Some(last) => {
                let dt = now.saturating_duration_since(last).as_secs_f64();
                let keep = (-dt / DECAY.as_secs_f64()).exp();
                s.estimate_ns * keep + sample * (1.0 - keep)
            }
        };
        s.last = Some(now);
        s.samples = s.samples.saturating_add(1);
    }

    /// The estimate, if any sample was observed.
    pub fn snapshot(&self) -> Option<LatencySnapshot> {
        let s = self.state.lock();
        s.last.map(|last| LatencySnapshot {
            estimate: Duration::from_nanos(s.estimate_ns as u64),
            samples: s.samples,
            last,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn peaks_jump_up_and_decay_down() {
        let e = PeakEwma::default();
        let t = Instant::now();
        assert!(e.snapshot().is_none());
        e.observe(MS * 10, t);
        assert_eq!(e.snapshot().unwrap().estimate, MS * 10);
        e.observe(MS * 100, t + MS);
        assert_eq!(e.snapshot().unwrap().estimate, MS * 100, "a slower sample is taken at once");
        // A fast sample right after the peak barely moves it...
        e.observe(MS * 10, t + MS * 2);
        let soon = e.snapshot().unwrap().estimate;
        assert!(soon > MS * 99, "{soon:?}");
        // ...one a few decay constants later brings it most of the way back.
        e.observe(MS * 10, t + DECAY * 4);
        let later = e.snapshot().unwrap();
        assert!(later.estimate < MS * 12, "{:?}", later.estimate);
        assert_eq!(later.samples, 4);
    }
}
