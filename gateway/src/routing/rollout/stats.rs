//! What one candidate's comparison rests on ([`Comparison`]): compared
//! rows and how many agreed, with a Wilson score interval on the
//! agreement ([`wilson`]); the latency of both sides over the same
//! mirrored calls, or (a canary) over the calls each side answered
//! (log-spaced histograms: p50, p99); errors of both sides; draws skipped
//! because there was no idle capacity or no spare CPU.

use serde::Serialize;

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval of `agreeing` successes in `rows` trials at
/// `z` (`(0, 1)` when there are no rows).
///
/// Why Wilson: agreement sits near 1, where the normal (Wald) interval
/// `p ± z·sqrt(p(1-p)/n)` collapses to zero width at `p = 1` (a perfect
/// score on 20 rows would look certain) and can pass 1; Wilson's stays
/// inside `[0, 1]`, keeps close to its nominal coverage near the edges,
/// and is closed-form (Clopper-Pearson needs beta quantiles and is
/// conservative).
pub fn wilson(agreeing: u64, rows: u64, z: f64) -> (f64, f64) {
    if rows == 0 {
        return (0.0, 1.0);
    }
    let n = rows as f64;
    let p = agreeing.min(rows) as f64 / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Buckets of [`Latency`]: bucket `k` holds durations up to
/// `FIRST_US * GROWTH^k` µs (10 µs to about 7 minutes).
const BUCKETS: usize = 80;
const FIRST_US: f64 = 10.0;
const GROWTH: f64 = 1.25;

/// A latency histogram with log-spaced buckets (25% wide: a quantile is
/// read as its bucket's upper edge, at most 25% above the true value).
#[derive(Debug, Clone)]
pub struct Latency {
    counts: [u64; BUCKETS],
    total: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency { counts: [0; BUCKETS], total: 0 }
    }
}

impl Latency {
    /// Counts one duration in microseconds.
    pub fn add(&mut self, micros: f64) {
        let k = if micros <= FIRST_US { 0 } else { ((micros / FIRST_US).ln() / GROWTH.ln()).ceil() as usize };
        self.counts[k.min(BUCKETS - 1)] += 1;
        self.total += 1;
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `q` quantile in microseconds (`None` without samples).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (k, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(FIRST_US * GROWTH.powi(k as i32));
            }
        }
        None
    }
}

/// One side's (live or candidate) calls on the compared pairs.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Calls.
    pub calls: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Latency of the calls that answered.
    pub latency: Latency,
    /// Compute cost of the calls that answered (live: of the mirrored
    /// calls only, as its latency).
    pub cost: f64,
}

impl Side {
    /// Compute cost per answered call (`None` without one).
    pub fn cost_per_call(&self) -> Option<f64> {
        let answered = self.latency.count();
        (answered > 0).then(|| self.cost / answered as f64)
    }

    /// Errors per call (0 without calls).
    pub fn error_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.errors as f64 / self.calls as f64
        }
    }
}

/// The comparison of a candidate with the live answers over some window
/// (a whole rollout, or one step of it).
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    /// Rows both sides answered and that were compared.
    pub rows: u64,
    /// Of them, rows whose answers agree.
    pub agreeing: u64,
    /// The route's live calls (every call the live models answered, so its
    /// error rate is the route's) and latency (mirrored: the mirrored calls
    /// only, paired with the candidate's; a canary: every live-answered
    /// call, as the candidate's are its served calls).
    pub live: Side,
    /// The candidate's mirrored calls (a canary: the calls it answered).
    pub candidate: Side,
    /// Drawn calls not mirrored: the candidate or the live models had no
    /// idle capacity.
    pub skipped_busy: u64,
    /// Drawn calls not mirrored because the gateway's CPU use was at the
    /// candidate's `cpu_ceiling` ([`super::cpu`]).
    pub skipped_cpu: u64,
}

