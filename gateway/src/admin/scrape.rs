//! Families read at scrape time from the counters other modules own: the
//! runtime's pools and models ([`switchyard_runtime::RuntimeSnapshot`]),
//! the response cache ([`crate::cache::stats::CacheSnapshot`]) and the
//! routing decisions ([`crate::routing::decisions::DecisionCounters`]).

use crate::cache::stats::CacheSnapshot;
use crate::metrics::family::Family;
use crate::record::RecordStats;
use crate::routing::budget_misses::BudgetCounts;
use crate::routing::calibration::CalibrationView;
use crate::routing::decisions::DecisionKey;
use prometheus::proto::MetricFamily;
use std::collections::BTreeMap;
use switchyard_runtime::{ModelState, ModelStats, PoolStats, RuntimeSnapshot};

/// Microseconds per second: runtime durations are kept in µs.
const MICROS: f64 = 1e6;

const POOL: &[&str] = &["model", "pool", "device"];
const MODEL: &[&str] = &["model"];

/// A per-pool family and how to read its value from the pool's stats.
type PoolScalar = (Family, fn(&PoolStats) -> f64);

/// Per-pool gauges and counters.
fn pool_scalars() -> Vec<PoolScalar> {
    vec![
        (Family::gauge("switchyard_pool_queue_depth", "Requests waiting in the pool's queue.", POOL), |p| {
            p.queue_depth as f64
        }),
        (
            Family::gauge(
                "switchyard_pool_queue_capacity",
                "Queue capacity; beyond it requests get 429.",
                POOL,
            ),
            |p| p.queue_capacity as f64,
        ),
        (Family::gauge("switchyard_pool_in_flight", "Requests in batches executing now.", POOL), |p| {
            p.in_flight as f64
        }),
        (Family::gauge("switchyard_pool_workers", "Worker threads (one session each).", POOL), |p| {
            p.workers as f64
        }),
        (
            Family::gauge(
                "switchyard_pool_available",
                "1 when the pool can serve, 0 when its device failed.",
                POOL,
            ),
            |p| f64::from(u8::from(p.available)),
        ),
        (
            Family::gauge(
                "switchyard_pool_paused",
                "1 while an operator has paused the pool (admin API), else 0.",
                POOL,
            ),
            |p| f64::from(u8::from(p.paused)),
        ),
        (Family::counter("switchyard_pool_requests_total", "Requests accepted into the queue.", POOL), |p| {
            p.requests as f64
        }),
        (Family::counter("switchyard_pool_executions_total", "Batches executed.", POOL), |p| {
            p.executions as f64
        }),
        (Family::counter("switchyard_pool_executed_rows_total", "Rows in executed batches.", POOL), |p| {
            p.executed_rows as f64
        }),
        (
            Family::counter(
                "switchyard_pool_inline_runs_total",
                "Requests run on the caller's thread because the pool was idle (also in requests and executions).",
                POOL,
            ),
            |p| p.inline_runs as f64,
        ),
        (
            Family::counter(
                "switchyard_pool_caller_batches_total",
                "Batches run on a caller's thread while the pool was busy, taken from the queue as a worker would (also in executions).",
                POOL,
            ),
            |p| p.caller_batches as f64,
        ),
        (
            Family::counter(
                "switchyard_pool_preemptions_total",
                "Batches stopped while running for a request of a higher class, their requests put back into the queue (batching.preempt; not in executions).",
                POOL,
            ),
            |p| p.preemptions as f64,
        ),
        (
            Family::counter(
                "switchyard_pool_reserved_batches_total",
                "Batches run on the session a pool keeps for the first class (batching.reserve_top_class; also in executions).",
                POOL,
            ),
            |p| p.reserved_batches as f64,
        ),
        (
            Family::counter(
                "switchyard_pool_cancelled_total",
                "Requests dropped before execution: the client went away, or its deadline passed on a paused pool.",
                POOL,
            ),
            |p| p.cancelled as f64,
        ),
        (
            Family::counter(
                "switchyard_pool_rejected_total",
                "Requests refused because the queue was full.",
                POOL,
            ),
            |p| p.rejected as f64,
        ),
        (Family::counter("switchyard_pool_errors_total", "Requests that failed in execution.", POOL), |p| {
            p.errors as f64
        }),
        (
            Family::counter(
                "switchyard_pool_isolated_batches_total",
                "Failed batches rerun request by request, so that only the requests that fail alone get the error.",
                POOL,
            ),
            |p| p.isolated_batches as f64,
        ),
    ]
}

