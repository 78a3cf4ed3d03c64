//! State shared by every request: the current config snapshot, the model
//! repository and the admission limiter.

use crate::config::Config;
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
}

impl AppState {
    /// Builds the state for `config` over `repo`.
    pub fn new(config: Config, repo: Arc<ModelRepository>) -> AppState {
        let permits = config.server.limits.max_concurrent_requests;
        AppState { config: ArcSwap::from_pointee(config), repo, limiter: Arc::new(Semaphore::new(permits)) }
    }
}
