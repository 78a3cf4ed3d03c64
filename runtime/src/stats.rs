//! Per-pool counters and latency estimates, and the plain-data snapshot the
//! gateway reads ([`RuntimeSnapshot`]) to build the routing policy's view
//! of the fleet.
//!
//! Latency is kept per batch-size bucket (powers of two: a batch of 3 rows
//! falls in bucket 4) as an exponentially weighted moving average.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::device::DeviceKind;
use crate::histogram::{HistogramSnapshot, PoolHistogramSnapshot};
use crate::model_state::ModelState;

/// Weight of the newest sample in the moving average.
const EWMA_ALPHA: f64 = 0.2;
/// Buckets 1, 2, 4, ... 2^(BUCKETS-1) rows; larger batches share the last.
const BUCKETS: usize = 17;

/// Live counters of one pool; they survive unloads and reloads.
#[derive(Debug, Default)]
pub struct PoolCounters {
    /// Requests accepted into the queue.
    pub requests: AtomicU64,
    /// Batches executed (successfully or not).
    pub executions: AtomicU64,
    /// Rows in executed batches.
    pub executed_rows: AtomicU64,
    /// Requests dropped before execution because their caller went away
    /// (or gave up at its deadline while the pool was paused), or before
    /// a failed batch of theirs was rerun request by request.
    pub cancelled: AtomicU64,
    /// Requests refused because the queue was full.
    pub rejected: AtomicU64,
    /// Requests that failed during execution.
    pub errors: AtomicU64,
    /// Batches of several requests that failed and were rerun one request
    /// at a time, so that only the requests that fail alone got the error
    /// (see `crate::isolate`).
    pub isolated_batches: AtomicU64,
    /// Requests run on the caller's thread rather than a worker's (see
    /// `crate::inline`); they count in `requests` and `executions` too.
    pub inline_runs: AtomicU64,
    /// Batches a caller ran on its own thread while the pool was busy,
    /// taking them from the queue as a worker would (see
    /// `crate::caller_batch`); they count in `executions` too.
    pub caller_batches: AtomicU64,
    /// Batches stopped while running for a request of a higher class,
    /// their requests put back into the queue (see `crate::preempt`);
    /// not counted in `executions`.
    pub preemptions: AtomicU64,
    /// Batches run on the session a pool keeps for the first class
    /// (`batching.reserve_top_class`, see `crate::reserve`); they count
    /// in `executions` too.
    pub reserved_batches: AtomicU64,
    /// Requests accepted but not yet executing or cancelled.
    pub queue_depth: AtomicUsize,
    /// Requests in batches executing now.
    pub in_flight: AtomicUsize,
}

/// Latency estimates by batch-size bucket.
#[derive(Debug, Default)]
pub struct LatencyTable {
    buckets: Mutex<[(f64, u64); BUCKETS]>,
}

/// Index of the power-of-two bucket holding `rows`.
fn bucket_index(rows: usize) -> usize {
    let pow = rows.max(1).next_power_of_two().trailing_zeros() as usize;
    pow.min(BUCKETS - 1)
}

impl LatencyTable {
    /// Records one batch of `rows` rows that took `took`.
    pub fn record(&self, rows: usize, took: Duration) {
        let mut buckets = self.buckets.lock();
        let (ewma, samples) = &mut buckets[bucket_index(rows)];
        let secs = took.as_secs_f64();
        *ewma = if *samples == 0 { secs } else { EWMA_ALPHA * secs + (1.0 - EWMA_ALPHA) * *ewma };
        *samples += 1;
    }

    /// Predicted execution time of a batch of `rows` rows, as
    /// [`PoolStats::predict_exec`] computes it, without copying the table.
    pub fn predict_exec(&self, rows: usize) -> Option<Duration> {
        let buckets = self.buckets.lock();
        let sampled = buckets
            .iter()
            .enumerate()
            .filter(|(_, (_, samples))| *samples > 0)
            .map(|(i, &(ewma, _))| (1usize << i, Duration::from_secs_f64(ewma)));
        predict_from(sampled, rows)
    }

    /// Buckets up to the one holding `max_rows`, plus any larger bucket
    /// that has samples (requests larger than the batch limit run alone).
    pub fn snapshot(&self, max_rows: usize) -> Vec<LatencyBucket> {
        let buckets = self.buckets.lock();
        let upto = bucket_index(max_rows);
        buckets
            .iter()
            .enumerate()
            .filter(|(i, (_, samples))| *i <= upto || *samples > 0)
            .map(|(i, &(ewma, samples))| LatencyBucket {
                max_batch: 1usize << i,
                ewma: Duration::from_secs_f64(ewma),
                samples,
            })
            .collect()
    }
}

