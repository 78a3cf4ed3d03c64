//! `[[upstreams]]`: other servers (V2 model servers and plain HTTP apps),
//! their addresses, timeouts, health checks, breakers and V2 models, with
//! field-path errors like every other config problem. Prefix routes to
//! them are [`super::prefix_route_section`].
//!
//! Defaults, by upstream `kind`:
//!
//! | field | `v2` | `http` |
//! |---|---|---|
//! | `timeouts.connect_ms` | 1000 | 1000 |
//! | `timeouts.first_byte_ms` | 30000 | 60000 |
//! | `timeouts.total_ms` | 60000 | none (streams) |
//! | `health.path` | `/v2/health/ready` | none: TCP connect check |
//!
//! Addresses written `https://host:port` are reached over TLS (settings
//! in `tls = { ... }`, [`super::client_tls_section`]); every address of
//! one upstream has the same scheme.

use super::client_tls_section::{self, ClientTls, RawClientTls};
use super::issue::Issues;
use super::one_of::OneOf;
use super::schema_default::{some_bool, some_u32, some_u64, some_usize};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// Default protocol of an upstream.
pub const DEFAULT_KIND: UpstreamKind = UpstreamKind::Http;
/// Default tensor encoding of a V2 upstream's requests.
pub const DEFAULT_TENSORS: TensorEncoding = TensorEncoding::Auto;
/// Default idle connections kept open per address.
pub const DEFAULT_MAX_IDLE_PER_ADDR: usize = 64;
/// Default TCP connect timeout per address.
pub const DEFAULT_CONNECT_MS: u64 = 1000;
/// Default time between health checks.
pub const DEFAULT_HEALTH_INTERVAL_MS: u64 = 1000;
/// Default timeout of one health check.
pub const DEFAULT_HEALTH_TIMEOUT_MS: u64 = 2000;
/// Default consecutive failed checks that mark an address down.
pub const DEFAULT_HEALTH_FAILURES: usize = 2;
/// Default consecutive passed checks that mark it up again.
pub const DEFAULT_HEALTH_SUCCESSES: usize = 1;
/// Default consecutive failed requests that open an address's breaker.
pub const DEFAULT_BREAKER_FAILURES: u32 = 3;
/// Default time an open breaker gives no traffic before a probe.
pub const DEFAULT_BREAKER_COOL_DOWN_MS: u64 = 1000;

/// One `[[upstreams]]` entry: a set of addresses serving the same thing.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// Name that prefix routes refer to, and that logs and stats show.
    pub name: String,
    /// `"v2"` (an Open Inference Protocol server) or `"http"` (any app);
    /// default `"http"`.
    #[schemars(default = "default_kind")]
    pub kind: Option<OneOf<UpstreamKind>>,
    /// `"IP:port"` or `"name:port"` addresses, at least one; written
    /// `"https://host:port"`, the address is reached over TLS.
    pub addrs: Vec<String>,
    /// TLS to `https://` addresses: CA, client certificate, server name,
    /// verification; default the system roots and each address's host.
    pub tls: Option<RawClientTls>,
    /// Connect, first-byte and total timeouts.
    #[serde(default)]
    pub timeouts: RawTimeouts,
    /// Active health checks.
    #[serde(default)]
    pub health: RawHealth,
    /// Per-address circuit breaker.
    #[serde(default)]
    pub breaker: RawBreaker,
    #[schemars(extend("exclusiveMinimum" = 0))]
    /// Relative cost of one inference, the default of this upstream's models.
    pub cost: Option<f64>,
    /// Accuracy rank, the default of this upstream's models.
    pub quality: Option<u32>,
    /// Idle connections kept open per address, default 64.
    #[schemars(default = "some_usize::<DEFAULT_MAX_IDLE_PER_ADDR>")]
    pub max_idle_per_addr: Option<usize>,
    /// How requests carry their tensors (V2): `"auto"` (default),
    /// `"binary"` or `"json"`.
    #[schemars(default = "default_tensors")]
    pub tensors: Option<OneOf<TensorEncoding>>,
    /// Models this (V2) upstream serves under names routes can use.
    #[serde(default)]
    pub models: Vec<RawUpstreamModel>,
}

