//! Fixed-bucket histograms kept as plain atomic counters, for the
//! distributions operators watch per pool and per model: rows per executed
//! batch, batch execution time, queue wait, and cold-start time.
//!
//! The runtime only counts; it knows nothing of Prometheus. A
//! [`HistogramSnapshot`] is plain data (upper bounds, per-bucket counts,
//! sum) that the gateway turns into Prometheus histograms at scrape time.
//! Recording is lock-free: a short scan of the bounds and two relaxed
//! atomic adds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds for rows per executed batch.
pub const BATCH_ROWS_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// Upper bounds (µs) for a batch's execution time: 50 µs to 5 s.
pub const EXECUTION_US_BOUNDS: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000,
];

/// Upper bounds (µs) for a request's wait in a pool queue: 10 µs to 5 s.
pub const QUEUE_WAIT_US_BOUNDS: &[u64] = &[
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
    5_000_000,
];

/// Upper bounds (µs) for a model's cold start (building every pool's
/// sessions): 10 ms to 2 min.
pub const COLD_START_US_BOUNDS: &[u64] = &[
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    120_000_000,
];

/// A histogram over `u64` observations with fixed upper bounds; the last
/// bucket counts observations above every bound.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [u64],
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Histogram {
    /// An empty histogram with `bounds` (ascending).
    pub fn new(bounds: &'static [u64]) -> Histogram {
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Histogram { bounds, counts, sum: AtomicU64::new(0) }
    }

    /// Counts one observation of `value`.
    pub fn record(&self, value: u64) {
        let i = self.bounds.iter().position(|&b| value <= b).unwrap_or(self.bounds.len());
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Counts one duration, in whole microseconds.
    pub fn record_duration(&self, took: Duration) {
        self.record(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            upper_bounds: self.bounds.to_vec(),
            counts: self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// A histogram's counts at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistogramSnapshot {
    /// Ascending upper bounds (inclusive), in the histogram's unit.
    pub upper_bounds: Vec<u64>,
    /// Observations per bucket (not cumulative): `counts[i]` are those
    /// `<= upper_bounds[i]` and above the previous bound; the extra last
    /// entry counts those above every bound.
    pub counts: Vec<u64>,
    /// Sum of all observations (saturates only after ~584,000 years of
    /// microseconds).
    pub sum: u64,
}

impl HistogramSnapshot {
    /// Observations in all buckets.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The distributions one pool keeps (kept across unloads, like its
/// counters).
#[derive(Debug)]
pub struct PoolHistograms {
    /// Rows per executed batch.
    pub batch_rows: Histogram,
    /// Execution time per batch (µs), failed batches included.
    pub execution_us: Histogram,
    /// Time each executed request waited in the queue (µs).
    pub queue_wait_us: Histogram,
}

impl Default for PoolHistograms {
    fn default() -> Self {
        PoolHistograms {
            batch_rows: Histogram::new(BATCH_ROWS_BOUNDS),
            execution_us: Histogram::new(EXECUTION_US_BOUNDS),
            queue_wait_us: Histogram::new(QUEUE_WAIT_US_BOUNDS),
        }
    }
}

impl PoolHistograms {
    /// A copy of the three distributions.
    pub fn snapshot(&self) -> PoolHistogramSnapshot {
        PoolHistogramSnapshot {
            batch_rows: self.batch_rows.snapshot(),
            execution_us: self.execution_us.snapshot(),
            queue_wait_us: self.queue_wait_us.snapshot(),
        }
    }
}

/// A pool's distributions at one moment (see [`PoolHistograms`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PoolHistogramSnapshot {
    /// Rows per executed batch.
    pub batch_rows: HistogramSnapshot,
    /// Batch execution time, µs.
    pub execution_us: HistogramSnapshot,
    /// Queue wait per executed request, µs.
    pub queue_wait_us: HistogramSnapshot,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fall_in_inclusive_buckets_and_overflow() {
        let h = Histogram::new(&[1, 4, 16]);
        for v in [0, 1, 2, 4, 5, 16, 17, 1000] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.upper_bounds, vec![1, 4, 16]);
        assert_eq!(s.counts, vec![2, 2, 2, 2]);
        assert_eq!(s.count(), 8);
        assert_eq!(s.sum, 1 + 2 + 4 + 5 + 16 + 17 + 1000);
    }

    #[test]
    fn durations_are_recorded_in_microseconds() {
        let h = Histogram::new(EXECUTION_US_BOUNDS);
        h.record_duration(Duration::from_micros(700));
        let s = h.snapshot();
        assert_eq!(s.sum, 700);
        let i = EXECUTION_US_BOUNDS.iter().position(|&b| b == 1_000).unwrap_or(usize::MAX);
        assert_eq!(s.counts[i], 1);
    }

    #[test]
    fn bounds_ascend() {
        for bounds in [BATCH_ROWS_BOUNDS, EXECUTION_US_BOUNDS, QUEUE_WAIT_US_BOUNDS, COLD_START_US_BOUNDS] {
            assert!(bounds.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
