//! Checks `[[upstreams]]` (servers, their addresses, timeouts, health
//! checks, breakers and V2 models) and `[[prefix_routes]]` (paths proxied
//! to them), with field-path errors like every other config problem.
//!
//! Defaults, by upstream `kind`:
//!
//! | field | `v2` | `http` |
//! |---|---|---|
//! | `timeouts.connect_ms` | 1000 | 1000 |
//! | `timeouts.first_byte_ms` | 30000 | 60000 |
//! | `timeouts.total_ms` | 60000 | none (streams) |
//! | `health.path` | `/v2/health/ready` | none: TCP connect check |

use super::issue::Issues;
use super::proxy_raw::{RawBreaker, RawHealth, RawPrefixCache, RawPrefixRoute, RawTimeouts, RawUpstream};
use super::proxy_types::{
    BreakerConfig, HealthConfig, PrefixCacheConfig, PrefixRouteConfig, ProxyConfig, Timeouts, UpstreamConfig,
    UpstreamKind, UpstreamModelConfig,
};
use super::types::RouteConfig;
use http::{HeaderName, Method};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

/// Largest request body a cached prefix route can hash: Pingora keeps at
/// most this much of a body to re-send it upstream after it was read.
pub const MAX_CACHED_REQUEST_BODY: usize = 64 << 10;

/// Checks both tables. `model_names` holds the `[[models]]` names; the
/// upstream models' names are added to it (so routes may list them) and
/// must not collide with it.
pub fn proxy_config(
    upstreams: &[RawUpstream],
    prefix_routes: &[RawPrefixRoute],
    default_max_request_bytes: u64,
    model_names: &mut HashSet<String>,
    issues: &mut Issues,
) -> ProxyConfig {
    let mut checked: Vec<UpstreamConfig> = Vec::new();
    for (i, raw) in upstreams.iter().enumerate() {
        let path = format!("upstreams[{i}]");
        if checked.iter().any(|u| u.name == raw.name) {
            issues.push(format!("{path}.name"), format!("duplicate upstream name {:?}", raw.name));
        }
        if let Some(upstream) = upstream_config(raw, &path, model_names, issues) {
            checked.push(upstream);
        }
    }
    let mut routes: Vec<PrefixRouteConfig> = Vec::new();
    for (i, raw) in prefix_routes.iter().enumerate() {
        let path = format!("prefix_routes[{i}]");
        let route = prefix_route(raw, &path, default_max_request_bytes, issues);
        if !checked.iter().any(|u| u.name == raw.upstream) {
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
    ProxyConfig { upstreams: checked, prefix_routes: routes }
}

fn upstream_config(
    raw: &RawUpstream,
    path: &str,
    model_names: &mut HashSet<String>,
    issues: &mut Issues,
) -> Option<UpstreamConfig> {
    if raw.name.is_empty() || raw.name.contains('/') {
        issues.push(format!("{path}.name"), "must be non-empty and contain no '/'");
    }
    let kind = match &raw.kind {
        Some(kind) => kind.check("kind", format!("{path}.kind"), issues)?,
        None => UpstreamKind::Http,
    };
    let addrs = addresses(&raw.addrs, path, issues);
    let cost = check_cost(raw.cost, &format!("{path}.cost"), issues);
    if kind == UpstreamKind::Http && !raw.models.is_empty() {
        issues.push(format!("{path}.models"), "only a kind = \"v2\" upstream serves models");
    }
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
            cost: check_cost(m.cost, &format!("{field}.cost"), issues).or(cost),
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
        max_idle_per_addr: raw.max_idle_per_addr.unwrap_or(64),
        models,
    })
}

/// `addrs`: `IP:port`, or `name:port` resolved now (at start-up; every
/// address the name has, e.g. a Kubernetes Service's cluster IP).
fn addresses(raw: &[String], path: &str, issues: &mut Issues) -> Vec<SocketAddr> {
    if raw.is_empty() {
        issues.push(format!("{path}.addrs"), "needs at least one address like \"127.0.0.1:8100\"");
    }
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for (k, text) in raw.iter().enumerate() {
        let at = format!("{path}.addrs[{k}]");
        match text.parse::<SocketAddr>() {
            Ok(addr) if addrs.contains(&addr) => issues.push(at, format!("{text:?} is listed twice")),
            Ok(addr) => addrs.push(addr),
            Err(_) => match resolve(text) {
                Ok(resolved) => {
                    addrs.extend(resolved.into_iter().filter(|a| !addrs.contains(a)).collect::<Vec<_>>())
                }
                Err(why) => issues.push(at, why),
            },
        }
    }
    addrs
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
        connect: issues.millis(raw.connect_ms, 1_000, format!("{path}.connect_ms")),
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
    let failures = issues.positive(raw.failures, 2, format!("{path}.failures"));
    let successes = issues.positive(raw.successes, 1, format!("{path}.successes"));
    HealthConfig {
        enabled: raw.enabled.unwrap_or(true),
        path: check_path,
        interval: issues.millis(raw.interval_ms, 1_000, format!("{path}.interval_ms")),
        timeout: issues.millis(raw.timeout_ms, 2_000, format!("{path}.timeout_ms")),
        failures,
        successes,
    }
}

fn breaker(raw: &RawBreaker, path: &str, issues: &mut Issues) -> BreakerConfig {
    if raw.failures == Some(0) {
        issues.push(format!("{path}.failures"), "must be at least 1");
    }
    BreakerConfig {
        failures: raw.failures.unwrap_or(3).max(1),
        cool_down: issues.millis(raw.cool_down_ms, 1_000, format!("{path}.cool_down_ms")),
    }
}

fn check_cost(cost: Option<f64>, path: &str, issues: &mut Issues) -> Option<f64> {
    if let Some(c) = cost.filter(|c| !(c.is_finite() && *c > 0.0)) {
        issues.push(path, format!("must be a finite number > 0, got {c}"));
    }
    cost
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

fn prefix_cache(raw: &RawPrefixCache, path: &str, issues: &mut Issues) -> Option<PrefixCacheConfig> {
    if !raw.enabled.unwrap_or(true) {
        return None;
    }
    let default_methods = ["GET".to_string(), "HEAD".to_string()];
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
    let max_body = raw.max_body_bytes.map_or(MAX_CACHED_REQUEST_BODY as u64, |s| s.0);
    if max_body > MAX_CACHED_REQUEST_BODY as u64 {
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
    let max_entry = raw.max_entry_bytes.map_or(1 << 20, |s| s.0);
    let max_bytes = raw.max_bytes.map_or(64 << 20, |s| s.0);
    if max_entry == 0 || max_bytes == 0 {
        issues.push(path, "max_entry_bytes and max_bytes must be at least 1 byte");
    }
    Some(PrefixCacheConfig {
        ttl: Duration::from_secs(raw.ttl_s.unwrap_or(60).max(1)),
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

/// Adds the identity of the route's upstream models (upstream, remote
/// name and version) to its fingerprint, so that pointing a model at
/// another upstream never serves cached answers of the old one.
pub fn with_upstream_fingerprint(mut route: RouteConfig, proxy: &ProxyConfig) -> RouteConfig {
    for name in &route.models {
        if let Some((upstream, model)) = proxy.upstream_model(name) {
            route.fingerprint.push_str(&format!(
                "|{}@upstream:{}:{}:{}",
                model.name,
                upstream.name,
                model.remote,
                model.version.as_deref().unwrap_or("")
            ));
        }
    }
    route
}

#[cfg(test)]
#[path = "tests_proxy.rs"]
mod tests;