/// A comparison as `/admin/stats` shows it (latencies in ms).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonView {
    /// Rows compared.
    pub rows: u64,
    /// Rows that agreed.
    pub agreeing: u64,
    /// `agreeing / rows` (`None` without rows).
    pub agreement: Option<f64>,
    /// 95% Wilson score interval on the agreement, `[low, high]`.
    pub agreement_interval: [f64; 2],
    /// Mirrored calls run on the candidate (a canary: calls it answered).
    pub candidate_calls: u64,
    /// Of them, calls that failed.
    pub candidate_errors: u64,
    /// Live calls of the route.
    pub live_calls: u64,
    /// Of them, calls that failed.
    pub live_errors: u64,
    /// Live latency p50 / p99 over the mirrored calls (a canary: over
    /// the calls the live models answered), ms.
    pub live_p50_ms: Option<f64>,
    /// See `live_p50_ms`.
    pub live_p99_ms: Option<f64>,
    /// Candidate latency p50 / p99, ms.
    pub candidate_p50_ms: Option<f64>,
    /// See `candidate_p50_ms`.
    pub candidate_p99_ms: Option<f64>,
    /// Compute cost per call of the live answers (mirrored calls) and of
    /// the candidate's runs (`models[].cost`, default 1 + position).
    pub live_cost_per_call: Option<f64>,
    /// See `live_cost_per_call`.
    pub candidate_cost_per_call: Option<f64>,
    /// Drawn calls skipped for want of idle capacity.
    pub skipped_busy: u64,
    /// Drawn calls skipped because the gateway's CPU was at the ceiling.
    pub skipped_cpu: u64,
}

impl Comparison {
    /// Agreement over the rows (`None` without rows).
    pub fn agreement(&self) -> Option<f64> {
        (self.rows > 0).then(|| self.agreeing as f64 / self.rows as f64)
    }

    /// The 95% Wilson interval on the agreement.
    pub fn interval(&self) -> (f64, f64) {
        wilson(self.agreeing, self.rows, Z95)
    }

    /// The view `/admin/stats` and `/metrics` read.
    pub fn view(&self) -> ComparisonView {
        let ms = |l: &Latency, q| l.quantile(q).map(|us| us / 1000.0);
        let (low, high) = self.interval();
        ComparisonView {
            rows: self.rows,
            agreeing: self.agreeing,
            agreement: self.agreement(),
            agreement_interval: [low, high],
            candidate_calls: self.candidate.calls,
            candidate_errors: self.candidate.errors,
            live_calls: self.live.calls,
            live_errors: self.live.errors,
            live_p50_ms: ms(&self.live.latency, 0.5),
            live_p99_ms: ms(&self.live.latency, 0.99),
            candidate_p50_ms: ms(&self.candidate.latency, 0.5),
            candidate_p99_ms: ms(&self.candidate.latency, 0.99),
            live_cost_per_call: self.live.cost_per_call(),
            candidate_cost_per_call: self.candidate.cost_per_call(),
            skipped_busy: self.skipped_busy,
            skipped_cpu: self.skipped_cpu,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_known_values_and_stays_inside_0_1() {
        // 95 of 100: the textbook interval is about [0.888, 0.978].
        let (lo, hi) = wilson(95, 100, Z95);
        assert!((lo - 0.8883).abs() < 1e-3 && (hi - 0.9785).abs() < 1e-3, "{lo} {hi}");
        // A perfect score is not certainty: n / (n + z^2) below, 1 above.
        let (lo, hi) = wilson(200, 200, Z95);
        assert!((lo - 200.0 / (200.0 + Z95 * Z95)).abs() < 1e-9, "{lo}");
        assert_eq!(hi, 1.0);
        let (lo, _) = wilson(0, 50, Z95);
        assert_eq!(lo, 0.0);
        assert_eq!(wilson(0, 0, Z95), (0.0, 1.0));
        // More rows, narrower.
        let narrow = wilson(990, 1000, Z95);
        let wide = wilson(99, 100, Z95);
        assert!(narrow.1 - narrow.0 < wide.1 - wide.0);
    }

    #[test]
    fn latency_quantiles_read_bucket_edges() {
        let mut l = Latency::default();
        assert_eq!(l.quantile(0.5), None);
        for _ in 0..98 {
            l.add(1000.0);
        }
        l.add(50_000.0);
        l.add(50_000.0);
        let p50 = l.quantile(0.5).unwrap();
        assert!((1000.0..=1250.0).contains(&p50), "{p50}");
        let p99 = l.quantile(0.99).unwrap();
        assert!((50_000.0..=62_500.0).contains(&p99), "{p99}");
        l.add(1e12);
        assert!(l.quantile(1.0).unwrap() > 1e8, "the last bucket takes everything beyond");
    }
}
