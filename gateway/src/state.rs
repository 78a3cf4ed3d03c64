//! State shared by every request: the current snapshot (config + models),
//! the admission limiter, the cache and the server's life cycle.

use crate::cache::ResponseCache;
use crate::config::Config;
use crate::connections::ConnTable;
use crate::lifecycle::Lifecycle;
use crate::prefix::PrefixRoutes;
use crate::routing::decisions::DecisionCounters;
use crate::snapshot::Snapshot;
use crate::upstream::{Catalog, Upstreams};
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
    /// Answers and budget misses per route (admin stats, metrics, console).
    pub budget_misses: crate::routing::budget_misses::BudgetMisses,
    /// Tenant limiter state and counters, kept across reloads
    /// ([`crate::tenants`]).
    pub tenants: crate::tenants::Tenants,
    /// The response cache (L1, optional Redis L2), built from the
    /// `[cache]` section at start-up.
    pub cache: Arc<ResponseCache>,
    /// Requests in flight and whether the server is draining.
    pub lifecycle: Arc<Lifecycle>,
    /// Counters of streamed (SSE) infer calls.
    pub streams: crate::metrics::streams::StreamCounters,
    /// The routes' traffic samples (`routes[].record`).
    pub recorders: crate::record::Recorders,
    /// Cascade routes' online calibration (`routes[].calibrate`).
    pub calibration: Arc<crate::routing::calibration::Calibration>,
    /// Routes' candidates: comparisons and rollout plans (`routes[].candidate`).
    pub rollouts: Arc<crate::routing::rollout::Rollouts>,
    /// Upstream servers and their models (`[[upstreams]]`), with their
    /// address health, breakers and latency statistics. Built at start-up:
    /// changing `[[upstreams]]` or `[[prefix_routes]]` needs a restart
    /// (see `reload::restart`).
    pub upstreams: Arc<Upstreams>,
    /// Path-prefix routes proxied to upstreams (`[[prefix_routes]]`).
    pub prefix_routes: PrefixRoutes,
    /// The V2 listener's open connections (`server.max_connections`, idle
    /// and head timeouts), sized at start-up.
    pub connections: Arc<ConnTable>,
    /// The gRPC listener's open connections, under the same limits
    /// (`crate::grpc::conn`); empty while gRPC is off.
    pub grpc_connections: Arc<ConnTable>,
}

impl AppState {
    /// Builds the state for `config` over `repo` (generation 1).
    pub fn new(config: Config, repo: Arc<ModelRepository>) -> AppState {
        let upstreams = Arc::new(Upstreams::new(&config.proxy));
        AppState::with_upstreams(config, repo, upstreams)
    }

    /// As [`AppState::new`], with the upstream registry built (and its
    /// models' metadata read) beforehand, as `prepare::prepare` does.
    pub fn with_upstreams(
        mut config: Config,
        repo: Arc<ModelRepository>,
        upstreams: Arc<Upstreams>,
    ) -> AppState {
        let rollouts = Arc::new(crate::routing::rollout::Rollouts::default());
        rollouts.set_upstreams(Arc::clone(&upstreams));
        rollouts.overlay(&mut config);
        let permits = config.server.limits.max_concurrent_requests;
        let config_connections = config.server.connections;
        let cache = Arc::new(ResponseCache::new(config.cache.as_ref()));
        let prefix_routes = PrefixRoutes::new(&config.proxy, &upstreams);
        AppState {
            snapshot: ArcSwap::from_pointee(Snapshot::new(1, config, repo)),
            limiter: Arc::new(Semaphore::new(permits)),
            decisions: DecisionCounters::default(),
            budget_misses: Default::default(),
            tenants: Default::default(),
            cache,
            lifecycle: Arc::new(Lifecycle::default()),
            streams: Default::default(),
            recorders: Default::default(),
            calibration: Default::default(),
            rollouts,
            prefix_routes,
            upstreams,
            connections: ConnTable::new(config_connections),
            grpc_connections: ConnTable::new(config_connections),
        }
    }

    /// What routing reads and counts for a request under `snap`.
    pub fn routing<'a>(&'a self, snap: &'a Snapshot) -> crate::routing::RoutingContext<'a> {
        crate::routing::RoutingContext {
            snap,
            upstreams: &self.upstreams,
            decisions: &self.decisions,
            calibration: &self.calibration,
            rollouts: &self.rollouts,
        }
    }

    /// Model lookups over `snap`'s local repository and the upstream
    /// models.
    pub fn catalog<'a>(&'a self, snap: &'a Snapshot) -> Catalog<'a> {
        Catalog { repo: &snap.repo, upstreams: &self.upstreams }
    }
}
