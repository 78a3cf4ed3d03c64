//! Builders for fleet snapshots, shared by the crate's tests.

use std::time::Duration;

use crate::{Budget, CandidateModel, Device, Estimator, FleetView, LatencyBucket, LatencyModel, PoolView};

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn budget_ms(n: u64) -> Budget {
    Budget::new(ms(n))
}

pub fn estimator() -> Estimator {
    Estimator::default()
}

/// An idle, available pool measured at `batch_ms` for any batch up to
/// `max_batch`.
pub fn pool(name: &str, device: Device, cost: f64, batch_ms: u64) -> PoolView {
    PoolView {
        name: name.into(),
        device,
        available: true,
        paused: false,
        workers: 1,
        queue_depth: 0,
        in_flight: 0,
        queue_capacity: Some(1024),
        max_batch_size: 8,
        relative_cost: cost,
        latency: LatencyModel {
            buckets: vec![LatencyBucket { max_batch: 8, latency: ms(batch_ms), samples: 100 }],
            stats_age: ms(100),
        },
    }
}

pub fn gpu(batch_ms: u64) -> PoolView {
    pool("gpu", Device::Cuda, 1.0, batch_ms)
}

pub fn cpu(batch_ms: u64) -> PoolView {
    pool("cpu", Device::Cpu, 2.0, batch_ms)
}

pub fn model(name: &str, quality: u32, cost: f64, pools: Vec<PoolView>) -> CandidateModel {
    CandidateModel { name: name.into(), quality_rank: quality, relative_cost: cost, available: true, pools }
}

pub fn fleet(candidates: Vec<CandidateModel>) -> FleetView {
    FleetView { candidates }
}

/// A cheap model (2 ms GPU, 6 ms CPU) and a heavy one (10 ms GPU, 40 ms CPU).
pub fn two_models() -> FleetView {
    fleet(vec![model("cheap", 1, 1.0, vec![gpu(2), cpu(6)]), model("heavy", 2, 5.0, vec![gpu(10), cpu(40)])])
}

/// The named pool of the named model, for tweaking.
pub fn pool_mut<'a>(fleet: &'a mut FleetView, model: &str, pool: &str) -> &'a mut PoolView {
    let candidate = fleet.candidates.iter_mut().find(|c| &*c.name == model).expect("model");
    candidate.pools.iter_mut().find(|p| &*p.name == pool).expect("pool")
}

pub fn model_mut<'a>(fleet: &'a mut FleetView, model: &str) -> &'a mut CandidateModel {
    fleet.candidates.iter_mut().find(|c| &*c.name == model).expect("model")
}

/// Names of a plan's fallbacks as `model/pool`.
pub fn names(placements: &[crate::Placement]) -> Vec<String> {
    placements.iter().map(|t| format!("{}/{}", t.model, t.pool)).collect()
}

/// A deterministic 64-bit generator (splitmix64) for draws.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
