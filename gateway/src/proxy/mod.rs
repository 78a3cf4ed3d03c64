//! Plain path-prefix routes (`[[prefix_routes]]`): requests under a prefix
//! are proxied by Pingora to an upstream's addresses, streaming in both
//! directions (bodies are never buffered, except the at most 64 KiB read
//! for an opt-in cache lookup), with retries on other addresses, size
//! limits, `X-Forwarded-*` headers and an optional exact-match cache.
//!
//! - [`crate::prefix`]: the route table (longest prefix, dot-segments
//!   refused), upstream paths, and the routes' caches with their
//!   shared-cache rules.
//! - [`phases`]: what each Pingora hook does for these requests.
//! - [`watchdog`]: the response-head deadline Pingora cannot enforce.
//! - [`headers`]: forwarding and hop-by-hop rules.
//! - [`http_cache_step`]: the opt-in body-keyed response cache's part in a
//!   request (lookup, fill).

pub mod headers;
pub mod http_cache_step;
pub mod phases;
pub mod watchdog;

pub use phases::{ProxyCtx, Start};
