//! The policy's view of the fleet: a plain snapshot, built by the gateway per
//! decision from the runtime's pool statistics and the route's config.
//!
//! Nothing here is live: policies never block or lock. A snapshot a few
//! milliseconds old is fine; statistics much older than that are detected via
//! [`LatencyModel::stats_age`] and treated as uncertain by the
//! [`Estimator`](crate::Estimator).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where a pool runs its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Device {
    /// ONNX Runtime sessions on CPU.
    Cpu,
    /// ONNX Runtime sessions on an NVIDIA GPU.
    Cuda,
    /// A remote inference server the gateway proxies to.
    Upstream,
}

impl Device {
    /// Every device, so that a label can be read back ([`Device::from_label`]).
    pub const ALL: [Device; 3] = [Device::Cpu, Device::Cuda, Device::Upstream];

    /// The device whose label ([`Device::as_str`]) is `label`, if any: for
    /// answers that carry their device as text (e.g. from a cache).
    pub fn from_label(label: &str) -> Option<Device> {
        Device::ALL.into_iter().find(|d| d.as_str() == label)
    }

    /// Stable label for the `x-switchyard-device` header and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
            Device::Upstream => "upstream",
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every model a route may use, in the route's configured order
/// (cheapest first, by convention). That order is the final tie-break of
/// every policy and the order of "next candidate" fallbacks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetView {
    /// The route's models.
    pub candidates: Vec<CandidateModel>,
}

impl FleetView {
    /// The candidate named `name`, with its position, if present.
    pub fn find(&self, name: &str) -> Option<(usize, &CandidateModel)> {
        self.candidates.iter().enumerate().find(|(_, c)| &*c.name == name)
    }
}

/// One model and the pools that can run it.
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateModel {
    /// The model's name as configured (`[[models]] name`); shared, so that
    /// a view built for every request and the placements chosen from it
    /// copy a pointer, not the text.
    pub name: Arc<str>,
    /// Accuracy rank: higher means more accurate. Only the order matters.
    pub quality_rank: u32,
    /// Cost of one inference relative to the route's other models (any unit,
    /// lower is cheaper). Used to pick a cascade's cheap model and to break
    /// ties between equally accurate models.
    pub relative_cost: f64,
    /// False when the model is not loaded or marked down; its pools are then
    /// ignored whatever they say.
    pub available: bool,
    /// The pools that run this model, in configured order (the final pool
    /// tie-break).
    pub pools: Vec<PoolView>,
}

/// One device pool of a model: its capacity, current load and latency.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolView {
    /// The pool's name, unique within its model (e.g. `cuda0`, `cpu`);
    /// shared like [`CandidateModel::name`].
    pub name: Arc<str>,
    /// Where it runs.
    pub device: Device,
    /// False when the pool is down (e.g. CUDA configured but missing) or
    /// draining; the pool is never chosen.
    pub available: bool,
    /// True while the pool holds its queue (an operator paused it): its
    /// queue does not drain until it is resumed, so its predicted wait is
    /// unbounded. It is chosen only when no other pool of its model can
    /// take the request, and its model only when no other model can (see
    /// [`crate::PoolFit::Paused`]).
    pub paused: bool,
    /// Workers executing batches in parallel (0 is read as 1).
    pub workers: usize,
    /// Requests waiting in the pool's queue, not yet in a batch.
    pub queue_depth: usize,
    /// Requests in batches being executed now.
    pub in_flight: usize,
    /// Queue length at which the pool rejects new work (429); `None` when
    /// unbounded or unknown. A full pool is never chosen.
    pub queue_capacity: Option<usize>,
    /// Largest batch the batcher forms (0 is read as 1).
    pub max_batch_size: usize,
    /// Cost of running here relative to the model's other pools (lower is
    /// cheaper); the policy uses the cheapest pool that fits the budget.
    pub relative_cost: f64,
    /// Measured execution time per batch size.
    pub latency: LatencyModel,
}

impl PoolView {
    /// True when the queue has reached its capacity.
    pub fn is_full(&self) -> bool {
        self.queue_capacity.is_some_and(|capacity| self.queue_depth >= capacity)
    }

    /// True when the pool may be chosen: available and not full.
    pub fn is_admissible(&self) -> bool {
        self.available && !self.is_full()
    }
}

/// A pool's measured execution time per batch size.
///
/// Empty (no bucket with enough samples) means "no estimate yet"; the
/// [`Estimator`](crate::Estimator) then uses its prior.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyModel {
    /// Buckets in any order; each covers batches up to `max_batch`.
    pub buckets: Vec<LatencyBucket>,
    /// Time since the most recent sample. Older than the estimator's
    /// `stale_after_ms` means the statistics are stale.
    pub stats_age: Duration,
}

/// Execution time of batches up to a size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyBucket {
    /// Largest batch size this bucket covers (batches larger than the
    /// previous bucket's `max_batch`).
    pub max_batch: usize,
    /// A high-percentile (p90 or so) execution time of one such batch; the
    /// runtime chooses the percentile, higher is more conservative.
    pub latency: Duration,
    /// How many batches were measured.
    pub samples: u64,
}
