//! Turns a [`RawConfig`] into a checked [`Config`], collecting every
//! problem with the field path it concerns (`models[2].pools[0].device`),
//! so an operator sees all mistakes at once.

use super::connections_section::{connection_limits, RawConnections};
use super::grpc_section::{grpc_limits, Bounds, RawGrpcLimits};
use super::issue::{ConfigIssue, Issues};
use super::raw::{RawBatching, RawConfig, RawModel, RawPool, RawRoute, RawServer};
use super::types::{Config, Limits, ModelRouting, RouteConfig, ServerConfig};
use router_policies::{FixedPolicy, PolicyConfig};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use switchyard_runtime::{BatchingSpec, DeviceKind, ModelSpec, PoolSpec, RequestLimits};

/// Checks `raw`; relative model paths are resolved against `base_dir`
/// joined with the repository folder.
pub fn validate(raw: RawConfig, base_dir: &Path) -> Result<Config, Vec<ConfigIssue>> {
    let mut issues = Issues::default();
    let server = server_config(&raw.server, &mut issues);
    let repo_dir = base_dir.join(raw.repository.path.as_deref().unwrap_or("models"));
    let mut names = HashSet::new();
    let mut models = Vec::new();
    let mut model_routing = HashMap::new();
    for (i, model) in raw.models.iter().enumerate() {
        model_routing.insert(model.name.clone(), routing_of(model, &format!("models[{i}]"), &mut issues));
        if !names.insert(model.name.clone()) {
            issues.push(format!("models[{i}].name"), format!("duplicate model name {:?}", model.name));
        }
        models.push(model_spec(model, &repo_dir, &format!("models[{i}]"), &mut issues));
    }
    let max_body = server.as_ref().map_or(64 << 20, |s| s.limits.max_body_bytes as u64);
    let proxy = super::upstream_section::proxy_config(
        &raw.upstreams,
        &raw.prefix_routes,
        max_body,
        &mut names,
        &mut issues,
    );
    let mut routes = Vec::new();
    let mut recorded = Vec::new();
    for (i, route) in raw.routes.iter().enumerate() {
        let path = format!("routes[{i}]");
        super::cache_section::check_fleet_coalescing(
            raw.cache.as_ref(),
            route.cache.as_ref(),
            &path,
            &mut issues,
        );
        if let Some(r) = route_config(route, &names, &path, &mut issues) {
            if names.contains(&r.name) && !(r.models.len() == 1 && r.models[0] == r.name) {
                issues.push(format!("{path}.name"), format!("{:?} is already a model name", r.name));
            }
            if routes.iter().any(|o: &RouteConfig| o.name == r.name) {
                issues.push(format!("{path}.name"), format!("duplicate route name {:?}", r.name));
            }
            recorded.extend(r.record.clone().map(|record| (path.clone(), record)));
            routes.push(r);
        }
    }
    let onnxruntime_library = raw.onnxruntime.library.as_deref().map(|p| base_dir.join(p));
    let cache = super::cache_section::cache_config(raw.cache.as_ref(), &mut issues);
    let admin = super::control_section::admin_config(raw.admin.as_ref(), &mut issues);
    let reload = super::control_section::reload_config(raw.reload.as_ref(), &mut issues);
    let telemetry = super::telemetry_section::telemetry_config(raw.telemetry.as_ref(), &mut issues);
    let store = super::store_section::store_config(&raw.repository, base_dir, &mut issues);
    let protected =
        super::record_files::Protected::of(&models, onnxruntime_library.as_deref(), store.as_ref());
    for (path, record) in &recorded {
        super::record_files::check(record, &protected, true, path, &mut issues);
    }
    match (server, issues.is_empty()) {
        (Some(server), true) => {
            let routes = routes
                .into_iter()
                .map(|r| with_fingerprint(r, &models))
                .map(|r| super::upstream_section::with_upstream_fingerprint(r, &proxy))
                .collect();
            Ok(Config {
                server,
                onnxruntime_library,
                models,
                routes,
                model_routing,
                cache,
                admin,
                reload,
                proxy,
                telemetry,
                store,
            })
        }
        _ => Err(issues.into_vec()),
    }
}

