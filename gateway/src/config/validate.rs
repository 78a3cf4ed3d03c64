//! Turns a [`RawConfig`] into a checked [`Config`]: each section's
//! `check` in turn, then what spans sections (the model names routes may
//! list, fingerprints, where traffic samples may be written). Every
//! problem is collected with the field path it concerns
//! (`models[2].pools[0].device`), so an operator sees all mistakes at once.

use super::issue::{ConfigIssue, Issues};
use super::raw::RawConfig;
use super::record_files::{self, Protected};
use super::types::{Config, ProxyConfig};
use super::{
    cache_section, control_section, fleet_limits_section, model_section, onnxruntime_section,
    prefix_route_section,
};
use super::{
    route_section, server_section, store_section, telemetry_section, tenant_section, tls_section,
    upstream_section,
};
use std::collections::HashSet;
use std::path::Path;

/// Checks `raw`; relative model paths are resolved against `base_dir`
/// joined with the repository folder.
pub fn check(raw: RawConfig, base_dir: &Path) -> Result<Config, Vec<ConfigIssue>> {
    let mut issues = Issues::default();
    let mut server = server_section::check(&raw.server, &mut issues);
    let s = &raw.server;
    let tls_raw = [s.tls.as_ref(), s.admin_tls.as_ref(), s.grpc_tls.as_ref()];
    let tls = tls_section::check(tls_raw, base_dir, &mut issues);
    if let Some(server) = server.as_mut() {
        server.tls = tls;
    }
    let repo_dir = base_dir.join(raw.repository.path.as_deref().unwrap_or(store_section::DEFAULT_PATH));
    let (models, model_routing) = model_section::check(&raw.models, &repo_dir, &mut issues);
    let rows_independent = model_section::rows_independent(&raw.models);
    let local: HashSet<String> = models.iter().map(|m| m.name.clone()).collect();
    let mut names = local.clone();
    let max_body = server.as_ref().map_or(64 << 20, |s| s.limits.max_body_bytes as u64);
    let upstreams = upstream_section::check(&raw.upstreams, &mut names, base_dir, &mut issues);
    let prefix_routes = prefix_route_section::check(&raw.prefix_routes, &upstreams, max_body, &mut issues);
    let proxy = ProxyConfig { upstreams, prefix_routes };
    let names = store_names(&raw, names);
    let routes = route_section::check(&raw.routes, raw.cache.as_ref(), &names, &mut issues);
    let onnxruntime_library = onnxruntime_section::check(&raw.onnxruntime, base_dir);
    let cache = cache_section::check(raw.cache.as_ref(), base_dir, &mut issues);
    let admin = control_section::check_admin(raw.admin.as_ref(), &mut issues);
    let reload = control_section::check_reload(raw.reload.as_ref(), &mut issues);
    let telemetry = telemetry_section::check(raw.telemetry.as_ref(), &mut issues);
    let store = store_section::check(&raw.repository, base_dir, &mut issues);
    let keyed: HashSet<&str> =
        routes.iter().filter_map(|r| r.auth.as_ref()).flat_map(|a| a.tenants_named().map(|t| &**t)).collect();
    let tenants = tenant_section::check(&raw.tenants, &keyed, "tenants", &mut issues);
    let has_redis = cache.as_ref().is_some_and(|c| c.redis.is_some());
    let fleet_limits = fleet_limits_section::check(raw.fleet_limits.as_ref(), has_redis, &mut issues);
    let protected = Protected::of(&models, onnxruntime_library.as_deref(), store.as_ref());
    for (i, route) in routes.iter().enumerate() {
        if let Some(record) = &route.record {
            record_files::check(record, &protected, true, &format!("routes[{i}]"), &mut issues);
        }
    }
    match (server, issues.is_empty()) {
        (Some(server), true) => {
            let routes = routes
                .into_iter()
                .map(|r| route_section::with_fingerprint(r, &models, &proxy.upstreams))
                .collect();
            Ok(Config {
                server,
                onnxruntime_library,
                models,
                routes,
                model_routing,
                rows_independent,
                cache,
                admin,
                reload,
                proxy,
                telemetry,
                store,
                tenants,
                fleet_limits,
            })
        }
        _ => Err(issues.into_vec()),
    }
}

/// With a model store (`repository.uri`), routes and candidates may name
/// its models (`<model>`, `<model>@<version>`): they are known once the
/// store is listed, and checked then, with the same field paths
/// (`prepare::check_routes`). Without one, the names stay as given.
fn store_names(raw: &RawConfig, mut names: HashSet<String>) -> HashSet<String> {
    if raw.repository.uri.is_some() {
        for route in &raw.routes {
            names.extend(route.models.iter().cloned());
            names.extend(route.candidate.as_ref().map(|c| c.model.clone()));
        }
    }
    names
}