/// One latency bucket: batches of up to `max_batch` rows (and more than
/// half of it) took `ewma` on average.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyBucket {
    /// Upper bound of the bucket, a power of two.
    pub max_batch: usize,
    /// Moving average of execution time; zero without samples.
    pub ewma: Duration,
    /// Batches recorded.
    pub samples: u64,
}

/// A pool's statistics at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStats {
    /// Pool name.
    pub name: Arc<str>,
    /// Its device.
    pub device: DeviceKind,
    /// False when the pool cannot serve (its sessions failed to build, e.g.
    /// CUDA missing); an unloaded pool that may load is still available.
    pub available: bool,
    /// Why it is unavailable.
    pub unavailable_reason: Option<String>,
    /// True while an operator holds the pool's workers
    /// ([`crate::ModelRepository::set_paused`]): its queue does not drain.
    pub paused: bool,
    /// Worker threads configured.
    pub workers: usize,
    /// Requests waiting.
    pub queue_depth: usize,
    /// Queue capacity.
    pub queue_capacity: usize,
    /// The lowest priority class (largest number) waiting in the queue,
    /// `None` when it is empty: a full queue takes a request of a higher
    /// class by shedding one of these (see `crate::ranked_queue`).
    pub lowest_queued_class: Option<u8>,
    /// Most rows this pool batches together (its own batching, or the
    /// model's); 1 when it does not batch.
    pub max_batch_size: usize,
    /// Requests executing now.
    pub in_flight: usize,
    /// Requests accepted since start.
    pub requests: u64,
    /// Batches executed since start.
    pub executions: u64,
    /// Rows executed since start.
    pub executed_rows: u64,
    /// Requests cancelled by their caller before execution (the caller
    /// went away, or its deadline passed while the pool was paused).
    pub cancelled: u64,
    /// Requests refused with `Overloaded`.
    pub rejected: u64,
    /// Requests that failed in execution.
    pub errors: u64,
    /// Failed batches rerun request by request to find the requests that
    /// caused the failure.
    pub isolated_batches: u64,
    /// Requests run on the caller's thread rather than a worker's.
    pub inline_runs: u64,
    /// Batches run on a caller's thread while the pool was busy.
    pub caller_batches: u64,
    /// Batches stopped for a request of a higher class, their requests
    /// put back into the queue (`batching.preempt`).
    pub preemptions: u64,
    /// Batches run on the session kept for the first class
    /// (`batching.reserve_top_class`; also in `executions`).
    pub reserved_batches: u64,
    /// Execution time by batch-size bucket.
    pub latency: Vec<LatencyBucket>,
    /// Cumulative distributions: rows per batch, batch execution time,
    /// queue wait (for metrics).
    pub histograms: PoolHistogramSnapshot,
}

impl PoolStats {
    /// Predicted execution time of a batch of `rows` rows: the lowest of
    /// the averages of the buckets that hold `rows` rows or more (a batch
    /// of fewer rows does not run slower; a smaller bucket that measured
    /// slower than a larger one was slowed by something other than its
    /// rows, such as its thread being preempted) and of the smaller
    /// sampled buckets' averages scaled linearly to `rows` (each an upper
    /// bound). `None` when no batch has run yet.
    pub fn predict_exec(&self, rows: usize) -> Option<Duration> {
        predict_from(self.latency.iter().filter(|b| b.samples > 0).map(|b| (b.max_batch, b.ewma)), rows)
    }

    /// Rough wait before a new request of `rows` rows would finish here:
    /// the queue ahead spread over the workers, times the batch estimate.
    pub fn predict_wait(&self, rows: usize) -> Duration {
        let per_batch = self.predict_exec(rows).unwrap_or(Duration::from_millis(1));
        let ahead = (self.queue_depth + self.in_flight) as f64 / self.workers.max(1) as f64;
        per_batch.mul_f64(ahead + 1.0)
    }
}

