//! One address of an upstream: its health (from the active checks), its
//! breaker (from real traffic), its latency estimate and its load.
//!
//! Every request to an address is an [`Attempt`]: taken with
//! [`Address::begin`], it counts as in flight until dropped, and its
//! outcome ([`Attempt::succeeded`], [`Attempt::failed`]) feeds the latency
//! estimate and the breaker. An attempt dropped without an outcome (the
//! client went away) changes neither.

use super::ewma::{LatencySnapshot, PeakEwma};
use crate::breaker::{Breaker, BreakerState};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One upstream address and what is known about it.
#[derive(Debug)]
pub struct Address {
    /// The socket address.
    pub addr: SocketAddr,
    healthy: AtomicBool,
    breaker: Breaker,
    latency: PeakEwma,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    failures: AtomicU64,
}

/// Counters and state of an address, for stats.
#[derive(Debug, Clone, PartialEq)]
pub struct AddressSnapshot {
    /// The socket address.
    pub addr: SocketAddr,
    /// Whether the health checks pass.
    pub healthy: bool,
    /// `closed`, `open` or `half_open`.
    pub breaker: &'static str,
    /// The latency estimate, if measured.
    pub latency: Option<LatencySnapshot>,
    /// Requests in flight now.
    pub in_flight: usize,
    /// Attempts started.
    pub requests: u64,
    /// Attempts that failed.
    pub failures: u64,
}

impl Address {
    /// A healthy address with a closed breaker and no statistics.
    pub fn new(addr: SocketAddr, breaker_failures: u32, cool_down: Duration) -> Address {
        Address {
            addr,
            healthy: AtomicBool::new(true),
            breaker: Breaker::new(breaker_failures, cool_down),
            latency: PeakEwma::default(),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    /// Sets the health-check verdict.
    pub fn set_healthy(&self, healthy: bool) {
        self.healthy.store(healthy, Ordering::Relaxed);
    }

    /// Whether the health checks pass.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Whether a request may be sent now: healthy, and the breaker closed
    /// or due for its probe. Does not take the probe (see [`Address::begin`]).
    pub fn is_usable(&self, now: Instant) -> bool {
        self.is_healthy() && self.breaker_allows(now)
    }

    /// Whether the breaker is closed or due for its probe at `now`.
    pub fn breaker_allows(&self, now: Instant) -> bool {
        match self.breaker.state() {
            BreakerState::Closed => true,
            BreakerState::Open { until } | BreakerState::HalfOpen { probe_deadline: until } => now >= until,
        }
    }

    /// Load-aware cost for selection: the latency estimate (or `prior`)
    /// times the requests in flight plus one.
    pub fn cost(&self, prior: Duration) -> f64 {
        let latency = self.latency.snapshot(Instant::now()).map_or(prior, |s| s.estimate);
        latency.as_secs_f64() * (self.in_flight.load(Ordering::Relaxed) as f64 + 1.0)
    }

    /// Starts an attempt, if the breaker allows one now (a due probe is
    /// taken by this call; `None` means another request holds it).
    pub fn begin(self: &Arc<Self>, now: Instant) -> Option<Attempt> {
        if !self.breaker.allow(now) {
            return None;
        }
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        Some(Attempt { address: self.clone(), started: now })
    }

    /// The latency estimate at `now`, if measured.
    pub fn latency(&self, now: Instant) -> Option<LatencySnapshot> {
        self.latency.snapshot(now)
    }

    /// A copy of the state and counters.
    pub fn snapshot(&self) -> AddressSnapshot {
        AddressSnapshot {
            addr: self.addr,
            healthy: self.is_healthy(),
            breaker: self.breaker.state().label(),
            latency: self.latency.snapshot(Instant::now()),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
        }
    }
}

/// One request in flight to an address.
#[derive(Debug)]
pub struct Attempt {
    address: Arc<Address>,
    started: Instant,
}

impl Attempt {
    /// The address this attempt goes to.
    pub fn address(&self) -> &Arc<Address> {
        &self.address
    }

    /// When it started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The address answered; `latency` is the time to its answer (for a
    /// stream, to the response head). Closes the breaker.
    pub fn succeeded(self, latency: Duration) {
        self.address.latency.observe(latency, Instant::now());
        self.address.breaker.on_success();
    }

    /// The address failed (refused, reset, timed out, garbage, 5xx).
    /// Counts towards its breaker; a slow failure also raises its latency
    /// estimate, so that selection avoids it.
    pub fn failed(self) {
        let now = Instant::now();
        self.address.failures.fetch_add(1, Ordering::Relaxed);
        self.address.latency.observe(now.saturating_duration_since(self.started), now);
        if self.address.breaker.on_failure(now) {
            tracing::warn!(addr = %self.address.addr, "upstream address failing; breaker opened");
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        self.address.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(failures: u32) -> Arc<Address> {
        Arc::new(Address::new("127.0.0.1:1".parse().unwrap(), failures, Duration::from_millis(50)))
    }

    #[test]
    fn attempts_count_in_flight_until_dropped() {
        let a = address(3);
        let now = Instant::now();
        let first = a.begin(now).unwrap();
        let second = a.begin(now).unwrap();
        assert_eq!(a.snapshot().in_flight, 2);
        assert!(a.cost(Duration::from_millis(1)) > 0.0029, "cost grows with load");
        first.succeeded(Duration::from_millis(4));
        drop(second);
        let snap = a.snapshot();
        assert_eq!((snap.in_flight, snap.requests, snap.failures), (0, 2, 0));
        let estimate = snap.latency.unwrap().estimate;
        assert!(
            estimate > Duration::from_micros(3_990) && estimate <= Duration::from_millis(4),
            "{estimate:?}"
        );
    }

    #[test]
    fn breaker_takes_a_failing_address_out_and_probes_it_back() {
        let a = address(2);
        let t = Instant::now();
        a.begin(t).unwrap().failed();
        assert!(a.is_usable(t));
        a.begin(t).unwrap().failed();
        assert!(!a.is_usable(Instant::now()), "second consecutive failure opens the breaker");
        assert_eq!(a.snapshot().breaker, "open");
        let later = Instant::now() + Duration::from_millis(60);
        assert!(a.is_usable(later), "due for a probe");
        let probe = a.begin(later).unwrap();
        assert!(a.begin(later).is_none(), "one probe at a time");
        probe.succeeded(Duration::from_millis(1));
        assert_eq!(a.snapshot().breaker, "closed");
    }

    #[test]
    fn unhealthy_addresses_are_not_usable() {
        let a = address(1);
        a.set_healthy(false);
        assert!(!a.is_usable(Instant::now()));
        a.set_healthy(true);
        assert!(a.is_usable(Instant::now()));
    }
}
