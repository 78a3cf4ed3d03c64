//! Prometheus metrics, served as text on the admin listener's `/metrics`.
//!
//! Two sources, one page:
//! - [`requests`]: counted on the request path into a process-wide
//!   registry: requests by route, endpoint and status, request durations,
//!   upstream attempts. [`record_request`] runs once per request in the
//!   app's `logging` phase; [`upstream_attempt`] once per attempt on an
//!   upstream address (V2 calls and proxied requests), from
//!   [`crate::upstream::observe::attempt_finished`].
//! - [`scrape`]: read when `/metrics` is scraped from counters other
//!   modules already keep (runtime pools and models, cache tiers, routing
//!   decisions, admission), so nothing is counted twice and the request
//!   path pays nothing for them.
//!
//! Labels are low-cardinality by construction: routes, models, pools and
//! upstreams come from the config; devices, endpoints, statuses, reasons,
//! tiers and states from closed sets. Never request ids or tenants. Every
//! metric is listed in the README's Metrics section.

pub mod connections;
pub mod family;
pub mod requests;
pub mod scrape;

pub use requests::{record_request, upstream_attempt, RequestLabels};

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
    // The admission semaphore is sized once (a restart-only setting).
    let limit = snap.config.server.limits.max_concurrent_requests;
    let in_flight = limit.saturating_sub(state.limiter.available_permits());
    families.extend(scrape::admission_families(in_flight, limit));
    families.extend(connections::connection_families(&state.connections.snapshot(), state.lifecycle.cut()));
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
