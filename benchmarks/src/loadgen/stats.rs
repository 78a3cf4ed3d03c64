//! Per-worker result recording and the live counters behind the progress line.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::client::Outcome;
use super::error::{LoadgenError, Result};

/// Highest latency the histograms track (60 s, in microseconds); larger values are clamped.
pub const MAX_LATENCY_US: u64 = 60_000_000;

/// A microsecond histogram from 1 µs to 60 s with 3 significant digits.
pub fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).map_err(|e| LoadgenError::Histogram(e.to_string()))
}

/// Microseconds in `d`, saturating.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Measured results of one worker (merged into one at the end).
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Latency of successful (2xx) requests, in microseconds.
    pub latency: Histogram<u64>,
    /// Open loop: delay between a request's intended and actual send time, in microseconds.
    pub send_lag: Histogram<u64>,
    /// Successful (2xx) responses.
    pub ok: u64,
    /// Non-2xx responses by status code.
    pub statuses: BTreeMap<u16, u64>,
    /// Connect/send/receive failures.
    pub conn_errors: u64,
    /// Requests that hit the per-request timeout.
    pub timeouts: u64,
    /// Completion time of the last measured request.
    pub last_done: Option<Instant>,
    /// Closed loop: 2xx responses that completed inside the measured window
    /// (`[measure_start, end]`), whenever their request started (warm-up
    /// included); what a server sustained while the window lasted.
    pub ok_in_window: u64,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Result<Self> {
        Ok(Recorder {
            latency: new_histogram()?,
            send_lag: new_histogram()?,
            ok: 0,
            statuses: BTreeMap::new(),
            conn_errors: 0,
            timeouts: 0,
            last_done: None,
            ok_in_window: 0,
        })
    }

    /// Records one measured request.
    pub fn record(&mut self, outcome: Outcome, latency: Duration, done: Instant) {
        match outcome {
            Outcome::Status(s) if (200..300).contains(&s) => {
                self.ok += 1;
                self.latency.saturating_record(micros(latency).max(1));
            }
            Outcome::Status(s) => *self.statuses.entry(s).or_insert(0) += 1,
            Outcome::ConnError => self.conn_errors += 1,
            Outcome::Timeout => self.timeouts += 1,
        }
        self.last_done = Some(self.last_done.map_or(done, |t| t.max(done)));
    }

    /// Requests recorded, whatever their outcome.
    pub fn total(&self) -> u64 {
        self.ok + self.statuses.values().sum::<u64>() + self.conn_errors + self.timeouts
    }

    /// Adds `other`'s results to this one.
    pub fn merge(&mut self, other: &Recorder) -> Result<()> {
        self.latency.add(&other.latency).map_err(|e| LoadgenError::Histogram(format!("{e:?}")))?;
        self.send_lag.add(&other.send_lag).map_err(|e| LoadgenError::Histogram(format!("{e:?}")))?;
        self.ok += other.ok;
        for (s, n) in &other.statuses {
            *self.statuses.entry(*s).or_insert(0) += n;
        }
        self.conn_errors += other.conn_errors;
        self.timeouts += other.timeouts;
        self.ok_in_window += other.ok_in_window;
        self.last_done = match (self.last_done, other.last_done) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Ok(())
    }
}

/// Counters shared by all workers, read by the progress reporter (warm-up included).
#[derive(Debug, Default)]
pub struct Live {
    /// Requests completed.
    pub done: AtomicU64,
    /// Requests that failed (non-2xx, connection error or timeout).
    pub errors: AtomicU64,
}

impl Live {
    /// Counts one completed request.
    pub fn note(&self, outcome: Outcome) {
        self.done.fetch_add(1, Ordering::Relaxed);
        if !outcome.is_success() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Start and end instants of a run's phases.
#[derive(Debug, Clone, Copy)]
pub struct Phases {
    /// When load starts.
    pub t0: Instant,
    /// When measuring starts (end of warm-up).
    pub measure_start: Instant,
    /// When sending stops.
    pub end: Instant,
}

impl Phases {
    /// Phases starting now.
    pub fn starting_now(warmup: Duration, duration: Duration) -> Self {
        let t0 = Instant::now();
        Phases { t0, measure_start: t0 + warmup, end: t0 + warmup + duration }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_and_merge() {
        let now = Instant::now();
        let mut a = Recorder::new().unwrap();
        a.record(Outcome::Status(200), Duration::from_micros(100), now);
        a.record(Outcome::Status(500), Duration::from_micros(5), now);
        a.record(Outcome::ConnError, Duration::ZERO, now);
        let mut b = Recorder::new().unwrap();
        b.record(Outcome::Status(204), Duration::from_secs(120), now + Duration::from_secs(1));
        b.record(Outcome::Status(500), Duration::from_micros(5), now);
        b.record(Outcome::Timeout, Duration::ZERO, now);
        a.merge(&b).unwrap();
        assert_eq!(a.ok, 2);
        assert_eq!(a.statuses.get(&500), Some(&2));
        assert_eq!(a.conn_errors, 1);
        assert_eq!(a.timeouts, 1);
        assert_eq!(a.total(), 6);
        assert_eq!(a.latency.len(), 2);
        assert!(a.latency.max() >= MAX_LATENCY_US);
        assert_eq!(a.last_done, Some(now + Duration::from_secs(1)));
    }
}