/// [`PoolStats::predict_exec`] over the sampled buckets, `(max_batch,
/// ewma)`: each bucket gives an upper bound (its own average when it holds
/// `rows` rows or more, else its average scaled up to `rows`), and the
/// prediction is the lowest of them.
///
/// Why the lowest and not the row count's own bucket: on a CPU shared by
/// the HTTP thread and a pool's worker, a batch run by the worker is
/// often preempted mid-run, and its wall time counts the other thread's
/// turn. Those inflated times land in the small buckets the worker runs;
/// if the prediction believed them, callers would stop taking batches
/// that size (`inline_max`), hand them to the worker instead, and the
/// worker's inflated times would keep it so (issue 42: a two-row batch
/// measured 51 us beside 27 us for 32 rows on a slower VM).
fn predict_from(sampled: impl Iterator<Item = (usize, Duration)>, rows: usize) -> Option<Duration> {
    let rows = rows.max(1);
    sampled
        .map(
            |(max_batch, ewma)| {
                if max_batch >= rows {
                    ewma
                } else {
                    ewma.mul_f64(rows as f64 / max_batch as f64)
                }
            },
        )
        .min()
}

/// One model's statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelStats {
    /// Model name.
    pub name: Arc<str>,
    /// Model version.
    pub version: u64,
    /// Load state.
    pub state: ModelState,
    /// Time the most recent successful load took.
    pub last_cold_start: Option<Duration>,
    /// Successful loads since registration (each reload counts).
    pub loads: u64,
    /// Unloads since registration (idle or explicit).
    pub unloads: u64,
    /// Cold-start time of every successful load, µs.
    pub cold_starts: HistogramSnapshot,
    /// Its pools, in spec order.
    pub pools: Vec<PoolStats>,
}

/// Every model's statistics, in registration order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeSnapshot {
    /// The models.
    pub models: Vec<ModelStats>,
}

impl RuntimeSnapshot {
    /// The model named `name`.
    pub fn model(&self, name: &str) -> Option<&ModelStats> {
        self.models.iter().find(|m| &*m.name == name)
    }
}

impl ModelStats {
    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&PoolStats> {
        self.pools.iter().find(|p| &*p.name == name)
    }
}

/// Loads an atomic counter (relaxed: statistics, not synchronisation).
pub(crate) fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Adds to an atomic counter.
pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket_index(1), 0);
        assert_eq!(bucket_index(2), 1);
        assert_eq!(bucket_index(3), 2);
        assert_eq!(bucket_index(8), 3);
        assert_eq!(bucket_index(9), 4);
    }

    #[test]
    fn ewma_and_prediction() {
        let table = LatencyTable::default();
        table.record(3, Duration::from_millis(10));
        table.record(4, Duration::from_millis(20));
        let buckets = table.snapshot(8);
        assert_eq!(buckets.iter().map(|b| b.max_batch).collect::<Vec<_>>(), vec![1, 2, 4, 8]);
        let b4 = buckets[2].clone();
        assert_eq!(b4.samples, 2);
        assert_eq!(b4.ewma, Duration::from_secs_f64(0.2 * 0.020 + 0.8 * 0.010));
        let stats = PoolStats {
            max_batch_size: 8,
            name: "cpu".into(),
            device: DeviceKind::Cpu,
            available: true,
            unavailable_reason: None,
            paused: false,
            workers: 1,
            queue_depth: 0,
            queue_capacity: 1,
            lowest_queued_class: None,
            in_flight: 0,
            requests: 0,
            executions: 0,
            executed_rows: 0,
            cancelled: 0,
            rejected: 0,
            errors: 0,
            isolated_batches: 0,
            inline_runs: 0,
            caller_batches: 0,
            preemptions: 0,
            reserved_batches: 0,
            latency: buckets,
            histograms: PoolHistogramSnapshot::default(),
        };
        assert_eq!(stats.predict_exec(4), Some(b4.ewma));
        assert_eq!(stats.predict_exec(1), Some(b4.ewma));
        assert_eq!(stats.predict_exec(8), Some(b4.ewma.mul_f64(2.0)));
    }

    #[test]
    fn a_small_bucket_slower_than_a_larger_one_is_predicted_at_the_larger_ones_time() {
        let table = LatencyTable::default();
        table.record(1, Duration::from_micros(10));
        table.record(2, Duration::from_micros(51)); // preempted mid-run
        table.record(32, Duration::from_micros(27));
        assert_eq!(table.predict_exec(1), Some(Duration::from_micros(10)));
        assert_eq!(table.predict_exec(2), Some(Duration::from_micros(20)), "one row's time, scaled");
        assert_eq!(table.predict_exec(3), Some(Duration::from_micros(27)), "no smaller-row bound below 32's");
        assert_eq!(table.predict_exec(32), Some(Duration::from_micros(27)));
        assert_eq!(table.predict_exec(64), Some(Duration::from_micros(54)), "32 rows' time, scaled");
    }
}
