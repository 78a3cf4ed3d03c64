//! Active health checks of every upstream address, with
//! `pingora-load-balancing`'s checks (an HTTP `GET` that must answer 200,
//! or a TCP connect), run by one Pingora background service.
//!
//! Per upstream with `health.enabled`:
//! 1. Its addresses become a static backend set with an
//!    [`HttpHealthCheck`] (`health.path`) or a [`TcpHealthCheck`], flipping
//!    after `health.failures` failed / `health.successes` passed checks.
//! 2. Every `health.interval` all its addresses are checked in parallel;
//!    a flip marks the [`Address`] healthy or not, which address selection
//!    and the fleet view read.
//! 3. In the same loop, the signatures of its models that are not known
//!    yet (unreachable at start-up) are read again.
//!
//! Passive checks complement this: the per-address breaker takes an
//! address out after failed requests, between two health checks.

use super::address::Address;
use super::registry::{Upstream, Upstreams};
use super::startup::fetch_any;
use async_trait::async_trait;
use pingora::http::RequestHeader;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use pingora_load_balancing::discovery::Static;
use pingora_load_balancing::health_check::{HealthCheck, HealthObserve, HttpHealthCheck, TcpHealthCheck};
use pingora_load_balancing::{Backend, Backends};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Runs the health loops of every upstream for the server's lifetime.
pub struct HealthService {
    upstreams: Arc<Upstreams>,
}

impl HealthService {
    /// A service checking `upstreams`.
    pub fn new(upstreams: Arc<Upstreams>) -> HealthService {
        HealthService { upstreams }
    }
}

#[async_trait]
impl BackgroundService for HealthService {
    /// Runs one loop per upstream until shutdown.
    async fn start(&self, shutdown: ShutdownWatch) {
        let mut loops = tokio::task::JoinSet::new();
        for upstream in self.upstreams.iter() {
            let upstream = upstream.clone();
            let shutdown = shutdown.clone();
            loops.spawn(async move { run(upstream, shutdown).await });
        }
        while loops.join_next().await.is_some() {}
    }
}

/// Flips [`Address`] health when Pingora's check flips a backend.
struct MarkAddresses {
    upstream: String,
    addresses: Vec<Arc<Address>>,
}

#[async_trait]
impl HealthObserve for MarkAddresses {
    async fn observe(&self, target: &Backend, healthy: bool) {
        let Some(addr) = target.addr.as_inet() else { return };
        if let Some(address) = self.addresses.iter().find(|a| a.addr == *addr) {
            address.set_healthy(healthy);
            if healthy {
                tracing::info!(upstream = %self.upstream, %addr, "upstream address passes its health check again");
            } else {
                tracing::warn!(upstream = %self.upstream, %addr, "upstream address fails its health check");
            }
        }
    }
}

/// Step 1: the health check for `upstream`.
fn health_check(upstream: &Upstream) -> pingora::Result<Box<dyn HealthCheck + Send + Sync>> {
    let cfg = &upstream.config.health;
    let observer = Box::new(MarkAddresses {
        upstream: upstream.config.name.clone(),
        addresses: upstream.addresses.clone(),
    });
    let first = upstream.config.addrs.first();
    let host = first.map_or_else(|| "localhost".to_string(), |addr| upstream.config.host_header(*addr));
    match &cfg.path {
        Some(path) => {
            let tls = upstream.peer_tls.as_ref();
            let sni = match (tls, first) {
                (Some(tls), Some(addr)) => tls.server_name(*addr),
                _ => host.clone(),
            };
            let mut check = HttpHealthCheck::new(&sni, tls.is_some());
            if let Some(tls) = tls {
                tls.apply(&mut check.peer_template);
            }
            let mut request = RequestHeader::build("GET", path.as_bytes(), None)?;
            request.append_header("Host", host.as_str())?;
            check.req = request;
            check.consecutive_failure = cfg.failures;
            check.consecutive_success = cfg.successes;
            check.peer_template.options.connection_timeout = Some(cfg.timeout);
            check.peer_template.options.read_timeout = Some(cfg.timeout);
            check.health_changed_callback = Some(observer);
            Ok(Box::new(check))
        }
        None => {
            let mut check = TcpHealthCheck::new();
            check.consecutive_failure = cfg.failures;
            check.consecutive_success = cfg.successes;
            check.peer_template.options.connection_timeout = Some(cfg.timeout);
            check.health_changed_callback = Some(observer);
            Ok(check)
        }
    }
}

/// Steps 1-3 for one upstream.
async fn run(upstream: Arc<Upstream>, mut shutdown: ShutdownWatch) {
    let cfg = upstream.config.health.clone();
    let mut backends = None;
    if cfg.enabled {
        match checked_backends(&upstream).await {
            Ok(b) => backends = Some(b),
            Err(e) => {
                tracing::error!(upstream = %upstream.config.name, error = %e, "health checks not started")
            }
        }
    }
    loop {
        if let Some(backends) = &backends {
            backends.run_health_check(true).await;
        }
        for model in upstream.models.iter().filter(|m| m.signature().is_none()) {
            model.record_fetch(fetch_any(&upstream, &model.config).await);
        }
        tokio::select! {
            _ = tokio::time::sleep(cfg.interval) => {}
            _ = shutdown.changed() => return,
        }
    }
}

async fn checked_backends(upstream: &Upstream) -> pingora::Result<Backends> {
    let mut set = BTreeSet::new();
    for addr in &upstream.config.addrs {
        set.insert(Backend::new(&addr.to_string())?);
    }
    let mut backends = Backends::new(Static::new(set));
    backends.set_health_check(health_check(upstream)?);
    backends.update(|_| {}).await?;
    Ok(backends)
}
