//! Plain path-prefix routes (`[[prefix_routes]]`): requests under a prefix
//! are proxied by Pingora to an upstream's addresses, streaming in both
//! directions (bodies are never buffered, except the at most 64 KiB read
//! for an opt-in cache lookup), with retries on other addresses, size
//! limits, `X-Forwarded-*` headers and an optional exact-match cache.
//!
//! - [`routes`]: the route table (longest prefix, dot-segments refused)
//!   and upstream paths.
//! - [`phases`]: what each Pingora hook does for these requests.
//! - [`watchdog`]: the response-head deadline Pingora cannot enforce.
//! - [`headers`]: forwarding and hop-by-hop rules.
//! - [`cache`], [`cache_policy`], [`cache_step`]: the opt-in body-keyed
//!   response cache, what it may store and serve (shared-cache rules),
//!   and its part in a request.

pub mod cache;
pub mod cache_policy;
pub mod cache_step;
pub mod headers;
pub mod phases;
pub mod routes;
pub mod watchdog;

pub use phases::{ProxyCtx, Start};
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