/// Every pool and model family of `snapshot`.
pub fn runtime_families(snapshot: &RuntimeSnapshot) -> Vec<MetricFamily> {
    let mut scalars = pool_scalars();
    let mut estimate = Family::gauge(
        "switchyard_pool_latency_estimate_seconds",
        "Moving average of batch execution time, by batch-size bucket (max_batch rows), as routing uses it.",
        &["model", "pool", "device", "max_batch"],
    );
    let mut batch_rows =
        Family::histogram("switchyard_pool_batch_size_rows", "Rows per executed batch.", POOL);
    let mut execution = Family::histogram(
        "switchyard_pool_batch_execution_seconds",
        "Execution time per batch (inputs joined, run, outputs split).",
        POOL,
    );
    let mut queue_wait = Family::histogram(
        "switchyard_pool_queue_wait_seconds",
        "Time each executed request waited in the pool's queue.",
        POOL,
    );
    for model in &snapshot.models {
        for pool in &model.pools {
            let device = pool.device.to_string();
            let labels = [model.name.as_ref(), pool.name.as_ref(), device.as_str()];
            for (family, read) in &mut scalars {
                family.sample(&labels, read(pool));
            }
            for bucket in pool.latency.iter().filter(|b| b.samples > 0) {
                let max_batch = bucket.max_batch.to_string();
                let [m, p, d] = labels;
                estimate.sample(&[m, p, d, max_batch.as_str()], bucket.ewma.as_secs_f64());
            }
            batch_rows.histogram_sample(&labels, &pool.histograms.batch_rows, 1.0);
            execution.histogram_sample(&labels, &pool.histograms.execution_us, MICROS);
            queue_wait.histogram_sample(&labels, &pool.histograms.queue_wait_us, MICROS);
        }
    }
    let mut out: Vec<Family> = scalars.into_iter().map(|(f, _)| f).collect();
    out.extend([estimate, batch_rows, execution, queue_wait]);
    out.extend(model_families(&snapshot.models));
    out.into_iter().filter_map(Family::finish).collect()
}

fn model_families(models: &[ModelStats]) -> Vec<Family> {
    let mut state = Family::gauge(
        "switchyard_model_state",
        "1 for the model's current load state (unloaded, loading, ready, failed), else 0.",
        &["model", "state"],
    );
    let mut loads = Family::counter("switchyard_model_loads_total", "Successful model loads.", MODEL);
    let mut unloads =
        Family::counter("switchyard_model_unloads_total", "Model unloads (idle or explicit).", MODEL);
    let mut cold = Family::histogram(
        "switchyard_model_cold_start_seconds",
        "Time each successful load took to build the model's sessions.",
        MODEL,
    );
    let mut last_cold = Family::gauge(
        "switchyard_model_last_cold_start_seconds",
        "Time the most recent successful load took.",
        MODEL,
    );
    for m in models {
        let current = state_label(&m.state);
        for s in ["unloaded", "loading", "ready", "failed"] {
            state.sample(&[&*m.name, s], f64::from(u8::from(s == current)));
        }
        loads.sample(&[&*m.name], m.loads as f64);
        unloads.sample(&[&*m.name], m.unloads as f64);
        cold.histogram_sample(&[&*m.name], &m.cold_starts, MICROS);
        if let Some(d) = m.last_cold_start {
            last_cold.sample(&[&*m.name], d.as_secs_f64());
        }
    }
    vec![state, loads, unloads, cold, last_cold]
}

