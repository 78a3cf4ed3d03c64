//! Predicting when a request would complete on a pool.
//!
//! [`Estimator::predict`] is the single place where queue depth and latency
//! statistics become a time. It is deliberately conservative: a pessimistic
//! prediction costs a little money (a costlier pool, an early shed), an
//! optimistic one costs a missed budget.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::fleet::{LatencyModel, PoolView};
use crate::policy_issue::PolicyIssue;

/// What a prediction is based on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EstimateBasis {
    /// Fresh measured statistics.
    Measured,
    /// No statistics yet: the estimator's prior.
    Prior,
    /// Statistics older than `stale_after_ms`, inflated by `stale_penalty`.
    Stale,
}

impl EstimateBasis {
    /// Stable label for traces and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            EstimateBasis::Measured => "measured",
            EstimateBasis::Prior => "prior",
            EstimateBasis::Stale => "stale",
        }
    }
}

/// Predicted time to completion of one new request on one pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prediction {
    /// Time until the work ahead of the request has drained.
    pub queue_wait: Duration,
    /// Time to execute the request's own batch.
    pub execution: Duration,
    /// What the numbers are based on.
    pub basis: EstimateBasis,
}

impl Prediction {
    /// Predicted completion: queue wait plus execution (saturating).
    pub fn completion(&self) -> Duration {
        self.queue_wait.saturating_add(self.execution)
    }
}

/// Settings of the completion-time estimator, shared by all routes (config
/// table `[policy_estimator]` or similar; every field has a default).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Estimator {
    /// Prior execution time of one batch, of any size, on a pool without
    /// statistics, in µs. Default 2000 (2 ms). Deliberately optimistic so
    /// that a fresh pool is tried (and measured) rather than starved; the
    /// queue term still applies, so a fresh pool is not flooded.
    pub prior_batch_us: u64,
    /// Buckets with fewer samples are ignored. Default 1.
    pub min_samples: u64,
    /// Statistics older than this are stale, in ms. Default 30000.
    pub stale_after_ms: u64,
    /// Factor (>= 1) applied to stale execution estimates. Default 2.0.
    pub stale_penalty: f64,
    /// Share of the remaining budget held in reserve when deciding whether
    /// a pool *fits* (in [0, 1)): a pool fits when its predicted completion
    /// is at most `remaining x (1 - safety_margin)`. A margin absorbs
    /// prediction error, at the price of spilling over a little earlier.
    /// Default 0 (exact).
    pub safety_margin: f64,
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator {
            prior_batch_us: 2_000,
            min_samples: 1,
            stale_after_ms: 30_000,
            stale_penalty: 2.0,
            safety_margin: 0.0,
        }
    }
}

impl Estimator {
    /// The part of `remaining` a prediction may use and still fit (see
    /// [`Estimator::safety_margin`]).
    pub fn usable(&self, remaining: Duration) -> Duration {
        remaining.mul_f64((1.0 - self.safety_margin).clamp(0.0, 1.0))
    }

    /// Checks the settings; paths are relative to the estimator table.
    pub fn validate(&self) -> Result<(), Vec<PolicyIssue>> {
        let mut issues = Vec::new();
        if self.prior_batch_us == 0 {
            issues.push(PolicyIssue::new("prior_batch_us", "must be at least 1 µs"));
        }
        if !(0.0..1.0).contains(&self.safety_margin) {
            issues.push(PolicyIssue::new(
                "safety_margin",
                format!("must be in [0, 1), got {}", self.safety_margin),
            ));
        }
        if !(self.stale_penalty.is_finite() && self.stale_penalty >= 1.0) {
            issues.push(PolicyIssue::new(
                "stale_penalty",
                format!("must be a finite number >= 1, got {}", self.stale_penalty),
            ));
        }
        crate::policy_issue::into_result(issues)
    }