fn parse_addr(value: Option<&str>, default: &str, path: &str, issues: &mut Issues) -> Option<SocketAddr> {
    let text = value.unwrap_or(default);
    match text.parse() {
        Ok(addr) => Some(addr),
        Err(_) => {
            issues.push(path, format!("{text:?} is not an address like \"127.0.0.1:8000\""));
            None
        }
    }
}

fn server_config(raw: &RawServer, issues: &mut Issues) -> Option<ServerConfig> {
    let listen = parse_addr(raw.listen.as_deref(), "127.0.0.1:8000", "server.listen", issues);
    let admin = parse_addr(raw.admin_listen.as_deref(), "127.0.0.1:9000", "server.admin_listen", issues);
    let admin_hosts = super::admin_hosts_section::admin_hosts(raw.admin_hosts.as_deref(), issues);
    let grpc =
        raw.grpc_listen.as_deref().map(|text| parse_addr(Some(text), "", "server.grpc_listen", issues));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let threads = issues.positive(raw.threads, cores, "server.threads");
    let max_body = raw.max_body_bytes.map_or(64 << 20, |s| s.0);
    if max_body == 0 {
        issues.push("server.max_body_bytes", "must be at least 1 byte");
    }
    let max_response = raw.max_response_bytes.map_or(64 << 20, |s| s.0);
    if max_response == 0 {
        issues.push("server.max_response_bytes", "must be at least 1 byte");
    }
    let limits = Limits {
        max_body_bytes: usize::try_from(max_body).unwrap_or(usize::MAX),
        max_concurrent_requests: issues.positive(
            raw.max_concurrent_requests,
            4096,
            "server.max_concurrent_requests",
        ),
        body_read_timeout: Duration::from_millis(raw.body_read_timeout_ms.unwrap_or(30_000).max(1)),
        max_request_elements: issues.positive(
            raw.max_request_elements,
            16 << 20,
            "server.max_request_elements",
        ),
        max_response_bytes: usize::try_from(max_response).unwrap_or(usize::MAX),
    };
    let shutdown_grace = Duration::from_secs(raw.shutdown_grace_s.unwrap_or(10));
    let shutdown_notice = Duration::from_millis(raw.shutdown_notice_ms.unwrap_or(0));
    let connections = connection_limits(
        RawConnections {
            max_connections: raw.max_connections,
            keepalive_timeout_s: raw.keepalive_timeout_s,
            header_timeout_ms: raw.header_timeout_ms,
        },
        issues,
    );
    let grpc_limits = grpc_limits(
        RawGrpcLimits {
            max_streams: raw.grpc_max_streams,
            max_in_flight_per_stream: raw.grpc_max_in_flight_per_stream,
            max_requests_per_connection: raw.grpc_max_requests_per_connection,
            max_receiving_bytes: raw
                .grpc_max_receiving_bytes
                .map(|s| usize::try_from(s.0).unwrap_or(usize::MAX)),
        },
        Bounds {
            max_concurrent_requests: limits.max_concurrent_requests,
            max_body_bytes: limits.max_body_bytes,
        },
        issues,
    );
    Some(ServerConfig {
        listen: listen?,
        admin_listen: admin?,
        admin_hosts,
        grpc_listen: match grpc {
            Some(addr) => Some(addr?),
            None => None,
        },
        threads,
        limits,
        shutdown_grace,
        shutdown_notice,
        connections,
        grpc: grpc_limits,
    })
}

