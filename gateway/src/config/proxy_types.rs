//! Checked `[[upstreams]]` and `[[prefix_routes]]`: what the upstream
//! registry ([`crate::upstream`]) and the prefix proxy ([`crate::proxy`])
//! run on. Built only by [`super::upstream_section::proxy_config`].

use http::{HeaderName, Method};
use std::net::SocketAddr;
use std::time::Duration;

/// Everything served by other servers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProxyConfig {
    /// Upstream servers, in config order.
    pub upstreams: Vec<UpstreamConfig>,
    /// Path-prefix routes, in config order (matching takes the longest).
    pub prefix_routes: Vec<PrefixRouteConfig>,
}

impl ProxyConfig {
    /// The upstream named `name`.
    pub fn upstream(&self, name: &str) -> Option<&UpstreamConfig> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// The upstream model named `name` and the upstream serving it.
    pub fn upstream_model(&self, name: &str) -> Option<(&UpstreamConfig, &UpstreamModelConfig)> {
        self.upstreams.iter().find_map(|u| u.models.iter().find(|m| m.name == name).map(|m| (u, m)))
    }
}

/// What protocol an upstream speaks (`kind = "v2"` or `"http"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamKind {
    /// An Open Inference Protocol (KServe V2) server: Triton, KServe,
    /// MLServer, another Switchyard. Its models can be route members.
    V2,
    /// Any HTTP app; reachable through prefix routes only.
    Http,
}

impl UpstreamKind {
    /// `v2` or `http`.
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamKind::V2 => "v2",
            UpstreamKind::Http => "http",
        }
    }
}

/// One upstream server: several addresses serving the same thing.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamConfig {
    /// Its name.
    pub name: String,
    /// Its protocol.
    pub kind: UpstreamKind,
    /// Its addresses (at least one, no duplicates).
    pub addrs: Vec<SocketAddr>,
    /// Its timeouts.
    pub timeouts: Timeouts,
    /// Its active health checks.
    pub health: HealthConfig,
    /// Its per-address breaker.
    pub breaker: BreakerConfig,
    /// Idle connections kept per address.
    pub max_idle_per_addr: usize,
    /// The models it serves (V2 only).
    pub models: Vec<UpstreamModelConfig>,
}

/// Upstream timeouts; a V2 call is also bounded by the request's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect, per address tried.
    pub connect: Duration,
    /// From sending the request to the response head; for prefix routes
    /// also the longest gap between two reads.
    pub first_byte: Duration,
    /// The whole exchange; `None` = unbounded (long streams).
    pub total: Option<Duration>,
}

/// Active health checks of every address of an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    /// Whether checks run at all (off: every address counts as healthy and
    /// only the breaker takes failing addresses out).
    pub enabled: bool,
    /// `GET` path that must answer 200; `None` = a TCP connect check.
    pub path: Option<String>,
    /// Time between two checks of an address.
    pub interval: Duration,
    /// Timeout of one check.
    pub timeout: Duration,
    /// Consecutive failed checks that mark an address down.
    pub failures: usize,
    /// Consecutive passed checks that mark it up again.
    pub successes: usize,
}

/// The per-address circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failed requests that open it.
    pub failures: u32,
    /// How long an open breaker sends nothing before one probe.
    pub cool_down: Duration,
}

/// A model of a V2 upstream, usable as a route member.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamModelConfig {
    /// Its name in this gateway.
    pub name: String,
    /// Its name on the upstream.
    pub remote: String,
    /// Its version on the upstream (`None`: the upstream's default).
    pub version: Option<String>,
    /// Relative cost (the model's, else the upstream's), if configured.
    pub cost: Option<f64>,
    /// Accuracy rank (the model's, else the upstream's), if configured.
    pub quality: Option<u32>,
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