    /// Predicts completion of one new request queued on `pool` now.
    ///
    /// 1. `workers` and `max_batch` are read as at least 1; `ahead` =
    ///    `queue_depth + in_flight` requests are served before ours (FIFO).
    /// 2. Effective batch `b` = `ceil(ahead / workers)` clamped to
    ///    `[1, max_batch]`: a short queue is served in one round of small
    ///    batches, a long one in full batches.
    /// 3. Rounds ahead = `ceil(ahead / (workers * b))`; in-flight batches
    ///    count as whole rounds, as if they had just started (conservative).
    /// 4. Batch time `t(b)`: the smallest bucket with `max_batch >= b` and
    ///    enough samples; past the largest bucket, that bucket scaled
    ///    linearly (`t * b / max_batch`, pessimistic for GPUs). No usable
    ///    bucket: the prior, basis [`EstimateBasis::Prior`].
    /// 5. Stale statistics (`stats_age > stale_after_ms`): `t(b)` times
    ///    `stale_penalty`, basis [`EstimateBasis::Stale`]. An idle pool's
    ///    session may have gone cold; inflating keeps the prediction
    ///    conservative while the pool still ranks by its old speed.
    /// 6. `queue_wait = rounds * t(b)`; `execution = t(b)`: our request is
    ///    assumed to ride in a batch as large as those ahead of it and is not
    ///    assumed to join one of them. The batcher's queue delay is not
    ///    modelled (sub-millisecond by configuration).
    /// 7. A paused pool ([`PoolView::paused`]) runs nothing until it is
    ///    resumed: `queue_wait` is unbounded (`Duration::MAX`), so it never
    ///    fits a budget.
    pub fn predict(&self, pool: &PoolView) -> Prediction {
        let workers = pool.workers.max(1);
        let max_batch = pool.max_batch_size.max(1);
        let ahead = pool.queue_depth.saturating_add(pool.in_flight);
        let batch = ahead.div_ceil(workers).clamp(1, max_batch);
        let rounds = ahead.div_ceil(workers.saturating_mul(batch));
        let (batch_time, basis) = self.batch_time(&pool.latency, batch);
        let queue_wait = if pool.paused { Duration::MAX } else { mul_count(batch_time, rounds) };
        Prediction { queue_wait, execution: batch_time, basis }
    }

    /// Steps 4 and 5 of [`Estimator::predict`].
    fn batch_time(&self, latency: &LatencyModel, batch: usize) -> (Duration, EstimateBasis) {
        let min_samples = self.min_samples.max(1);
        let usable = || latency.buckets.iter().filter(|b| b.samples >= min_samples && b.max_batch > 0);
        let covering = usable().filter(|b| b.max_batch >= batch).min_by_key(|b| b.max_batch);
        let measured = match covering {
            Some(bucket) => Some(bucket.latency),
            None => usable()
                .max_by_key(|b| b.max_batch)
                .map(|largest| scale(largest.latency, batch as f64 / largest.max_batch as f64)),
        };
        match measured {
            None => (Duration::from_micros(self.prior_batch_us.max(1)), EstimateBasis::Prior),
            Some(time) if latency.stats_age > Duration::from_millis(self.stale_after_ms) => {
                let penalty = if self.stale_penalty.is_nan() || self.stale_penalty < 1.0 {
                    1.0
                } else {
                    self.stale_penalty
                };
                (scale(time, penalty), EstimateBasis::Stale)
            }
            Some(time) => (time, EstimateBasis::Measured),
        }
    }
}

/// `duration * factor`, saturating at `Duration::MAX`; `factor` >= 0.
pub(crate) fn scale(duration: Duration, factor: f64) -> Duration {
    if duration.is_zero() || factor <= 0.0 || factor.is_nan() {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(duration.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// `duration * count`, saturating at `Duration::MAX`.
fn mul_count(duration: Duration, count: usize) -> Duration {
    match u32::try_from(count) {
        Ok(count) => duration.saturating_mul(count),
        Err(_) if duration.is_zero() => Duration::ZERO,
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests;
