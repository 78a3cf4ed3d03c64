//! The `/metrics` families of routes' candidates
//! ([`crate::routing::rollout`]), read at scrape time from the rollout
//! registry: the whole rollout's comparison (rows, agreement and its 95%
//! Wilson interval, calls, errors, latency quantiles and cost per call of
//! both sides,
//! skipped draws), the share wanted and the state.

use crate::metrics::family::Family;
use crate::routing::rollout::RolloutView;
use prometheus::proto::MetricFamily;

const RC: &[&str] = &["route", "candidate"];
const SIDE: &[&str] = &["route", "candidate", "side"];

/// Every rollout family (none while no route has a candidate).
pub fn rollout_families(views: &[RolloutView]) -> Vec<MetricFamily> {
    let mut rows = Family::counter(
        "switchyard_rollout_rows_total",
        "Rows compared between a candidate and the live answers.",
        RC,
    );
    let mut agreeing = Family::counter(
        "switchyard_rollout_agreeing_rows_total",
        "Compared rows on which the candidate agreed with the live answer.",
        RC,
    );
    let mut agreement = Family::gauge(
        "switchyard_rollout_agreement",
        "Share of compared rows that agreed (absent before the first row).",
        RC,
    );
    let mut interval = Family::gauge(
        "switchyard_rollout_agreement_bound",
        "Ends of the 95% Wilson score interval on the agreement (bound=low|high).",
        &["route", "candidate", "bound"],
    );
    let mut calls = Family::counter(
        "switchyard_rollout_calls_total",
        "Calls of a route with a candidate (side=live: every call; side=candidate: mirrored calls).",
        SIDE,
    );
    let mut errors = Family::counter(
        "switchyard_rollout_errors_total",
        "Failed calls per side, as in switchyard_rollout_calls_total.",
        SIDE,
    );
    let mut latency = Family::gauge(
        "switchyard_rollout_latency_seconds",
        "Latency quantiles (quantile=0.5|0.99) of both sides over the mirrored calls.",
        &["route", "candidate", "side", "quantile"],
    );
    let mut cost = Family::gauge(
        "switchyard_rollout_cost_per_call",
        "Compute cost per call of both sides over the mirrored calls (models[].cost, default 1 + position in the route).",
        SIDE,
    );
    let mut skipped = Family::counter(
        "switchyard_rollout_skipped_busy_total",
        "Drawn calls not mirrored because the candidate or the live model had no idle capacity.",
        RC,
    );
    let mut skipped_cpu = Family::counter(
        "switchyard_rollout_skipped_cpu_total",
        "Drawn calls not run in the background because the gateway's CPU use was at the candidate's cpu_ceiling.",
        RC,
    );
    let mut share = Family::gauge(
        "switchyard_rollout_share",
        "Share of calls mirrored (a canary: answered by the candidate) at the step the rollout wants in force.",
        RC,
    );
    let mut state = Family::gauge(
        "switchyard_rollout_state",
        "1 for the rollout's state (state=mirroring|promoted|rolled_back).",
        &["route", "candidate", "state"],
    );
    for v in views {
        let rc = [v.route.as_str(), v.candidate.as_str()];
        let c = &v.comparison;
        rows.sample(&rc, c.rows as f64);
        agreeing.sample(&rc, c.agreeing as f64);
        if let Some(a) = c.agreement {
            agreement.sample(&rc, a);
        }
        interval.sample(&[rc[0], rc[1], "low"], c.agreement_interval[0]);
        interval.sample(&[rc[0], rc[1], "high"], c.agreement_interval[1]);
        for (side, n, e) in
            [("live", c.live_calls, c.live_errors), ("candidate", c.candidate_calls, c.candidate_errors)]
        {
            calls.sample(&[rc[0], rc[1], side], n as f64);
            errors.sample(&[rc[0], rc[1], side], e as f64);
        }
        let quantiles = [
            ("live", "0.5", c.live_p50_ms),
            ("live", "0.99", c.live_p99_ms),
            ("candidate", "0.5", c.candidate_p50_ms),
            ("candidate", "0.99", c.candidate_p99_ms),
        ];
        for (side, q, ms) in quantiles {
            if let Some(ms) = ms {
                latency.sample(&[rc[0], rc[1], side, q], ms / 1000.0);
            }
        }
        for (side, per_call) in [("live", c.live_cost_per_call), ("candidate", c.candidate_cost_per_call)] {
            if let Some(v) = per_call {
                cost.sample(&[rc[0], rc[1], side], v);
            }
        }
        skipped.sample(&rc, c.skipped_busy as f64);
        skipped_cpu.sample(&rc, c.skipped_cpu as f64);
        share.sample(&rc, v.share);
        state.sample(&[rc[0], rc[1], v.status.as_str()], 1.0);
    }
    [rows, agreeing, agreement, interval, calls, errors, latency, cost, skipped, skipped_cpu, share, state]
        .into_iter()
        .filter_map(Family::finish)
        .collect()
}