fn model_spec(raw: &RawModel, repo_dir: &Path, path: &str, issues: &mut Issues) -> ModelSpec {
    if raw.name.is_empty() || raw.name.contains('/') {
        issues.push(format!("{path}.name"), "must be non-empty and contain no '/'");
    }
    let defaults = BatchingSpec {
        max_batch_size: 32,
        max_queue_delay: Duration::from_micros(500),
        queue_capacity: 1024,
        idle_dispatch: true,
        inline_max: BatchingSpec::DEFAULT_INLINE_MAX,
    };
    let batching = batching_spec(&raw.batching, &defaults, &format!("{path}.batching"), issues);
    let mut pools: Vec<PoolSpec> = Vec::new();
    for (j, pool) in raw.pools.iter().enumerate() {
        if let Some(spec) = pool_spec(pool, &batching, &format!("{path}.pools[{j}]"), issues) {
            if pools.iter().any(|p| p.name == spec.name) {
                issues
                    .push(format!("{path}.pools[{j}].name"), format!("duplicate pool name {:?}", spec.name));
            }
            pools.push(spec);
        }
    }
    if raw.pools.is_empty() {
        pools.push(PoolSpec {
            name: "cpu".into(),
            device: DeviceKind::Cpu,
            workers: 1,
            intra_op_threads: 1,
            batching: None,
        });
    }
    let file = PathBuf::from(&raw.path);
    ModelSpec {
        name: raw.name.clone(),
        version: raw.version.unwrap_or(1),
        path: if file.is_absolute() { file } else { repo_dir.join(file) },
        pools,
        batching,
        idle_unload: raw.idle_unload_s.map(Duration::from_secs),
        warmup: raw.warmup,
        text: super::text_section::text_spec(raw.tokenizer.as_ref(), repo_dir, path, issues),
        limits: request_limits(raw, path, issues),
        source: None,
    }
}

/// A model's `limits`; a limit of 0 is an error under its own field.
fn request_limits(raw: &RawModel, path: &str, issues: &mut Issues) -> RequestLimits {
    let limits = raw.limits.unwrap_or_default();
    for (field, value) in [("max_rows", limits.max_rows), ("max_tokens", limits.max_tokens)] {
        if value == Some(0) {
            issues.push(format!("{path}.limits.{field}"), "must be at least 1");
        }
    }
    if limits.max_tokens.is_some() && raw.tokenizer.is_none() {
        issues.push(format!("{path}.limits.max_tokens"), "only a text model (with a tokenizer) has tokens");
    }
    limits
}

/// Batching settings; fields left out take `defaults` (the built-in ones
/// for a model, the model's own for a pool override).
fn batching_spec(
    raw: &RawBatching,
    defaults: &BatchingSpec,
    path: &str,
    issues: &mut Issues,
) -> BatchingSpec {
    BatchingSpec {
        max_batch_size: raw.max_batch_size.unwrap_or(defaults.max_batch_size),
        max_queue_delay: raw.max_queue_delay_us.map_or(defaults.max_queue_delay, Duration::from_micros),
        queue_capacity: issues.positive(
            raw.queue_capacity,
            defaults.queue_capacity,
            format!("{path}.queue_capacity"),
        ),
        idle_dispatch: raw.idle_dispatch.unwrap_or(defaults.idle_dispatch),
        inline_max: raw.inline_max_us.map_or(defaults.inline_max, Duration::from_micros),
    }
}

fn pool_spec(
    raw: &RawPool,
    model_batching: &BatchingSpec,
    path: &str,
    issues: &mut Issues,
) -> Option<PoolSpec> {
    let device = raw.device.check("device", format!("{path}.device"), issues)?;
    Some(PoolSpec {
        name: raw.name.clone().unwrap_or_else(|| raw.device.text().to_string()),
        device: device.into(),
        workers: issues.positive(raw.workers, 1, format!("{path}.workers")),
        intra_op_threads: issues.positive(raw.intra_op_threads, 1, format!("{path}.intra_op_threads")),
        batching: raw
            .batching
            .as_ref()
            .map(|b| batching_spec(b, model_batching, &format!("{path}.batching"), issues)),
    })
}