fn state_label(state: &ModelState) -> &'static str {
    match state {
        ModelState::Unloaded => "unloaded",
        ModelState::Loading => "loading",
        ModelState::Ready => "ready",
        ModelState::Failed(_) => "failed",
    }
}

/// The cache's counters and gauges; nothing without a `[cache]` section.
pub fn cache_families(c: &CacheSnapshot) -> Vec<MetricFamily> {
    if !c.enabled {
        return Vec::new();
    }
    let mut hits =
        Family::counter("switchyard_cache_hits_total", "Lookups answered from a cache tier.", &["tier"]);
    hits.sample(&["l1"], c.l1_hits as f64);
    let mut misses =
        Family::counter("switchyard_cache_misses_total", "Lookups a cache tier could not answer.", &["tier"]);
    misses.sample(&["l1"], c.l1_misses as f64);
    if c.l2_configured {
        hits.sample(&["l2"], c.l2_hits as f64);
        misses.sample(&["l2"], c.l2_misses as f64);
    }
    let counters: &[(&'static str, &'static str, u64)] = &[
        (
            "switchyard_cache_bypass_total",
            "Requests that did not read the cache (no-store, no-cache, uncached route).",
            c.bypass,
        ),
        (
            "switchyard_cache_coalesced_total",
            "Requests that waited for an identical in-flight computation.",
            c.coalesced,
        ),
        (
            "switchyard_cache_replay_hits_total",
            "L1 hits answered by exact-repeat replay (the request's bytes seen before).",
            c.repeat_hits,
        ),
        ("switchyard_cache_stores_total", "Answers stored in L1.", c.stores),
        ("switchyard_cache_evictions_total", "L1 entries evicted to respect l1_max_bytes.", c.evictions),
        ("switchyard_cache_expirations_total", "L1 entries removed when their TTL passed.", c.expirations),
    ];
    let l2_counters: &[(&'static str, &'static str, u64)] = &[
        ("switchyard_cache_l2_errors_total", "Redis commands that failed or timed out.", c.l2_errors),
        ("switchyard_cache_l2_skipped_total", "L2 lookups skipped while the breaker was open.", c.l2_skipped),
        ("switchyard_cache_l2_writes_total", "Background L2 writes completed.", c.l2_writes),
        (
            "switchyard_cache_l2_writes_dropped_total",
            "L2 writes dropped (queue full or breaker open).",
            c.l2_writes_dropped,
        ),
        (
            "switchyard_cache_l2_decode_errors_total",
            "L2 values that could not be decoded.",
            c.l2_decode_errors,
        ),
        (
            "switchyard_cache_fleet_waits_total",
            "Misses that waited for another replica computing the same request (fleet_coalesce).",
            c.fleet_waits,
        ),
        (
            "switchyard_cache_fleet_served_total",
            "Fleet waits answered by the other replica (the rest computed their own).",
            c.fleet_served,
        ),
    ];
    let mut out = vec![hits, misses];
    let l2 = if c.l2_configured { l2_counters } else { &[] };
    for &(name, help, value) in counters.iter().chain(l2) {
        let mut f = Family::counter(name, help, &[]);
        f.sample(&[], value as f64);
        out.push(f);
    }
    let gauges: [(&'static str, &'static str, u64); 3] = [
        ("switchyard_cache_l1_entries", "Entries held in L1.", c.l1_entries),
        ("switchyard_cache_l1_bytes", "Bytes held in L1 (encoded answer sizes).", c.l1_bytes),
        ("switchyard_cache_l1_max_bytes", "The L1 bound in bytes.", c.l1_max_bytes),
    ];
    for (name, help, value) in gauges {
        let mut f = Family::gauge(name, help, &[]);
        f.sample(&[], value as f64);
        out.push(f);
    }
    if c.l2_configured {
        let mut breaker = Family::gauge(
            "switchyard_cache_l2_breaker_state",
            "1 for the Redis breaker's current state (closed, open, half_open), else 0.",
            &["state"],
        );
        for s in ["closed", "open", "half_open"] {
            breaker.sample(&[s], f64::from(u8::from(s == c.l2_breaker)));
        }
        out.push(breaker);
    }
    out.into_iter().filter_map(Family::finish).collect()
}

