//! Latency a config would give the recorded calls.
//!
//! - [`simulate`] (a replay as fast as possible, calls one by one): from
//!   the pools' execution tables ([`switchyard_runtime::PoolStats::predict_exec`])
//!   as the replay measured them on this machine: each call's time is the
//!   sum of its model runs' batch times for its rows (a cascade that
//!   escalated ran its cheap model first). Queueing behind other calls is
//!   not simulated; a run whose pool has no sample yet counts as zero.
//! - [`measured`] (a replay at the recorded arrival times): each call's
//!   time from its scheduled start to its answer, queueing and batching
//!   with the calls around it included.
//!
//! The recorded live latencies are reported beside, for scale.

use serde::Serialize;
use std::time::Duration;
use switchyard_runtime::RuntimeSnapshot;

/// One replayed call's runs.
#[derive(Debug, Clone)]
pub struct Run {
    /// (model, pool) per run, in order.
    pub steps: Vec<(String, String)>,
    /// Rows of the request.
    pub rows: usize,
    /// Its budget.
    pub budget_ms: u64,
    /// Its live latency, µs (0: not recorded).
    pub live_latency_us: u64,
}

/// Percentiles and budget misses.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencyReport {
    /// `simulated` or `measured` (see the module docs).
    pub basis: &'static str,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Share of calls whose latency exceeds their budget.
    pub over_budget_share: f64,
    /// Median recorded live latency, ms.
    pub live_p50_ms: f64,
    /// 99th percentile of the recorded live latency, ms.
    pub live_p99_ms: f64,
}

/// The report for `runs` under the tables in `stats`.
pub fn simulate(stats: &RuntimeSnapshot, runs: &[Run]) -> LatencyReport {
    let exec = |model: &str, pool: &str, rows: usize| -> Duration {
        stats
            .models
            .iter()
            .find(|m| &*m.name == model)
            .and_then(|m| m.pools.iter().find(|p| &*p.name == pool).or(m.pools.first()))
            .and_then(|p| p.predict_exec(rows))
            .unwrap_or_default()
    };
    let mut simulated: Vec<f64> = Vec::with_capacity(runs.len());
    let mut over = 0usize;
    for run in runs {
        let total: Duration = run.steps.iter().map(|(m, p)| exec(m, p, run.rows)).sum();
        let ms = total.as_secs_f64() * 1e3;
        over += usize::from(ms > run.budget_ms as f64);
        simulated.push(ms);
    }
    report("simulated", runs, &mut simulated, over)
}

/// The report for `runs` that took `measured_ms` (one per run, in order).
pub fn measured(runs: &[Run], measured_ms: &[f64]) -> LatencyReport {
    let over = runs.iter().zip(measured_ms).filter(|(run, &ms)| ms > run.budget_ms as f64).count();
    report("measured", runs, &mut measured_ms.to_vec(), over)
}

fn report(basis: &'static str, runs: &[Run], latencies: &mut [f64], over: usize) -> LatencyReport {
    let mut live: Vec<f64> =
        runs.iter().filter(|r| r.live_latency_us > 0).map(|r| r.live_latency_us as f64 / 1e3).collect();
    LatencyReport {
        basis,
        p50_ms: percentile(latencies, 0.50),
        p99_ms: percentile(latencies, 0.99),
        over_budget_share: if runs.is_empty() { 0.0 } else { over as f64 / runs.len() as f64 },
        live_p50_ms: percentile(&mut live, 0.50),
        live_p99_ms: percentile(&mut live, 0.99),
    }
}

/// The `q` quantile (nearest rank) of `values`; 0 when empty.
fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.5), 50.0);
        assert_eq!(percentile(&mut v, 0.99), 99.0);
        assert_eq!(percentile(&mut [], 0.5), 0.0);
        assert_eq!(percentile(&mut [7.0], 0.99), 7.0);
    }

    #[test]
    fn calls_without_tables_cost_nothing_and_miss_no_budget() {
        let runs = vec![Run {
            steps: vec![("m".into(), "cpu".into())],
            rows: 1,
            budget_ms: 1,
            live_latency_us: 2_000,
        }];
        let report = simulate(&RuntimeSnapshot::default(), &runs);
        assert_eq!((report.p50_ms, report.over_budget_share), (0.0, 0.0));
        assert_eq!(report.live_p50_ms, 2.0);
    }

    #[test]
    fn measured_latencies_count_their_budget_misses() {
        let run = |budget_ms| Run { steps: vec![], rows: 1, budget_ms, live_latency_us: 0 };
        let report = measured(&[run(10), run(10), run(1)], &[4.0, 12.0, 0.5]);
        assert_eq!(report.basis, "measured");
        assert_eq!((report.p50_ms, report.p99_ms), (4.0, 12.0));
        assert!((report.over_budget_share - 1.0 / 3.0).abs() < 1e-9);
    }
}
