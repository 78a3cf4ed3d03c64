//! The cache's Pingora background service: connects L2 at start-up and
//! runs the L2 writer task. Pingora owns the tokio runtimes, so the Redis
//! connection and the writer are created inside this service rather than
//! before the server starts.

use super::ResponseCache;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::sync::Arc;

/// Runs [`ResponseCache::run_background`] for the server's lifetime.
pub struct CacheService {
    cache: Arc<ResponseCache>,
}

impl CacheService {
    /// A service for `cache`.
    pub fn new(cache: Arc<ResponseCache>) -> CacheService {
        CacheService { cache }
    }
}

#[async_trait]
impl BackgroundService for CacheService {
    /// Called once when the server starts; returns only when there is no
    /// L2 (the writer runs until the runtime is shut down).
    async fn start(&self, _shutdown: ShutdownWatch) {
        self.cache.run_background().await;
    }
}