/// Routing decisions by route, model, device and reason.
pub fn decision_families(decisions: &[(DecisionKey, u64)]) -> Vec<MetricFamily> {
    let mut f = Family::counter(
        "switchyard_routing_decisions_total",
        "Requests each route answered with a model on a device, by the policy's reason (model/device none: shed).",
        &["route", "model", "device", "reason"],
    );
    for (k, count) in decisions {
        f.sample(&k.labels(), *count as f64);
    }
    f.finish().into_iter().collect()
}

/// Answers and budget misses per route
/// ([`crate::routing::budget_misses`]).
pub fn budget_families(routes: &BTreeMap<String, BudgetCounts>) -> Vec<MetricFamily> {
    let mut answered = Family::counter(
        "switchyard_route_answers_total",
        "Inference answers each route gave (not streamed; cache hits included).",
        &["route"],
    );
    let mut missed = Family::counter(
        "switchyard_route_budget_misses_total",
        "Answers that were ready only after the request's latency budget had run out.",
        &["route"],
    );
    for (route, counts) in routes {
        answered.sample(&[route.as_str()], counts.answered as f64);
        missed.sample(&[route.as_str()], counts.missed as f64);
    }
    [answered, missed].into_iter().filter_map(Family::finish).collect()
}

/// Calibrated cascade routes ([`crate::routing::calibration`]): the
/// suggested threshold (absent until one reaches the target), rows
/// observed, shadow runs, draws skipped while the heavy model was busy.
pub fn calibration_families(views: &[(String, CalibrationView)]) -> Vec<MetricFamily> {
    let route = &["route"];
    let mut suggested = Family::gauge(
        "switchyard_calibration_suggested_threshold",
        "Lowest cascade threshold whose shadow-measured agreement with the heavy model reaches the route's target.",
        route,
    );
    let mut rows = Family::counter(
        "switchyard_calibration_rows_total",
        "Rows observed by calibration shadow runs.",
        route,
    );
    let mut runs =
        Family::counter("switchyard_calibration_shadow_runs_total", "Calibration shadow runs done.", route);
    let mut skipped = Family::counter(
        "switchyard_calibration_skipped_busy_total",
        "Calibration draws skipped because the heavy model had no idle pool.",
        route,
    );
    for (name, view) in views {
        if let Some(t) = view.suggested_threshold {
            suggested.sample(&[name.as_str()], t);
        }
        rows.sample(&[name.as_str()], view.rows as f64);
        runs.sample(&[name.as_str()], view.shadow_runs as f64);
        skipped.sample(&[name.as_str()], view.skipped_busy as f64);
    }
    [suggested, rows, runs, skipped].into_iter().filter_map(Family::finish).collect()
}

/// A traffic-sample family: name, help, and the counter it reads.
type RecordFamily = (&'static str, &'static str, fn(&RecordStats) -> u64);

