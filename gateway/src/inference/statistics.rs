//! Triton's statistics document (its statistics extension), the one both
//! front ends answer: REST sends it as JSON (`GET
//! /v2/models[/{m}[/versions/{v}]]/stats`), gRPC reads the same document
//! into `ModelStatisticsResponse` ([`crate::grpc`]), so the two protocols
//! report the same numbers.
//!
//! Built from the runtime's pool counters: per local model and version,
//! the rows executed (`inference_count`), the batches (`execution_count`),
//! successes and failures, and the time spent queued and executing (from
//! the pools' histograms, so whole microseconds). A batch's run includes
//! copying its inputs in and its outputs out, so `compute_input` and
//! `compute_output` have `compute_infer`'s count and no time of their own
//! (clients such as `perf_analyzer` require the three counts to be
//! equal). Triton's fields with no counterpart here (cache hit/miss,
//! per-batch-size rows, `last_inference`) are zero or empty. Upstream
//! models are counted by their server, not here.
//!
//! A model's counters are as private as the model: a model used by a
//! key-protected route is listed only for a request with one of its keys
//! ([`crate::auth::AccessTable::may_see_model`]), also when an open route
//! shares it.

use crate::error::GatewayError;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::target::resolve;
use http::HeaderMap;
use serde_json::{json, Value};
use switchyard_runtime::{ModelStats, PoolStats, RuntimeSnapshot};

/// The statistics of every model (`name` `None`) or of the models behind
/// route or model `name` (404 when unknown; `version`, when given, must be
/// the name's), leaving out those the request may not see:
/// `{"model_stats": [...]}`. The caller has authorized `name` itself.
pub fn model_statistics(
    state: &AppState,
    snap: &Snapshot,
    name: Option<&str>,
    version: Option<&str>,
    headers: &HeaderMap,
) -> Result<Value, GatewayError> {
    let runtime = snap.repo.stats();
    let names = match name {
        None => None,
        Some(name) => Some(resolve(&snap.config, &state.catalog(snap), name, version)?.models),
    };
    Ok(document(
        of_models(&runtime, names.as_deref())
            .into_iter()
            .filter(|m| snap.access.may_see_model(&m.name, headers)),
    ))
}

/// Every version of the local models `names` in their order (every model
/// when `None`; an upstream model has none).
fn of_models<'a>(runtime: &'a RuntimeSnapshot, names: Option<&'a [String]>) -> Vec<&'a ModelStats> {
    match names {
        None => runtime.models.iter().collect(),
        Some(names) => {
            names.iter().flat_map(|n| runtime.models.iter().filter(move |m| *m.name == **n)).collect()
        }
    }
}

/// `{"model_stats": [...]}` for `models`, in their order.
pub fn document<'a>(models: impl Iterator<Item = &'a ModelStats>) -> Value {
    json!({ "model_stats": models.map(model_stat).collect::<Vec<_>>() })
}

/// One model's `model_stat` object.
fn model_stat(model: &ModelStats) -> Value {
    let sum = |f: fn(&PoolStats) -> u64| model.pools.iter().map(f).sum::<u64>();
    let failed = sum(|p| p.errors + p.rejected);
    let succeeded = sum(|p| p.requests).saturating_sub(failed + sum(|p| p.cancelled));
    let executions = sum(|p| p.executions);
    let duration = |count: u64, us: u64| json!({ "count": count, "ns": us.saturating_mul(1000) });
    json!({
        "name": &*model.name,
        "version": model.version.to_string(),
        "last_inference": 0,
        "inference_count": sum(|p| p.executed_rows),
        "execution_count": executions,
        "inference_stats": {
            "success": duration(succeeded, 0),
            "fail": duration(failed, 0),
            "queue": duration(sum(|p| p.histograms.queue_wait_us.count()), sum(|p| p.histograms.queue_wait_us.sum)),
            "compute_input": duration(executions, 0),
            "compute_infer": duration(executions, sum(|p| p.histograms.execution_us.sum)),
            "compute_output": duration(executions, 0),
            "cache_hit": duration(0, 0),
            "cache_miss": duration(0, 0),
        },
        "batch_stats": [],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_runtime::{DeviceKind, ModelState};

    fn pool(requests: u64, executions: u64, executed_rows: u64) -> PoolStats {
        PoolStats {
            name: "cpu".into(),
            device: DeviceKind::Cpu,
            available: true,
            unavailable_reason: None,
            paused: false,
            workers: 1,
            queue_depth: 0,
            queue_capacity: 8,
            lowest_queued_class: None,
            max_batch_size: 8,
            in_flight: 0,
            requests,
            executions,
            executed_rows,
            cancelled: 0,
            rejected: 0,
            errors: 0,
            inline_runs: 0,
            caller_batches: 0,
            preemptions: 0,
            reserved_batches: 0,
            isolated_batches: 0,
            latency: Vec::new(),
            histograms: Default::default(),
        }
    }

    fn model(name: &str, pools: Vec<PoolStats>) -> ModelStats {
        ModelStats {
            name: name.into(),
            version: 3,
            state: ModelState::Ready,
            last_cold_start: None,
            loads: 1,
            unloads: 0,
            cold_starts: Default::default(),
            pools,
        }
    }

    #[test]
    fn sums_the_pools_of_each_model() {
        let mut a = PoolStats { errors: 1, rejected: 1, cancelled: 2, ..pool(10, 3, 7) };
        a.histograms.execution_us.counts = vec![2, 1];
        a.histograms.execution_us.sum = 40;
        a.histograms.queue_wait_us.counts = vec![5];
        a.histograms.queue_wait_us.sum = 9;
        let doc = document([model("m", vec![a, pool(4, 2, 4)])].iter());
        let stat = &doc["model_stats"][0];
        assert_eq!(stat["name"], "m");
        assert_eq!(stat["version"], "3");
        assert_eq!(stat["inference_count"], 11);
        assert_eq!(stat["execution_count"], 5);
        let infer = &stat["inference_stats"];
        assert_eq!(infer["success"], json!({"count": 10, "ns": 0}));
        assert_eq!(infer["fail"], json!({"count": 2, "ns": 0}));
        assert_eq!(infer["queue"], json!({"count": 5, "ns": 9000}));
        assert_eq!(infer["compute_infer"], json!({"count": 5, "ns": 40000}));
        assert_eq!(
            infer["compute_input"]["count"], infer["compute_infer"]["count"],
            "perf_analyzer needs them equal"
        );
        assert_eq!(infer["compute_output"]["count"], infer["compute_infer"]["count"]);
        assert_eq!(infer["cache_miss"], json!({"count": 0, "ns": 0}));
        assert_eq!(stat["batch_stats"], json!([]));
    }

    #[test]
    fn no_models_is_an_empty_list() {
        assert_eq!(document([].iter()), json!({"model_stats": []}));
    }
}