/// `timeouts = { connect_ms, first_byte_ms, total_ms }`.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    /// TCP connect timeout per address, default 1000 ms.
    #[schemars(default = "some_u64::<DEFAULT_CONNECT_MS>", range(min = 1))]
    pub connect_ms: Option<u64>,
    /// Time from sending the request to the response head (and, for prefix
    /// routes, the longest gap between reads), default 30000 ms (v2) or
    /// 60000 ms (http).
    #[schemars(range(min = 1))]
    pub first_byte_ms: Option<u64>,
    /// Time for the whole exchange, default 60000 ms (v2) or none (http).
    #[schemars(range(min = 1))]
    pub total_ms: Option<u64>,
}

/// `health = { path, interval_ms, timeout_ms, failures, successes, enabled }`.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    #[schemars(default = "some_bool::<true>")]
    /// Run health checks, default true.
    pub enabled: Option<bool>,
    /// Path answered with 200 by a healthy address; default
    /// `/v2/health/ready` for v2, none (a TCP connect check) for http.
    pub path: Option<String>,
    #[schemars(default = "some_u64::<DEFAULT_HEALTH_INTERVAL_MS>", range(min = 1))]
    /// Time between checks, default 1000 ms.
    pub interval_ms: Option<u64>,
    #[schemars(default = "some_u64::<DEFAULT_HEALTH_TIMEOUT_MS>", range(min = 1))]
    /// Timeout of one check, default 2000 ms.
    pub timeout_ms: Option<u64>,
    /// Consecutive failed checks that mark an address down, default 2.
    #[schemars(default = "some_usize::<DEFAULT_HEALTH_FAILURES>", range(min = 1))]
    pub failures: Option<usize>,
    /// Consecutive passed checks that mark it up again, default 1.
    #[schemars(default = "some_usize::<DEFAULT_HEALTH_SUCCESSES>", range(min = 1))]
    pub successes: Option<usize>,
}

/// `breaker = { failures, cool_down_ms }`.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    /// Consecutive failed requests that stop traffic to an address, default 3.
    #[schemars(default = "some_u32::<DEFAULT_BREAKER_FAILURES>", range(min = 1))]
    pub failures: Option<u32>,
    /// How long it gets no traffic before one probe request, default 1000 ms.
    #[schemars(default = "some_u64::<DEFAULT_BREAKER_COOL_DOWN_MS>", range(min = 1))]
    pub cool_down_ms: Option<u64>,
}

/// One entry of a V2 upstream's `models = [ ... ]`.
#[derive(Debug, Deserialize, JsonSchema)]
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

/// What protocol an upstream speaks (`kind = "v2"` or `"http"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
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

/// How a V2 upstream's requests carry their tensors (`tensors = ...`).
/// Every V2 server reads JSON tensors; Triton's binary tensor extension
/// is smaller and cheaper to encode, but not every server has it
/// (MLServer's REST API does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TensorEncoding {
    /// Binary when the server lists `binary_tensor_data` among the
    /// extensions of its `GET /v2` (read with the models' metadata), JSON
    /// until then or when it does not.
    Auto,
    /// Always binary tensors.
    Binary,
    /// Always JSON tensors.
    Json,
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
    /// How its requests carry their tensors (V2 only).
    pub tensors: TensorEncoding,
    /// The models it serves (V2 only).
    pub models: Vec<UpstreamModelConfig>,
    /// TLS, when its addresses are `https://`.
    pub tls: Option<UpstreamTls>,
}

/// TLS to an upstream's addresses.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTls {
    /// Roots, client certificate, verification.
    pub settings: ClientTls,
    /// The host each address was written with (a name it was resolved
    /// from, or the IP), the default SNI.
    pub hosts: Vec<(SocketAddr, String)>,
}

