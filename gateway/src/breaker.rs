//! A circuit breaker for a dependency that can fail or hang (the Redis L2,
//! an upstream address): after `failures_to_open` consecutive failures or
//! timeouts, the dependency is skipped for `cool_down`; then one request
//! probes it. A success closes the breaker, a failure re-opens it.
//!
//! This keeps a down or slow dependency from adding a timeout to every request:
//! only the few requests that open the breaker, and one probe per
//! cool-down, pay it. The state machine is pure and synchronous (time is
//! passed in), so it is tested without a Redis.
//!
//! States:
//! 1. `Closed`: every call is allowed; failures are counted, successes
//!    reset the count. The `failures_to_open`-th consecutive failure opens.
//! 2. `Open { until }`: calls are refused until `until`; the first call
//!    after it becomes the probe and the breaker is `HalfOpen`.
//! 3. `HalfOpen { probe_deadline }`: other calls are refused while the
//!    probe runs; its success closes, its failure re-opens. A probe whose
//!    outcome never arrives (its request was cancelled) is replaced by a
//!    new one after another `cool_down`.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// The breaker's state, as reported in stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// L2 in use.
    Closed,
    /// L2 skipped until the instant.
    Open {
        /// When the next call may probe.
        until: Instant,
    },
    /// One probe in flight; others skip L2.
    HalfOpen {
        /// When a lost probe is given up and another is allowed.
        probe_deadline: Instant,
    },
}

impl BreakerState {
    /// `closed`, `open` or `half_open`, for stats.
    pub fn label(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half_open",
        }
    }
}

#[derive(Debug)]
struct Inner {
    state: BreakerState,
    consecutive_failures: u32,
}

/// A thread-safe breaker; cheap to consult (one uncontended lock).
#[derive(Debug)]
pub struct Breaker {
    failures_to_open: u32,
    cool_down: Duration,
    inner: Mutex<Inner>,
}

impl Breaker {
    /// A closed breaker that opens after `failures_to_open` (at least 1)
    /// consecutive failures and stays open for `cool_down`.
    pub fn new(failures_to_open: u32, cool_down: Duration) -> Breaker {
        Breaker {
            failures_to_open: failures_to_open.max(1),
            cool_down,
            inner: Mutex::new(Inner { state: BreakerState::Closed, consecutive_failures: 0 }),
        }
    }

    /// Whether a call may go to L2 now. When the cool-down has passed this
    /// call becomes the probe (the breaker turns half-open).
    pub fn allow(&self, now: Instant) -> bool {
        let mut inner = self.inner.lock();
        match inner.state {
            BreakerState::Closed => true,
            BreakerState::Open { until } | BreakerState::HalfOpen { probe_deadline: until } => {
                if now >= until {
                    inner.state = BreakerState::HalfOpen { probe_deadline: now + self.cool_down };
                    true
                } else {
                    false
                }
            }
        }
    }

    /// Records a successful call: the breaker closes.
    pub fn on_success(&self) {
        let mut inner = self.inner.lock();
        inner.state = BreakerState::Closed;
        inner.consecutive_failures = 0;
    }

    /// Records a failed or timed-out call; returns true when this failure
    /// opened the breaker.
    pub fn on_failure(&self, now: Instant) -> bool {
        let mut inner = self.inner.lock();
        inner.consecutive_failures = inner.consecutive_failures.saturating_add(1);
        let open = match inner.state {
            BreakerState::Closed => inner.consecutive_failures >= self.failures_to_open,
            BreakerState::HalfOpen { .. } => true,
            BreakerState::Open { .. } => false,
        };
        if open {
            inner.state = BreakerState::Open { until: now + self.cool_down };
        }
        open
    }

    /// The current state.
    pub fn state(&self) -> BreakerState {
        self.inner.lock().state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOL: Duration = Duration::from_millis(100);

    #[test]
    fn opens_after_consecutive_failures_only() {
        let b = Breaker::new(3, COOL);
        let t = Instant::now();
        assert!(!b.on_failure(t));
        assert!(!b.on_failure(t));
        b.on_success();
        assert!(!b.on_failure(t));
        assert!(!b.on_failure(t));
        assert!(b.allow(t));
        assert!(b.on_failure(t), "third consecutive failure opens");
        assert_eq!(b.state().label(), "open");
        assert!(!b.allow(t + COOL / 2), "open: calls skip L2");
    }

    #[test]
    fn one_probe_after_cool_down_then_close_on_success() {
        let b = Breaker::new(1, COOL);
        let t = Instant::now();
        b.on_failure(t);
        assert!(b.allow(t + COOL), "first call after the cool-down probes");
        assert_eq!(b.state().label(), "half_open");
        assert!(!b.allow(t + COOL), "only one probe at a time");
        b.on_success();
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.allow(t + COOL));
    }

    #[test]
    fn failed_probe_reopens_for_another_cool_down() {
        let b = Breaker::new(2, COOL);
        let t = Instant::now();
        b.on_failure(t);
        b.on_failure(t);
        let probe_at = t + COOL;
        assert!(b.allow(probe_at));
        assert!(b.on_failure(probe_at), "a failed probe re-opens at once");
        assert!(!b.allow(probe_at + COOL / 2));
        assert!(b.allow(probe_at + COOL));
    }

    #[test]
    fn lost_probe_is_replaced_after_cool_down() {
        let b = Breaker::new(1, COOL);
        let t = Instant::now();
        b.on_failure(t);
        assert!(b.allow(t + COOL));
        // The probe's request was cancelled: no outcome is recorded.
        assert!(!b.allow(t + COOL + COOL / 2));
        assert!(b.allow(t + COOL * 2), "a new probe once the lost one's deadline passed");
    }
}
