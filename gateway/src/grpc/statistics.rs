//! `ModelStatistics` from the runtime's pool counters: per local model and
//! version, the rows executed (`inference_count`), the batches
//! (`execution_count`), successes and failures, and the time spent queued
//! and executing (from the pools' histograms, so whole microseconds).
//! Triton's fields with no counterpart here (`compute_input`,
//! `compute_output`, cache hit/miss durations, per-batch-size rows,
//! `last_inference`) stay zero. Upstream models are counted by their
//! server, not here.

use super::proto::{InferStatistics, ModelStatistics, StatisticDuration};
use switchyard_runtime::{ModelStats, RuntimeSnapshot};

/// Statistics of the models named `name` (every model when empty) and,
/// when given, of that version only.
pub fn model_statistics(
    snapshot: &RuntimeSnapshot,
    name: &str,
    version: Option<u64>,
) -> Vec<ModelStatistics> {
    snapshot
        .models
        .iter()
        .filter(|m| name.is_empty() || m.name == name)
        .filter(|m| version.is_none_or(|v| m.version == v))
        .map(one)
        .collect()
}

fn one(model: &ModelStats) -> ModelStatistics {
    let pools = &model.pools;
    let sum = |f: fn(&switchyard_runtime::PoolStats) -> u64| pools.iter().map(f).sum::<u64>();
    let failed = sum(|p| p.errors + p.rejected);
    let requests = sum(|p| p.requests);
    let queue_count = sum(|p| p.histograms.queue_wait_us.count());
    let queue_us = sum(|p| p.histograms.queue_wait_us.sum);
    let executions = sum(|p| p.executions);
    let execution_us = sum(|p| p.histograms.execution_us.sum);
    let duration = |count: u64, us: u64| Some(StatisticDuration { count, ns: us.saturating_mul(1000) });
    ModelStatistics {
        name: model.name.clone(),
        version: model.version.to_string(),
        last_inference: 0,
        inference_count: sum(|p| p.executed_rows),
        execution_count: executions,
        inference_stats: Some(InferStatistics {
            success: duration(requests.saturating_sub(failed + sum(|p| p.cancelled)), 0),
            fail: duration(failed, 0),
            queue: duration(queue_count, queue_us),
            compute_infer: duration(executions, execution_us),
            ..InferStatistics::default()
        }),
        batch_stats: Vec::new(),
    }
}
