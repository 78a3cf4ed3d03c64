//! The prefix-route table (`[[prefix_routes]]`): which route a path
//! belongs to, the path its upstream sees, and each route's optional
//! exact-match response cache with the shared-cache rules (RFC 9111) that
//! decide what it may store and whom it may serve. Pure decisions over
//! config and upstreams; the Pingora phases that proxy a request are in
//! [`crate::proxy`].
//!
//! - [`routes`]: the table and upstream paths.
//! - [`http_cache`]: a route's HTTP response cache and its keys.
//! - [`http_cache_policy`], [`sharing`]: what may be stored, for whom.

pub mod http_cache;
pub mod http_cache_policy;
pub mod routes;
pub mod sharing;

pub use routes::{PrefixRoute, PrefixRoutes};

use serde_json::{json, Value};
use std::sync::atomic::Ordering;

/// The `"prefix_routes"` block of `GET /admin/stats`.
pub fn stats_json(routes: &PrefixRoutes) -> Value {
    Value::Array(
        routes
            .iter()
            .map(|r| {
                let cache = r.cache.as_ref().map(|c| {
                    json!({
                        "hits": c.stats.hits.load(Ordering::Relaxed),
                        "misses": c.stats.misses.load(Ordering::Relaxed),
                        "bypass": c.stats.bypass.load(Ordering::Relaxed),
                        "stores": c.stats.stores.load(Ordering::Relaxed),
                        "entries": c.entries(),
                    })
                });
                json!({
                    "name": r.config.name,
                    "prefix": r.config.prefix,
                    "upstream": r.config.upstream,
                    "cache": cache,
                })
            })
            .collect(),
    )
}
