//! `[[prefix_routes]]`: path prefixes proxied to an `[[upstreams]]` entry
//! ([`crate::proxy`]), with their body limits and optional exact-match
//! response cache.

use super::issue::Issues;
use super::schema_default::{some_bool, some_u64};
use super::size::ByteSize;
use super::upstream_section::UpstreamConfig;
use http::{HeaderName, Method};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// Largest request body a cached prefix route can hash: Pingora keeps at
/// most this much of a body to re-send it upstream after it was read.
pub const MAX_CACHED_REQUEST_BODY: usize = 64 << 10;

/// Default longest time a prefix route's cache entry is served.
pub const DEFAULT_PREFIX_TTL_S: u64 = 60;
/// Default methods whose responses a prefix route caches.
pub const DEFAULT_METHODS: [&str; 2] = ["GET", "HEAD"];
/// Default largest response body a prefix route's cache stores: 1 MiB.
pub const DEFAULT_MAX_ENTRY_BYTES: u64 = 1 << 20;
/// Default memory bound of a prefix route's cache: 64 MiB.
pub const DEFAULT_PREFIX_CACHE_BYTES: u64 = 64 << 20;
/// [`MAX_CACHED_REQUEST_BODY`] as a config value (default and most).
const MAX_CACHED_REQUEST_BODY_U64: u64 = MAX_CACHED_REQUEST_BODY as u64;

/// One `[[prefix_routes]]` entry: a path prefix proxied to an upstream.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPrefixRoute {
    /// Name for logs and stats.
    pub name: String,
    /// Path prefix, e.g. `/apps/foo/`.
    pub prefix: String,
    /// The `[[upstreams]]` entry that serves it.
    pub upstream: String,
    /// Remove the prefix before forwarding (`/apps/foo/x` -> `/x`), default true.
    #[schemars(default = "some_bool::<true>")]
    pub strip_prefix: Option<bool>,
    /// Forward the client's `Host` instead of the upstream address, default false.
    #[schemars(default = "some_bool::<false>")]
    pub preserve_host: Option<bool>,
    /// Largest request body, default `server.max_body_bytes`.
    #[schemars(extend("minimum" = 1))]
    pub max_request_bytes: Option<ByteSize>,
    /// Largest response body; absent = no limit.
    #[schemars(extend("minimum" = 1))]
    pub max_response_bytes: Option<ByteSize>,
    /// Exact-match response cache; absent = off.
    pub cache: Option<RawPrefixCache>,
}

/// A prefix route's `cache = { ... }`.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawPrefixCache {
    /// Cache this route's responses, default true when the table is present.
    #[schemars(default = "some_bool::<true>")]
    pub enabled: Option<bool>,
    /// Longest time an entry is served, default 60 s (a shorter
    /// `max-age`/`s-maxage` from the upstream wins).
    #[schemars(default = "some_u64::<DEFAULT_PREFIX_TTL_S>", range(min = 1))]
    pub ttl_s: Option<u64>,
    /// Methods whose responses may be cached, default `["GET", "HEAD"]`.
    #[schemars(default = "default_methods")]
    pub methods: Option<Vec<String>>,
    /// Request headers that are part of the key, default none.
    pub headers: Option<Vec<String>>,
    /// Cache 200 responses that carry no caching headers, default false
    /// (then only responses with `max-age`/`s-maxage`/`public` are cached).
    #[schemars(default = "some_bool::<false>")]
    pub force: Option<bool>,
    /// Largest request body that is hashed into the key (larger or
    /// unsized bodies bypass the cache), default and at most 64KiB.
    #[schemars(default = "some_u64::<MAX_CACHED_REQUEST_BODY_U64>", extend("maximum" = MAX_CACHED_REQUEST_BODY_U64))]
    pub max_body_bytes: Option<ByteSize>,
    /// Largest response body stored, default 1MiB.
    #[schemars(default = "some_u64::<DEFAULT_MAX_ENTRY_BYTES>", extend("minimum" = 1))]
    pub max_entry_bytes: Option<ByteSize>,
    /// Memory bound of this route's cache, default 64MiB.
    #[schemars(default = "some_u64::<DEFAULT_PREFIX_CACHE_BYTES>", extend("minimum" = 1))]
    pub max_bytes: Option<ByteSize>,
}

/// A path prefix proxied to an upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefixRouteConfig {
    /// Its name.
    pub name: String,
    /// The path prefix (starts with `/`).
    pub prefix: String,
    /// The upstream serving it.
    pub upstream: String,
    /// Remove the prefix before forwarding.
    pub strip_prefix: bool,
    /// Forward the client's `Host` rather than the upstream's address.
    pub preserve_host: bool,
    /// Largest request body; beyond it 413.
    pub max_request_bytes: u64,
    /// Largest response body; `None` = no limit.
    pub max_response_bytes: Option<u64>,
    /// The exact-match cache, when enabled.
    pub cache: Option<PrefixCacheConfig>,
}

/// A prefix route's exact-match response cache.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefixCacheConfig {
    /// Longest time an entry is served.
    pub ttl: Duration,
    /// Methods whose responses may be cached.
    pub methods: Vec<Method>,
    /// Request headers in the key, in this order.
    pub headers: Vec<HeaderName>,
    /// Cache 200s that carry no caching headers.
    pub force: bool,
    /// Largest request body hashed into the key.
    pub max_body_bytes: usize,
    /// Largest response body stored.
    pub max_entry_bytes: usize,
    /// Memory bound of the route's cache.
    pub max_bytes: u64,
}

