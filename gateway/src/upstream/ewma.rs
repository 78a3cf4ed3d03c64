//! Peak-EWMA latency of one upstream address (the estimator of Finagle's
//! and Linkerd's load balancers).
//!
//! 1. A sample above the estimate replaces it at once (the "peak"): an
//!    address that turns slow is avoided from its next request on.
//! 2. A sample below it is blended in with weight `1 - exp(-dt / DECAY)`,
//!    `dt` the time since the previous sample: the estimate comes back
//!    down over a few `DECAY`s, faster the more often the address answers.
//! 3. Without samples the estimate also fades, with time constant
//!    [`IDLE_DECAY`]: an address (or upstream) avoided because it was slow
//!    is tried again after a while instead of being shunned forever; if it
//!    is still slow, that one request measures it and the peak returns.
//! 4. No sample yet: no estimate (selection and the fleet view use a prior).
//!
//! Time is passed in, so the estimator is tested without sleeping.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// Time constant of the decay towards lower samples.
pub const DECAY: Duration = Duration::from_secs(2);

/// Time constant of the fading of an estimate that gets no samples.
pub const IDLE_DECAY: Duration = Duration::from_secs(10);

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

impl State {
    /// The estimate at `now`, faded for the time without samples (step 3).
    fn faded(&self, now: Instant) -> f64 {
        let Some(last) = self.last else { return self.estimate_ns };
        let idle = now.saturating_duration_since(last).as_secs_f64();
        self.estimate_ns * (-idle / IDLE_DECAY.as_secs_f64()).exp()
    }
}

impl PeakEwma {
    /// Adds one observed latency, taken at `now`.
    pub fn observe(&self, latency: Duration, now: Instant) {
        let sample = latency.as_nanos() as f64;
        let mut s = self.state.lock();
        let current = s.faded(now);
        s.estimate_ns = match s.last {
            None => sample,
            Some(_) if sample >= current => sample,
            Some(last) => {
                let dt = now.saturating_duration_since(last).as_secs_f64();
                let keep = (-dt / DECAY.as_secs_f64()).exp();
                current * keep + sample * (1.0 - keep)
            }
        };
        s.last = Some(now);
        s.samples = s.samples.saturating_add(1);
    }

    /// The estimate at `now`, if any sample was observed.
    pub fn snapshot(&self, now: Instant) -> Option<LatencySnapshot> {
        let s = self.state.lock();
        s.last.map(|last| LatencySnapshot {
            estimate: Duration::from_nanos(s.faded(now) as u64),
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
        assert!(e.snapshot(t).is_none());
        e.observe(MS * 10, t);
        assert_eq!(e.snapshot(t).unwrap().estimate, MS * 10);
        e.observe(MS * 100, t + MS);
        assert_eq!(e.snapshot(t + MS).unwrap().estimate, MS * 100, "a slower sample is taken at once");
        // A fast sample right after the peak barely moves it...
        e.observe(MS * 10, t + MS * 2);
        let soon = e.snapshot(t + MS * 2).unwrap().estimate;
        assert!(soon > MS * 99, "{soon:?}");
        // ...one a few decay constants later brings it most of the way back.
        e.observe(MS * 10, t + DECAY * 4);
        let later = e.snapshot(t + DECAY * 4).unwrap();
        assert!(later.estimate < MS * 12, "{:?}", later.estimate);
        assert_eq!(later.samples, 4);
    }

    #[test]
    fn an_idle_estimate_fades_so_the_address_is_tried_again() {
        let e = PeakEwma::default();
        let t = Instant::now();
        e.observe(MS * 300, t);
        assert!(e.snapshot(t + IDLE_DECAY / 10).unwrap().estimate > MS * 250, "briefly idle: still slow");
        assert!(e.snapshot(t + IDLE_DECAY * 5).unwrap().estimate < MS * 3, "long idle: worth a try");
        e.observe(MS * 300, t + IDLE_DECAY * 5);
        assert_eq!(
            e.snapshot(t + IDLE_DECAY * 5).unwrap().estimate,
            MS * 300,
            "still slow: the peak is back"
        );
    }
}
