//! `GET /admin/stats`: live statistics per model and pool (queues,
//! executions, latency estimates), routing decisions per route, and the
//! cache's counters, as JSON.

use crate::state::AppState;
use serde_json::{json, Value};
use switchyard_runtime::{ModelState, ModelStats, PoolStats, RuntimeSnapshot};

/// The whole stats document for the snapshot in force.
pub fn stats_json(state: &AppState) -> Value {
    let snap = state.snapshot.load();
    let mut stats = snapshot_json(&snap.repo.stats());
    stats["generation"] = snap.generation.into();
    stats["in_flight"] = state.lifecycle.in_flight().into();
    stats["decisions"] = state.decisions.to_json();
    stats["budgets"] = serde_json::to_value(state.budget_misses.snapshot()).unwrap_or_default();
    stats["cache"] = serde_json::to_value(state.cache.snapshot()).unwrap_or_default();
    stats["streams"] = serde_json::to_value(state.streams.snapshot()).unwrap_or_default();
    stats["tenants"] = crate::tenants::families::stats_json(&state.tenants, &snap.tenants);
    stats["priority"] = crate::metrics::classes::stats_json(&crate::metrics::classes::CLASSES);
    stats["calibration"] = state
        .calibration
        .views()
        .into_iter()
        .map(|(route, view)| (route, serde_json::to_value(view).unwrap_or_default()))
        .collect::<serde_json::Map<_, _>>()
        .into();
    stats["rollouts"] = super::rollouts::rollouts_json(state);
    stats["record"] = state
        .recorders
        .stats()
        .into_iter()
        .map(|(route, s)| (route, serde_json::to_value(s).unwrap_or_default()))
        .collect::<serde_json::Map<_, _>>()
        .into();
    stats["upstreams"] = crate::upstream::stats::to_json(&state.upstreams);
    stats["prefix_routes"] = crate::prefix::stats_json(&state.prefix_routes);
    stats
}

/// The runtime snapshot as JSON (durations in microseconds).
pub fn snapshot_json(snapshot: &RuntimeSnapshot) -> Value {
    json!({ "models": snapshot.models.iter().map(model_json).collect::<Vec<_>>() })
}

/// One model's statistics as JSON.
pub fn model_json(model: &ModelStats) -> Value {
    let (state, reason) = match &model.state {
        ModelState::Unloaded => ("unloaded", None),
        ModelState::Loading => ("loading", None),
        ModelState::Ready => ("ready", None),
        ModelState::Failed(why) => ("failed", Some(why.clone())),
    };
    json!({
        "name": &*model.name,
        "version": model.version,
        "state": state,
        "failure": reason,
        "loads": model.loads,
        "last_cold_start_us": model.last_cold_start.map(|d| d.as_micros() as u64),
        "pools": model.pools.iter().map(pool_json).collect::<Vec<_>>(),
    })
}

fn pool_json(pool: &PoolStats) -> Value {
    json!({
        "name": &*pool.name,
        "device": pool.device.to_string(),
        "available": pool.available,
        "unavailable_reason": pool.unavailable_reason,
        "paused": pool.paused,
        "workers": pool.workers,
        "queue_depth": pool.queue_depth,
        "queue_capacity": pool.queue_capacity,
        "in_flight": pool.in_flight,
        "requests": pool.requests,
        "executions": pool.executions,
        "executed_rows": pool.executed_rows,
        "cancelled": pool.cancelled,
        "rejected": pool.rejected,
        "errors": pool.errors,
        "inline_runs": pool.inline_runs,
        "caller_batches": pool.caller_batches,
        "preemptions": pool.preemptions,
        "reserved_batches": pool.reserved_batches,
        "isolated_batches": pool.isolated_batches,
        "latency": pool.latency.iter().map(|b| json!({
            "max_batch": b.max_batch,
            "ewma_us": b.ewma.as_micros() as u64,
            "samples": b.samples,
        })).collect::<Vec<_>>(),
    })
}
