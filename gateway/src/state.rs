//! State shared by every request: the current config snapshot, the model
//! repository and the admission limiter.

use crate::cache::ResponseCache;
use crate::config::Config;
use crate::proxy::PrefixRoutes;
use crate::routing::decisions::DecisionCounters;
use crate::upstream::{Catalog, Upstreams};
use arc_swap::ArcSwap;
use std::sync::Arc;
use switchyard_runtime::ModelRepository;
use tokio::sync::Semaphore;

/// Shared by all requests; cheap to clone through `Arc`.
pub struct AppState {
    /// The config in force. Each request loads one snapshot and keeps it,
    /// so a reload never half-applies to a request.
    pub config: ArcSwap<Config>,
    /// Loaded and loadable models.
    pub repo: Arc<ModelRepository>,
    /// Admission control: one permit per request in flight.
    pub limiter: Arc<Semaphore>,
    /// Routing decisions per route/model/device/reason (admin stats, metrics).
    pub decisions: DecisionCounters,
    /// The response cache (L1, optional Redis L2), built from the
    /// `[cache]` section at start-up.
    pub cache: Arc<ResponseCache>,
    /// Upstream servers and their models (`[[upstreams]]`), with their
    /// address health, breakers and latency statistics.
    pub upstreams: Arc<Upstreams>,
    /// Path-prefix routes proxied to upstreams (`[[prefix_routes]]`).
    pub prefix_routes: PrefixRoutes,
}

impl AppState {
    /// Builds the state for `config` over `repo`.
    pub fn new(config: Config, repo: Arc<ModelRepository>) -> AppState {
        let permits = config.server.limits.max_concurrent_requests;
        let cache = Arc::new(ResponseCache::new(config.cache.as_ref()));
        let upstreams = Arc::new(Upstreams::new(&config.proxy));
        let prefix_routes = PrefixRoutes::new(&config.proxy, &upstreams);
        AppState {
            config: ArcSwap::from_pointee(config),
            repo,
            limiter: Arc::new(Semaphore::new(permits)),
            decisions: DecisionCounters::default(),
            cache,
            prefix_routes,
            upstreams,
        }
    }

    /// Model lookups over the local repository and the upstream models.
    pub fn catalog(&self) -> Catalog<'_> {
        Catalog { repo: &self.repo, upstreams: &self.upstreams }
    }
}