impl UpstreamTls {
    /// The name sent as SNI to `addr` and checked against its
    /// certificate: `server_name`, else the host the address was written with.
    pub fn server_name(&self, addr: SocketAddr) -> String {
        if let Some(name) = &self.settings.server_name {
            return name.clone();
        }
        self.hosts.iter().find(|(a, _)| *a == addr).map_or_else(|| addr.ip().to_string(), |(_, h)| h.clone())
    }
}

impl UpstreamTls {
    /// The `Host` header for requests to `addr`: its server name and port
    /// (the name the certificate was checked against, as servers that pick
    /// a virtual host by name expect; the port left out when 443).
    pub fn host_header(&self, addr: SocketAddr) -> String {
        let name = self.server_name(addr);
        let name = if name.parse::<std::net::Ipv6Addr>().is_ok() { format!("[{name}]") } else { name };
        match addr.port() {
            443 => name,
            port => format!("{name}:{port}"),
        }
    }
}

impl UpstreamConfig {
    /// The `Host` header for requests to `addr`: the TLS server name and
    /// port for an `https://` upstream, else the address.
    pub fn host_header(&self, addr: SocketAddr) -> String {
        self.tls.as_ref().map_or_else(|| addr.to_string(), |tls| tls.host_header(addr))
    }

    /// `https` for a TLS upstream, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }
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

/// Checks every `[[upstreams]]` entry. `model_names` holds the
/// `[[models]]` names; the upstream models' names are added to it (so
/// routes may list them) and must not collide with it.
pub fn check(
    raw: &[RawUpstream],
    model_names: &mut HashSet<String>,
    base_dir: &Path,
    issues: &mut Issues,
) -> Vec<UpstreamConfig> {
    let mut checked: Vec<UpstreamConfig> = Vec::new();
    for (i, raw) in raw.iter().enumerate() {
        let path = format!("upstreams[{i}]");
        if checked.iter().any(|u| u.name == raw.name) {
            issues.push(format!("{path}.name"), format!("duplicate upstream name {:?}", raw.name));
        }
        if let Some(upstream) = upstream_config(raw, &path, model_names, base_dir, issues) {
            checked.push(upstream);
        }
    }
    checked
}

fn upstream_config(
    raw: &RawUpstream,
    path: &str,
    model_names: &mut HashSet<String>,
    base_dir: &Path,
    issues: &mut Issues,
) -> Option<UpstreamConfig> {
    if raw.name.is_empty() || raw.name.contains('/') {
        issues.push(format!("{path}.name"), "must be non-empty and contain no '/'");
    }
    let kind = match &raw.kind {
        Some(kind) => kind.check("kind", format!("{path}.kind"), issues)?,
        None => DEFAULT_KIND,
    };
    let (addrs, hosts, https) = addresses(&raw.addrs, path, issues);
    let tls = upstream_tls(raw.tls.as_ref(), https, hosts, base_dir, path, issues);
    let cost = issues.cost(raw.cost, format!("{path}.cost"));
    if kind == UpstreamKind::Http && !raw.models.is_empty() {
        issues.push(format!("{path}.models"), "only a kind = \"v2\" upstream serves models");
    }
    if kind == UpstreamKind::Http && raw.tensors.is_some() {
        issues.push(format!("{path}.tensors"), "only a kind = \"v2\" upstream takes tensors");
    }
    let tensors = match &raw.tensors {
        Some(tensors) => tensors.check("tensor encoding", format!("{path}.tensors"), issues)?,
        None => DEFAULT_TENSORS,
    };
    let mut models = Vec::new();
    for (j, m) in raw.models.iter().enumerate() {
        let field = format!("{path}.models[{j}]");
        if m.name.is_empty() || m.name.contains('/') {
            issues.push(format!("{field}.name"), "must be non-empty and contain no '/'");
        }
        if !model_names.insert(m.name.clone()) {
            issues.push(format!("{field}.name"), format!("{:?} is already a model name", m.name));
        }
        models.push(UpstreamModelConfig {
            name: m.name.clone(),
            remote: m.model.clone().unwrap_or_else(|| m.name.clone()),
            version: m.version.clone(),
            cost: issues.cost(m.cost, format!("{field}.cost")).or(cost),
            quality: m.quality.or(raw.quality),
        });
    }
    Some(UpstreamConfig {
        name: raw.name.clone(),
        kind,
        addrs,
        timeouts: timeouts(&raw.timeouts, kind, &format!("{path}.timeouts"), issues),
        health: health(&raw.health, kind, &format!("{path}.health"), issues),
        breaker: breaker(&raw.breaker, &format!("{path}.breaker"), issues),
        max_idle_per_addr: raw.max_idle_per_addr.unwrap_or(DEFAULT_MAX_IDLE_PER_ADDR),
        tensors,
        models,
        tls,
    })
}

/// `tls` of an upstream whose addresses are `https://` (`https`).
fn upstream_tls(
    raw: Option<&RawClientTls>,
    https: bool,
    hosts: Vec<(SocketAddr, String)>,
    base_dir: &Path,
    path: &str,
    issues: &mut Issues,
) -> Option<UpstreamTls> {
    if !https {
        if raw.is_some() {
            issues.push(
                format!("{path}.tls"),
                "set, but the addresses are not https://: write \"https://host:port\"",
            );
        }
        return None;
    }
    let default = RawClientTls::default();
    let raw = raw.unwrap_or(&default);
    let settings = client_tls_section::check(raw, base_dir, &format!("{path}.tls"), issues)?;
    Some(UpstreamTls { settings, hosts })
}

/// `addrs`: `IP:port`, or `name:port` resolved now (at start-up; every
/// address the name has, e.g. a Kubernetes Service's cluster IP), each
/// optionally `https://` (or `http://`). Returns the addresses, the host
/// each was written with, and whether they are `https://`.
fn addresses(
    raw: &[String],
    path: &str,
    issues: &mut Issues,
) -> (Vec<SocketAddr>, Vec<(SocketAddr, String)>, bool) {
    if raw.is_empty() {
        issues.push(format!("{path}.addrs"), "needs at least one address like \"127.0.0.1:8100\"");
    }
    let https = raw.first().is_some_and(|t| t.starts_with("https://"));
    let mut addrs: Vec<SocketAddr> = Vec::new();
    let mut hosts: Vec<(SocketAddr, String)> = Vec::new();
    for (k, text) in raw.iter().enumerate() {
        let at = format!("{path}.addrs[{k}]");
        let (tls, bare) = match (text.strip_prefix("https://"), text.strip_prefix("http://")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => (false, text.as_str()),
        };
        if tls != https {
            issues.push(&at, "mixes https:// and plain addresses: one upstream's addresses share one scheme");
            continue;
        }
        let bare = bare.strip_suffix('/').unwrap_or(bare);
        let found = match bare.parse::<SocketAddr>() {
            Ok(addr) => vec![(addr, addr.ip().to_string())],
            Err(_) => match resolve(bare) {
                Ok(resolved) => {
                    let host = bare.rsplit_once(':').map_or(bare, |(h, _)| h).to_string();
                    resolved.into_iter().map(|a| (a, host.clone())).collect()
                }
                Err(why) => {
                    issues.push(at, why);
                    continue;
                }
            },
        };
        if let [(addr, _)] = found.as_slice() {
            if addrs.contains(addr) {
                issues.push(at, format!("{text:?} is listed twice"));
                continue;
            }
        }
        for (addr, host) in found {
            if !addrs.contains(&addr) {
                addrs.push(addr);
                hosts.push((addr, host));
            }
        }
    }
    (addrs, hosts, https)
}

/// The addresses of `host:port` (a name; IPs are parsed before this).
fn resolve(text: &str) -> Result<Vec<SocketAddr>, String> {
    let shown = super::redact::redact_url(text);
    let usage = format!("{shown:?} is not an address like \"127.0.0.1:8100\" or \"name:8100\"");
    let Some((host, port)) = text.rsplit_once(':') else { return Err(usage) };
    let valid_host = !host.is_empty()
        && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_');
    if !valid_host || port.parse::<u16>().is_err() {
        return Err(usage);
    }
    match super::resolver::lookup(text) {
        Ok(found) => {
            if found.is_empty() {
                Err(format!("{shown:?}: the name has no address"))
            } else {
                Ok(found)
            }
        }
        Err(e) => Err(format!("{shown:?}: cannot resolve {host:?}: {e}")),
    }
}

fn timeouts(raw: &RawTimeouts, kind: UpstreamKind, path: &str, issues: &mut Issues) -> Timeouts {
    let (first_byte, total) = match kind {
        UpstreamKind::V2 => (30_000, Some(60_000)),
        UpstreamKind::Http => (60_000, None),
    };
    Timeouts {
        connect: issues.millis(raw.connect_ms, DEFAULT_CONNECT_MS, format!("{path}.connect_ms")),
        first_byte: issues.millis(raw.first_byte_ms, first_byte, format!("{path}.first_byte_ms")),
        total: raw.total_ms.or(total).map(|ms| issues.millis(Some(ms), ms, format!("{path}.total_ms"))),
    }
}

fn health(raw: &RawHealth, kind: UpstreamKind, path: &str, issues: &mut Issues) -> HealthConfig {
    let default_path = (kind == UpstreamKind::V2).then(|| "/v2/health/ready".to_string());
    let check_path = raw.path.clone().or(default_path);
    if check_path.as_deref().is_some_and(|p| !p.starts_with('/')) {
        issues.push(format!("{path}.path"), "must start with '/'");
    }
    let failures = issues.positive(raw.failures, DEFAULT_HEALTH_FAILURES, format!("{path}.failures"));
    let successes = issues.positive(raw.successes, DEFAULT_HEALTH_SUCCESSES, format!("{path}.successes"));
    HealthConfig {
        enabled: raw.enabled.unwrap_or(true),
        path: check_path,
        interval: issues.millis(raw.interval_ms, DEFAULT_HEALTH_INTERVAL_MS, format!("{path}.interval_ms")),
        timeout: issues.millis(raw.timeout_ms, DEFAULT_HEALTH_TIMEOUT_MS, format!("{path}.timeout_ms")),
        failures,
        successes,
    }
}

fn breaker(raw: &RawBreaker, path: &str, issues: &mut Issues) -> BreakerConfig {
    if raw.failures == Some(0) {
        issues.push(format!("{path}.failures"), "must be at least 1");
    }
    BreakerConfig {
        failures: raw.failures.unwrap_or(DEFAULT_BREAKER_FAILURES).max(1),
        cool_down: issues.millis(
            raw.cool_down_ms,
            DEFAULT_BREAKER_COOL_DOWN_MS,
            format!("{path}.cool_down_ms"),
        ),
    }
}

/// The schema's `upstreams[].kind` default.
fn default_kind() -> Option<&'static str> {
    Some(DEFAULT_KIND.as_str())
}

/// The schema's `upstreams[].tensors` default.
fn default_tensors() -> Option<&'static str> {
    Some(match DEFAULT_TENSORS {
        TensorEncoding::Auto => "auto",
        TensorEncoding::Binary => "binary",
        TensorEncoding::Json => "json",
    })
}

/// The upstream model named `name` and the upstream serving it.
pub fn find_model<'a>(
    upstreams: &'a [UpstreamConfig],
    name: &str,
) -> Option<(&'a UpstreamConfig, &'a UpstreamModelConfig)> {
    upstreams.iter().find_map(|u| u.models.iter().find(|m| m.name == name).map(|m| (u, m)))
}

#[cfg(test)]
mod tests;