fn route_config(
    raw: &RawRoute,
    models: &HashSet<String>,
    path: &str,
    issues: &mut Issues,
) -> Option<RouteConfig> {
    if raw.name.is_empty() || raw.name.contains('/') {
        issues.push(format!("{path}.name"), "must be non-empty and contain no '/'");
    }
    if raw.models.is_empty() {
        issues.push(format!("{path}.models"), "a route needs at least one model");
    }
    for (j, m) in raw.models.iter().enumerate() {
        if !models.contains(m) {
            issues.push(format!("{path}.models[{j}]"), format!("no model named {m:?} in [[models]]"));
        }
    }
    let default_ms = raw.budget_ms.default.unwrap_or(1000);
    let max_ms = raw.budget_ms.max.unwrap_or(default_ms.saturating_mul(10));
    if default_ms == 0 {
        issues.push(format!("{path}.budget_ms.default"), "must be at least 1 ms");
    }
    if max_ms < default_ms {
        issues.push(format!("{path}.budget_ms.max"), format!("{max_ms} is below the default {default_ms}"));
    }
    let policy = route_policy(raw, path, issues);
    let draft = super::draft_section::draft_config(raw.draft.as_ref(), &policy, &raw.models, path, issues);
    let calibrate = super::calibrate_section::calibrate_config(raw.calibrate.as_ref(), &policy, path, issues);
    Some(RouteConfig {
        name: raw.name.clone(),
        models: raw.models.clone(),
        default_budget: Duration::from_millis(default_ms),
        max_budget: Duration::from_millis(max_ms),
        policy,
        fingerprint: String::new(),
        cache: super::cache_section::route_cache(raw.cache.as_ref(), path, issues),
        auth: super::control_section::route_auth(raw.auth.as_ref(), path, issues),
        draft,
        record: super::record_section::record_config(raw.record.as_ref(), path, issues),
        calibrate,
    })
}

/// Fills [`RouteConfig::fingerprint`]: the policy's settings, then each
/// model's version and file identity, and a text model's tokenizer file
/// identity and length settings (a file that cannot be read yet gets a
/// placeholder; the repository reports the real problem).
fn with_fingerprint(mut route: RouteConfig, models: &[ModelSpec]) -> RouteConfig {
    use std::fmt::Write;
    let mut text = format!("{:?}", route.policy);
    // A stream's final may be the draft of a non-cascade route's own pair.
    if let (None, Some(pair)) = (route.policy.as_cascade(), &route.draft.pair) {
        let _ = write!(text, "|draft:{pair:?}");
    }
    for name in &route.models {
        let Some(spec) = models.iter().find(|m| &m.name == name) else { continue };
        let identity = |path: &Path| {
            std::fs::metadata(path).ok().map(|m| {
                let modified = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
                (m.len(), modified.map_or(0, |d| d.as_nanos()))
            })
        };
        let _ = write!(text, "|{}@{}:{:?}", spec.name, spec.version, identity(&spec.path));
        if let Some(t) = &spec.text {
            let _ = write!(text, "+tokenizer:{:?}:{}:{}", identity(&t.tokenizer), t.max_length, t.input);
        }
    }
    route.fingerprint = text;
    route
}

/// The route's policy, checked against its models; absent = `fixed` on
/// the last (most accurate) model, the behaviour before policies existed.
fn route_policy(raw: &RawRoute, path: &str, issues: &mut Issues) -> PolicyConfig {
    let Some(policy) = raw.policy.clone() else {
        let model = raw.models.last().cloned().unwrap_or_default();
        return PolicyConfig::Fixed(FixedPolicy { model });
    };
    if let Err(found) = policy.validate(&raw.models) {
        for issue in found {
            issues.push(format!("{path}.{}", issue.path), issue.message);
        }
    }
    policy
}

/// A model's routing attributes: `cost` and `quality`, and each pool's
/// `cost`; costs must be finite and > 0.
fn routing_of(raw: &RawModel, path: &str, issues: &mut Issues) -> ModelRouting {
    let mut check_cost = |cost: Option<f64>, field: String| {
        if let Some(c) = cost.filter(|c| !(c.is_finite() && *c > 0.0)) {
            issues.push(field, format!("must be a finite number > 0, got {c}"));
        }
        cost
    };
    let cost = check_cost(raw.cost, format!("{path}.cost"));
    let mut pool_costs = HashMap::new();
    for (j, pool) in raw.pools.iter().enumerate() {
        if let Some(c) = check_cost(pool.cost, format!("{path}.pools[{j}].cost")) {
            pool_costs.insert(pool.name.clone().unwrap_or_else(|| pool.device.text().to_string()), c);
        }
    }
    ModelRouting { cost, quality: raw.quality, pool_costs }
}