/// Checks every `[[prefix_routes]]` entry against the checked
/// `upstreams`; a route's body limit defaults to
/// `default_max_request_bytes` (`server.max_body_bytes`).
pub fn check(
    raw: &[RawPrefixRoute],
    upstreams: &[UpstreamConfig],
    default_max_request_bytes: u64,
    issues: &mut Issues,
) -> Vec<PrefixRouteConfig> {
    let mut routes: Vec<PrefixRouteConfig> = Vec::new();
    for (i, raw) in raw.iter().enumerate() {
        let path = format!("prefix_routes[{i}]");
        let route = prefix_route(raw, &path, default_max_request_bytes, issues);
        if !upstreams.iter().any(|u| u.name == raw.upstream) {
            issues.push(
                format!("{path}.upstream"),
                format!("no upstream named {:?} in [[upstreams]]", raw.upstream),
            );
        }
        if routes.iter().any(|r| r.name == route.name) {
            issues.push(format!("{path}.name"), format!("duplicate prefix route name {:?}", route.name));
        }
        if routes.iter().any(|r| r.prefix == route.prefix) {
            issues.push(format!("{path}.prefix"), format!("prefix {:?} is used twice", route.prefix));
        }
        routes.push(route);
    }
    routes
}

fn prefix_route(
    raw: &RawPrefixRoute,
    path: &str,
    default_max_request_bytes: u64,
    issues: &mut Issues,
) -> PrefixRouteConfig {
    if raw.name.is_empty() {
        issues.push(format!("{path}.name"), "must be non-empty");
    }
    let prefix = &raw.prefix;
    if !prefix.starts_with('/') || prefix.contains(['?', '#']) {
        issues.push(format!("{path}.prefix"), format!("{prefix:?} must be a path starting with '/'"));
    }
    let trimmed = prefix.trim_end_matches('/');
    if trimmed == "/v2" || trimmed.starts_with("/v2/") {
        issues.push(format!("{path}.prefix"), "paths under /v2 are the gateway's own V2 API");
    }
    let max_request_bytes = raw.max_request_bytes.map_or(default_max_request_bytes, |s| s.0);
    if max_request_bytes == 0 {
        issues.push(format!("{path}.max_request_bytes"), "must be at least 1 byte");
    }
    if raw.max_response_bytes.is_some_and(|s| s.0 == 0) {
        issues.push(format!("{path}.max_response_bytes"), "must be at least 1 byte (or absent)");
    }
    PrefixRouteConfig {
        name: raw.name.clone(),
        prefix: prefix.clone(),
        upstream: raw.upstream.clone(),
        strip_prefix: raw.strip_prefix.unwrap_or(true),
        preserve_host: raw.preserve_host.unwrap_or(false),
        max_request_bytes,
        max_response_bytes: raw.max_response_bytes.map(|s| s.0),
        cache: raw.cache.as_ref().and_then(|c| prefix_cache(c, &format!("{path}.cache"), issues)),
    }
}

/// The schema's `prefix_routes[].cache.methods` default.
fn default_methods() -> Option<[&'static str; 2]> {
    Some(DEFAULT_METHODS)
}

fn prefix_cache(raw: &RawPrefixCache, path: &str, issues: &mut Issues) -> Option<PrefixCacheConfig> {
    if !raw.enabled.unwrap_or(true) {
        return None;
    }
    let default_methods = DEFAULT_METHODS.map(String::from);
    let mut methods = Vec::new();
    for (k, m) in raw.methods.as_deref().unwrap_or(&default_methods).iter().enumerate() {
        match Method::from_bytes(m.to_ascii_uppercase().as_bytes()) {
            Ok(method) => methods.push(method),
            Err(_) => issues.push(format!("{path}.methods[{k}]"), format!("{m:?} is not an HTTP method")),
        }
    }
    let mut headers = Vec::new();
    for (k, h) in raw.headers.iter().flatten().enumerate() {
        match HeaderName::from_bytes(h.as_bytes()) {
            Ok(name) => headers.push(name),
            Err(_) => issues.push(format!("{path}.headers[{k}]"), format!("{h:?} is not a header name")),
        }
    }
    let max_body = raw.max_body_bytes.map_or(MAX_CACHED_REQUEST_BODY_U64, |s| s.0);
    if max_body > MAX_CACHED_REQUEST_BODY_U64 {
        issues.push(
            format!("{path}.max_body_bytes"),
            format!(
                "at most {MAX_CACHED_REQUEST_BODY} bytes (64KiB): larger bodies are streamed, not cached"
            ),
        );
    }
    if raw.ttl_s == Some(0) {
        issues.push(format!("{path}.ttl_s"), "must be at least 1 s (or set enabled = false)");
    }
    let max_entry = raw.max_entry_bytes.map_or(DEFAULT_MAX_ENTRY_BYTES, |s| s.0);
    let max_bytes = raw.max_bytes.map_or(DEFAULT_PREFIX_CACHE_BYTES, |s| s.0);
    if max_entry == 0 || max_bytes == 0 {
        issues.push(path, "max_entry_bytes and max_bytes must be at least 1 byte");
    }
    Some(PrefixCacheConfig {
        ttl: Duration::from_secs(raw.ttl_s.unwrap_or(DEFAULT_PREFIX_TTL_S).max(1)),
        methods,
        headers,
        force: raw.force.unwrap_or(false),
        max_body_bytes: usize::try_from(max_body)
            .unwrap_or(MAX_CACHED_REQUEST_BODY)
            .min(MAX_CACHED_REQUEST_BODY),
        max_entry_bytes: usize::try_from(max_entry).unwrap_or(usize::MAX),
        max_bytes,
    })
}
