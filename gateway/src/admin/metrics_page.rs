//! `GET /metrics` on the admin listener: every metric family in the
//! Prometheus text format. The request-path counters come from
//! [`crate::metrics`]; the rest is read at scrape time from the counters
//! the runtime, the cache, routing, admission and the connection table
//! already keep ([`super::scrape`]).

use super::scrape;
use crate::metrics::{classes, connections, requests, tls};
use crate::reply::Reply;
use crate::state::AppState;
use prometheus::{Encoder, TextEncoder};

/// `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Every metric family, request-path ones first.
pub fn gather(state: &AppState) -> Vec<prometheus::proto::MetricFamily> {
    let snap = state.snapshot.load();
    let mut families = requests::gather();
    families.extend(scrape::runtime_families(&snap.repo.stats()));
    families.extend(scrape::cache_families(&state.cache.snapshot()));
    families.extend(scrape::decision_families(&state.decisions.snapshot()));
    families.extend(scrape::budget_families(&state.budget_misses.snapshot()));
    families.extend(scrape::record_families(&state.recorders.stats(), state.recorders.queued_bytes()));
    families.extend(scrape::calibration_families(&state.calibration.views()));
    families.extend(crate::tenants::families::tenant_families(&state.tenants, &snap.tenants));
    families.extend(classes::class_families(&classes::CLASSES));
    families.extend(super::rollout_metrics::rollout_families(&state.rollouts.views()));
    // The admission semaphore is sized once (a restart-only setting).
    let limit = snap.config.server.limits.max_concurrent_requests;
    let in_flight = limit.saturating_sub(state.limiter.available_permits());
    families.extend(scrape::admission_families(in_flight, limit));
    let mut listeners = vec![("api", state.connections.snapshot())];
    if snap.config.server.grpc_listen.is_some() {
        listeners.push(("grpc", state.grpc_connections.snapshot()));
    }
    families.extend(connections::connection_families(&listeners, state.lifecycle.cut()));
    families.extend(tls::tls_families(&snap.config.server.tls));
    families
}

/// The `/metrics` page: every family in the text format.
pub fn render(state: &AppState) -> Result<String, prometheus::Error> {
    let mut out = Vec::with_capacity(16 * 1024);
    TextEncoder::new().encode(&gather(state), &mut out)?;
    String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
}

/// The admin listener's answer to `GET /metrics`.
pub fn reply(state: &AppState) -> Reply {
    match render(state) {
        Ok(text) => {
            let mut reply = Reply::json(200, text);
            reply.content_type = CONTENT_TYPE;
            reply
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot encode metrics");
            let mut reply = Reply::json(500, format!("cannot encode metrics: {e}\n"));
            reply.content_type = "text/plain; charset=utf-8";
            reply
        }
    }
}
