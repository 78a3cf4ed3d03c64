//! The `[[upstreams]]` and `[[prefix_routes]]` tables as written (see
//! [`super::upstream_section`] for the checks and defaults). Kept apart
//! from `raw.rs` so everything about other servers has one home.

use super::one_of::OneOf;
use super::proxy_types::UpstreamKind;
use super::size::ByteSize;
use serde::Deserialize;

/// One `[[upstreams]]` entry: a set of addresses serving the same thing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// Name that prefix routes refer to, and that logs and stats show.
    pub name: String,
    /// `"v2"` (an Open Inference Protocol server) or `"http"` (any app);
    /// default `"http"`.
    pub kind: Option<OneOf<UpstreamKind>>,
    /// `"IP:port"` addresses, at least one.
    pub addrs: Vec<String>,
    /// Connect, first-byte and total timeouts.
    #[serde(default)]
    pub timeouts: RawTimeouts,
    /// Active health checks.
    #[serde(default)]
    pub health: RawHealth,
    /// Per-address circuit breaker.
    #[serde(default)]
    pub breaker: RawBreaker,
    /// Relative cost of one inference, the default of this upstream's models.
    pub cost: Option<f64>,
    /// Accuracy rank, the default of this upstream's models.
    pub quality: Option<u32>,
    /// Idle connections kept open per address, default 64.
    pub max_idle_per_addr: Option<usize>,
    /// Models this (V2) upstream serves under names routes can use.
    #[serde(default)]
    pub models: Vec<RawUpstreamModel>,
}

/// `timeouts = { connect_ms, first_byte_ms, total_ms }`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    /// TCP connect timeout per address, default 1000 ms.
    pub connect_ms: Option<u64>,
    /// Time from sending the request to the response head (and, for prefix
    /// routes, the longest gap between reads), default 30000 ms (v2) or
    /// 60000 ms (http).
    pub first_byte_ms: Option<u64>,
    /// Time for the whole exchange, default 60000 ms (v2) or none (http).
    pub total_ms: Option<u64>,
}

/// `health = { path, interval_ms, timeout_ms, failures, successes, enabled }`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    /// Run health checks, default true.
    pub enabled: Option<bool>,
    /// Path answered with 200 by a healthy address; default
    /// `/v2/health/ready` for v2, none (a TCP connect check) for http.
    pub path: Option<String>,
    /// Time between checks, default 1000 ms.
    pub interval_ms: Option<u64>,
    /// Timeout of one check, default 2000 ms.
    pub timeout_ms: Option<u64>,
    /// Consecutive failed checks that mark an address down, default 2.
    pub failures: Option<usize>,
    /// Consecutive passed checks that mark it up again, default 1.
    pub successes: Option<usize>,
}

/// `breaker = { failures, cool_down_ms }`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    /// Consecutive failed requests that stop traffic to an address, default 3.
    pub failures: Option<u32>,
    /// How long it gets no traffic before one probe request, default 1000 ms.
    pub cool_down_ms: Option<u64>,
}

/// One entry of a V2 upstream's `models = [ ... ]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamModel {
    /// Name in this gateway (routes list it, clients may call it).
    pub name: String,
    /// The model's name on the upstream, default `name`.
    pub model: Option<String>,
    /// The model's version on the upstream; absent = the upstream's default.
    pub version: Option<String>,
    /// Relative cost, default the upstream's `cost`.
    pub cost: Option<f64>,
    /// Accuracy rank, default the upstream's `quality`.
    pub quality: Option<u32>,
}

/// One `[[prefix_routes]]` entry: a path prefix proxied to an upstream.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrefixRoute {
    /// Name for logs and stats.
    pub name: String,
    /// Path prefix, e.g. `/apps/foo/`.
    pub prefix: String,
    /// The `[[upstreams]]` entry that serves it.
    pub upstream: String,
    /// Remove the prefix before forwarding (`/apps/foo/x` -> `/x`), default true.
    pub strip_prefix: Option<bool>,
    /// Forward the client's `Host` instead of the upstream address, default false.
    pub preserve_host: Option<bool>,
    /// Largest request body, default `server.max_body_bytes`.
    pub max_request_bytes: Option<ByteSize>,
    /// Largest response body; absent = no limit.
    pub max_response_bytes: Option<ByteSize>,
    /// Exact-match response cache; absent = off.
    pub cache: Option<RawPrefixCache>,
}

/// A prefix route's `cache = { ... }`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawPrefixCache {
    /// Cache this route's responses, default true when the table is present.
    pub enabled: Option<bool>,
    /// Longest time an entry is served, default 60 s (a shorter
    /// `max-age`/`s-maxage` from the upstream wins).
    pub ttl_s: Option<u64>,
    /// Methods whose responses may be cached, default `["GET", "HEAD"]`.
    pub methods: Option<Vec<String>>,
    /// Request headers that are part of the key, default none.
    pub headers: Option<Vec<String>>,
    /// Cache 200 responses that carry no caching headers, default false
    /// (then only responses with `max-age`/`s-maxage`/`public` are cached).
    pub force: Option<bool>,
    /// Largest request body that is hashed into the key (larger or
    /// unsized bodies bypass the cache), default and at most 64KiB.
    pub max_body_bytes: Option<ByteSize>,
    /// Largest response body stored, default 1MiB.
    pub max_entry_bytes: Option<ByteSize>,
    /// Memory bound of this route's cache, default 64MiB.
    pub max_bytes: Option<ByteSize>,
}
