//! The policy's view of the fleet, built per decision from the runtime's
//! statistics ([`RuntimeSnapshot`]) and the config's routing attributes.
//!
//! Defaults, when a `[[models]]` entry leaves them out (position = the
//! model's index in the route's `models` list, cheapest first):
//! - model `cost` = `1 + position` (later models cost more);
//! - model `quality` = `position` (later models are more accurate);
//! - pool `cost` = 1.0 (equal costs: the pool predicted to finish first
//!   among those that fit wins).
//!
//! A request sees a pool's full queue as full unless the queue holds a
//! waiter of a lower class than the request's: then the runtime takes the
//! request by shedding that waiter (`switchyard_runtime::rank`), so the
//! view leaves the pool's capacity open (`queue_capacity: None`) for it.
//!
//! Building a view walks the runtime's atomics and one small mutex per
//! pool; cheap next to an inference, so it is rebuilt for every decision
//! rather than cached.

use crate::config::model_section::ModelRouting;
use crate::config::Config;
use router_policies::{CandidateModel, Device, FleetView, LatencyBucket, LatencyModel, PoolView};
use std::sync::Arc;
use std::time::Duration;
use switchyard_runtime::{DeviceKind, ModelState, ModelStats, PoolStats, RuntimeSnapshot};

/// The runtime reports a moving *average* per batch-size bucket, while
/// policies expect a high percentile; predictions use the average times
/// this factor.
pub const LATENCY_HEADROOM: f64 = 1.25;

/// The fleet view for `models` (a route's list, in order).
///
/// A model missing from the snapshot or whose load failed is unavailable;
/// a model not loaded yet (or unloaded when idle) keeps its old statistics
/// but they are marked stale, since its sessions will be cold.
pub fn fleet_view(snapshot: &RuntimeSnapshot, config: &Config, models: &[String], class: u8) -> FleetView {
    let default_routing = ModelRouting::default();
    let candidates = models
        .iter()
        .enumerate()
        .map(|(position, name)| {
            let routing = config.model_routing.get(name).unwrap_or(&default_routing);
            candidate(name, position, routing, snapshot.model(name), class)
        })
        .collect();
    FleetView { candidates }
}

/// One candidate model; `stats` is `None` when the runtime does not know it.
fn candidate(
    name: &str,
    position: usize,
    routing: &ModelRouting,
    stats: Option<&ModelStats>,
    class: u8,
) -> CandidateModel {
    let position_u32 = u32::try_from(position).unwrap_or(u32::MAX);
    let (available, stale) = match stats.map(|s| &s.state) {
        None | Some(ModelState::Failed(_)) => (false, false),
        Some(ModelState::Ready) => (true, false),
        Some(ModelState::Unloaded | ModelState::Loading) => (true, true),
    };
    let pools = stats
        .map(|s| s.pools.iter().map(|p| pool_view(p, routing, stale, class)).collect())
        .unwrap_or_default();
    CandidateModel {
        name: stats.map_or_else(|| name.into(), |s| Arc::clone(&s.name)),
        quality_rank: routing.quality.unwrap_or(position_u32),
        relative_cost: routing.cost.unwrap_or(1.0 + position as f64),
        available,
        pools,
    }
}

/// One pool's view for a request of `class`. `stale` marks the
/// statistics as old (cold sessions).
fn pool_view(stats: &PoolStats, routing: &ModelRouting, stale: bool, class: u8) -> PoolView {
    let can_displace = stats.lowest_queued_class.is_some_and(|lowest| lowest > class);
    let buckets = stats
        .latency
        .iter()
        .map(|b| LatencyBucket {
            max_batch: b.max_batch,
            latency: b.ewma.mul_f64(LATENCY_HEADROOM),
            samples: b.samples,
        })
        .collect();
    PoolView {
        name: Arc::clone(&stats.name),
        device: device(stats.device),
        available: stats.available,
        paused: stats.paused,
        workers: stats.workers,
        queue_depth: stats.queue_depth,
        in_flight: stats.in_flight,
        queue_capacity: (!can_displace).then_some(stats.queue_capacity),
        max_batch_size: stats.max_batch_size.max(1),
        relative_cost: routing.pool_costs.get(&*stats.name).copied().unwrap_or(1.0),
        latency: LatencyModel { buckets, stats_age: if stale { Duration::MAX } else { Duration::ZERO } },
    }
}

/// The policy crate's name for a runtime device.
pub fn device(kind: DeviceKind) -> Device {
    match kind {
        DeviceKind::Cpu => Device::Cpu,
        DeviceKind::Cuda => Device::Cuda,
    }
}

#[cfg(test)]
mod tests;