/// The routes' traffic samples ([`crate::record`]): lines written, records
/// dropped because the writer was behind, not written because their line
/// passed `max_line_bytes`, lost to write errors, rotations; and the bytes
/// the queued records hold now (`queued_bytes`, once a route records).
pub fn record_families(stats: &[(String, RecordStats)], queued_bytes: usize) -> Vec<MetricFamily> {
    let families: [RecordFamily; 5] = [
        ("switchyard_record_lines_total", "Traffic-sample lines written, by route.", |s| s.written),
        (
            "switchyard_record_dropped_total",
            "Traffic-sample records dropped because the writer was behind, by route.",
            |s| s.dropped,
        ),
        (
            "switchyard_record_oversized_total",
            "Traffic-sample records not written because their line passed record.max_line_bytes, by route.",
            |s| s.oversized,
        ),
        ("switchyard_record_failed_total", "Traffic-sample records lost to write errors, by route.", |s| {
            s.failed
        }),
        ("switchyard_record_rotations_total", "Traffic-sample file rotations, by route.", |s| s.rotations),
    ];
    let mut families: Vec<MetricFamily> = families
        .into_iter()
        .filter_map(|(name, help, read)| {
            let mut f = Family::counter(name, help, &["route"]);
            for (route, s) in stats {
                f.sample(&[route.as_str()], read(s) as f64);
            }
            f.finish()
        })
        .collect();
    if !stats.is_empty() {
        let mut queued = Family::gauge(
            "switchyard_record_queued_bytes",
            "Bytes the traffic-sample records waiting for their writer hold, all routes.",
            &[],
        );
        queued.sample(&[], queued_bytes as f64);
        families.extend(queued.finish());
    }
    families
}

/// Requests holding an admission permit now, and the limit.
pub fn admission_families(in_flight: usize, limit: usize) -> Vec<MetricFamily> {
    let mut now =
        Family::gauge("switchyard_requests_in_flight", "Requests being served on the API listener now.", &[]);
    now.sample(&[], in_flight as f64);
    let mut max = Family::gauge(
        "switchyard_requests_in_flight_limit",
        "server.max_concurrent_requests: beyond it requests get 429.",
        &[],
    );
    max.sample(&[], limit as f64);
    let mut info = Family::gauge("switchyard_build_info", "Always 1; the version is a label.", &["version"]);
    info.sample(&[env!("CARGO_PKG_VERSION")], 1.0);
    [now, max, info].into_iter().filter_map(Family::finish).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, TextEncoder};

    fn text(families: Vec<MetricFamily>) -> String {
        let mut out = Vec::new();
        TextEncoder::new().encode(&families, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn no_cache_section_exports_no_cache_metrics() {
        assert!(cache_families(&CacheSnapshot::default()).is_empty());
    }

    #[test]
    fn l2_metrics_only_with_redis() {
        let mut snap = CacheSnapshot { enabled: true, l1_hits: 3, l2_breaker: "none", ..Default::default() };
        let out = text(cache_families(&snap));
        assert!(out.contains("switchyard_cache_hits_total{tier=\"l1\"} 3\n"), "{out}");
        assert!(!out.contains("l2"), "{out}");
        snap.l2_configured = true;
        snap.l2_breaker = "half_open";
        snap.l2_errors = 2;
        let out = text(cache_families(&snap));
        assert!(out.contains("switchyard_cache_l2_errors_total 2\n"), "{out}");
        assert!(out.contains("switchyard_cache_l2_breaker_state{state=\"half_open\"} 1\n"), "{out}");
        assert!(out.contains("switchyard_cache_l2_breaker_state{state=\"open\"} 0\n"), "{out}");
        assert!(out.contains("switchyard_cache_hits_total{tier=\"l2\"} 0\n"), "{out}");
    }

    #[test]
    fn decisions_keep_their_four_labels() {
        let key = DecisionKey {
            route: "r".into(),
            model: "m".into(),
            device: Some(router_policies::Device::Cpu),
            reason: router_policies::Reason::CascadeConfident,
        };
        let out = text(decision_families(&[(key, 7)]));
        assert!(
            out.contains(
                "switchyard_routing_decisions_total{route=\"r\",model=\"m\",device=\"cpu\",reason=\"cascade_confident\"} 7\n"
            ),
            "{out}"
        );
        assert!(decision_families(&[]).is_empty());
    }
}
