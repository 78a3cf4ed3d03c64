//! State shared by every request: the current snapshot (config + models),
//! the admission limiter, the cache and the server's life cycle.

use crate::cache::ResponseCache;
use crate::config::Config;
use crate::lifecycle::Lifecycle;
use crate::routing::decisions::DecisionCounters;
use crate::snapshot::Snapshot;
use arc_swap::ArcSwap;
use std::sync::Arc;
use switchyard_runtime::ModelRepository;
use tokio::sync::Semaphore;

/// Shared by all requests; cheap to clone through `Arc`.
pub struct AppState {
    /// The config and models in force. Each request loads one snapshot
    /// and keeps it, so a reload never half-applies to a request.
    pub snapshot: ArcSwap<Snapshot>,
    /// Admission control: one permit per request in flight.
    pub limiter: Arc<Semaphore>,
    /// Routing decisions per route/model/device/reason (admin stats, metrics).
    pub decisions: DecisionCounters,
    /// The response cache (L1, optional Redis L2), built from the
    /// `[cache]` section at start-up.
    pub cache: Arc<ResponseCache>,
    /// Requests in flight and whether the server is draining.
    pub lifecycle: Arc<Lifecycle>,
    /// Counters of streamed (SSE) infer calls.
    pub streams: crate::stream::stats::StreamCounters,
}

impl AppState {
    /// Builds the state for `config` over `repo` (generation 1).
    pub fn new(config: Config, repo: Arc<ModelRepository>) -> AppState {
        let permits = config.server.limits.max_concurrent_requests;
        let cache = Arc::new(ResponseCache::new(config.cache.as_ref()));
        AppState {
            snapshot: ArcSwap::from_pointee(Snapshot::new(1, config, repo)),
            limiter: Arc::new(Semaphore::new(permits)),
            decisions: DecisionCounters::default(),
            cache,
            lifecycle: Arc::new(Lifecycle::default()),
            streams: Default::default(),
        }
    }
}
