//! The admin listener (`server.admin_listen`, loopback by default):
//! `GET /healthz` and `GET /admin/stats`, the runtime's live per-model and
//! per-pool statistics as JSON. Metrics, reload and model control are
//! added here by the operations work.

use crate::error::GatewayError;
use crate::http_io::write_reply;
use crate::reply::Reply;
use crate::state::AppState;
use async_trait::async_trait;
use http::Method;
use pingora::prelude::{HttpPeer, ProxyHttp, Session};
use pingora::{Error, ErrorType};
use serde_json::{json, Value};
use std::sync::Arc;
use switchyard_runtime::{ModelState, ModelStats, PoolStats, RuntimeSnapshot};

/// The admin app; answers everything in `request_filter`.
pub struct AdminApp {
    state: Arc<AppState>,
}

impl AdminApp {
    /// An admin app over the gateway's shared state.
    pub fn new(state: Arc<AppState>) -> AdminApp {
        AdminApp { state }
    }

    fn answer(&self, method: &Method, path: &str) -> Reply {
        match (method, path) {
            (&Method::GET, "/healthz") => Reply::empty(200),
            (&Method::GET, "/metrics") => crate::metrics::reply(&self.state),
            (&Method::GET, "/admin/stats") => {
                let mut stats = snapshot_json(&self.state.repo.stats());
                stats["decisions"] = self.state.decisions.to_json();
                stats["cache"] = serde_json::to_value(self.state.cache.snapshot()).unwrap_or_default();
                Reply::json_value(200, &stats)
            }
            _ => Reply::error(&GatewayError::NotFound(format!("no admin endpoint at {method} {path}"))),
        }
    }
}

#[async_trait]
impl ProxyHttp for AdminApp {
    type CTX = ();

    fn new_ctx(&self) {}

    /// Answers every admin request in-process.
    async fn request_filter(&self, session: &mut Session, _ctx: &mut ()) -> pingora::Result<bool> {
        let header = session.req_header();
        let reply = self.answer(&header.method, header.uri.path());
        write_reply(session, reply, false).await?;
        Ok(true)
    }

    /// Never reached: the admin app proxies nothing.
    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> pingora::Result<Box<HttpPeer>> {
        Err(Error::explain(ErrorType::InternalError, "the admin listener proxies nothing"))
    }
}

/// The runtime snapshot as JSON (durations in microseconds).
pub fn snapshot_json(snapshot: &RuntimeSnapshot) -> Value {
    json!({ "models": snapshot.models.iter().map(model_json).collect::<Vec<_>>() })
}

fn model_json(model: &ModelStats) -> Value {
    let (state, reason) = match &model.state {
        ModelState::Unloaded => ("unloaded", None),
        ModelState::Loading => ("loading", None),
        ModelState::Ready => ("ready", None),
        ModelState::Failed(why) => ("failed", Some(why.clone())),
    };
    json!({
        "name": model.name,
        "version": model.version,
        "state": state,
        "failure": reason,
        "loads": model.loads,
        "last_cold_start_us": model.last_cold_start.map(|d| d.as_micros() as u64),
        "pools": model.pools.iter().map(pool_json).collect::<Vec<_>>(),
    })
}

fn pool_json(pool: &PoolStats) -> Value {
    json!({
        "name": pool.name,
        "device": pool.device.to_string(),
        "available": pool.available,
        "unavailable_reason": pool.unavailable_reason,
        "workers": pool.workers,
        "queue_depth": pool.queue_depth,
        "queue_capacity": pool.queue_capacity,
        "in_flight": pool.in_flight,
        "requests": pool.requests,
        "executions": pool.executions,
        "executed_rows": pool.executed_rows,
        "cancelled": pool.cancelled,
        "rejected": pool.rejected,
        "errors": pool.errors,
        "latency": pool.latency.iter().map(|b| json!({
            "max_batch": b.max_batch,
            "ewma_us": b.ewma.as_micros() as u64,
            "samples": b.samples,
        })).collect::<Vec<_>>(),
    })
}
