//! `GET /admin/config`: the configuration in force, as JSON, with every
//! secret redacted: the admin token and API keys (only their tenants and,
//! for keys from the environment, the variable's name are shown) and
//! passwords in Redis URLs. Defaults are filled in, so this is what the
//! server actually runs with, not what the file says; fields that changed
//! in the file but need a restart are listed under `restart_pending`.

use crate::config::tenant_section::TenantConfig;
use crate::config::{CacheConfig, Config, RouteConfig, TokenSource};
use crate::reload::Reloader;
use crate::snapshot::Snapshot;
use serde_json::{json, Value};
use std::time::{Duration, UNIX_EPOCH};
use switchyard_runtime::ModelSpec;

pub use crate::config::redact::{redact_url, REDACTED};

/// The whole document: generation, source file, last reload, config.
pub fn document(snap: &Snapshot, reloader: &Reloader) -> Value {
    json!({
        "generation": snap.generation,
        "created_unix_s": snap.created.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "source": reloader.source_label(),
        "restart_pending": snap.restart_pending,
        "last_reload": reloader.last_outcome(),
        "config": config_json(&snap.config),
    })
}

fn admin_host_text(host: &crate::config::admin_hosts_section::AdminHost) -> String {
    use crate::config::admin_hosts_section::AdminHost;
    match host {
        AdminHost::Ip(ip) => ip.to_string(),
        AdminHost::Name(name) => name.clone(),
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The effective config with secrets redacted.
pub fn config_json(config: &Config) -> Value {
    let server = &config.server;
    json!({
        "server": {
            "listen": server.listen.to_string(),
            "admin_listen": server.admin_listen.to_string(),
            "admin_hosts": server.admin_hosts.iter().map(admin_host_text).collect::<Vec<_>>(),
            "grpc_listen": server.grpc_listen.map(|a| a.to_string()),
            "threads": server.threads,
            "max_body_bytes": server.limits.max_body_bytes,
            "max_concurrent_requests": server.limits.max_concurrent_requests,
            "body_read_timeout_ms": ms(server.limits.body_read_timeout),
            "max_request_elements": server.limits.max_request_elements,
            "shutdown_grace_s": server.shutdown_grace.as_secs(),
            "shutdown_notice_ms": ms(server.shutdown_notice),
        },
        "onnxruntime": { "library": config.onnxruntime_library.as_ref().map(|p| p.display().to_string()) },
        "admin": {
            "token": config.admin.token.map(|_| REDACTED),
            "token_source": match config.admin.token_source {
                TokenSource::None => "none",
                TokenSource::Config => "config",
                TokenSource::Env => "env",
            },
        },
        "reload": { "watch": config.reload.watch, "interval_ms": ms(config.reload.interval) },
        "cache": config.cache.as_ref().map(cache_json),
        "repository": config.store.as_ref().map(store_json),
        "models": config.models.iter().map(|m| model_json(config, m)).collect::<Vec<_>>(),
        "routes": config.routes.iter().map(route_json).collect::<Vec<_>>(),
        "tenants": config.tenants.iter().map(tenant_json).collect::<Vec<_>>(),
        "fleet_limits": config.fleet_limits.map(|f| json!({ "replicas": f.replicas, "fail": f.fail.as_str() })),
    })
}

/// A tenant's limits as written (absent limits as `null`), and its
/// `priority` / `max_priority` when set.
fn tenant_json(tenant: &TenantConfig) -> Value {
    let l = &tenant.limits;
    let mut doc = json!({
        "name": &*tenant.name,
        "weight": tenant.weight.unwrap_or(1),
        "limits": {
            "requests_per_s": l.requests.map(|r| r.per_s),
            "burst": l.requests.map(|r| r.burst),
            "rows_per_s": l.rows.map(|r| r.per_s),
            "rows_burst": l.rows.map(|r| r.burst),
            "concurrent": l.concurrent,
            "requests_per_day": l.requests_per_day,
        },
    });
    for (field, value) in [("priority", tenant.priority), ("max_priority", tenant.max_priority)] {
        if let (Some(value), Some(map)) = (value, doc.as_object_mut()) {
            map.insert(field.into(), value.into());
        }
    }
    doc
}

/// The model store's settings (credentials are never in the config; the
/// URLs are redacted in case they carry user-info) and what it delivered.
fn store_json(store: &crate::config::store_section::StoreConfig) -> Value {
    let s = &store.settings;
    let resolved = store.resolved.as_ref();
    json!({
        "uri": redact_url(&s.uri.to_string()),
        "endpoint": s.s3.endpoint.as_deref().map(redact_url),
        "region": s.s3.region,
        "path_style": s.s3.path_style,
        "profile": s.s3.profile,
        "anonymous": s.s3.anonymous,
        "cache_dir": s.cache.dir.display().to_string(),
        "cache_max_bytes": s.cache.max_bytes,
        "poll_interval_ms": store.poll_interval.map(ms),
        "from_cache": resolved.map(|r| r.from_cache),
        "unavailable": resolved.map(|r| {
            r.unavailable.iter().map(|(m, e)| (m.clone(), json!(e.to_string()))).collect::<serde_json::Map<_, _>>()
        }),
        "warnings": resolved.map(|r| json!(r.warnings)),
        "stats": resolved.map(|r| {
            let stats = r.store.stats();
            json!({
                "gets": stats.gets,
                "lists": stats.lists,
                "bytes_downloaded": stats.bytes_downloaded,
                "versions_downloaded": stats.versions_downloaded,
                "cache_hits": stats.cache_hits,
                "offline_hits": stats.offline_hits,
                "evictions": stats.evictions,
                "cache_bytes": r.store.cache_bytes(),
            })
        }),
    })
}

fn cache_json(cache: &CacheConfig) -> Value {
    json!({
        "l1_max_bytes": cache.l1_max_bytes,
        "redis": cache.redis.as_ref().map(|r| json!({
            "urls": r.urls.iter().map(|u| redact_url(u)).collect::<Vec<_>>(),
            "cluster": r.cluster,
            "namespace": r.namespace,
            "timeout_ms": ms(r.timeout),
            "write_timeout_ms": ms(r.write_timeout),
            "connect_timeout_ms": ms(r.connect_timeout),
            "breaker_failures": r.breaker_failures,
            "breaker_cool_down_ms": ms(r.breaker_cool_down),
            "write_queue": r.write_queue,
        })),
    })
}

fn model_json(config: &Config, spec: &ModelSpec) -> Value {
    let routing = config.model_routing.get(&spec.name);
    let batching = |b: &switchyard_runtime::BatchingSpec| {
        json!({
            "max_batch_size": b.max_batch_size,
            "max_queue_delay_us": u64::try_from(b.max_queue_delay.as_micros()).unwrap_or(u64::MAX),
            "queue_capacity": b.queue_capacity,
            "idle_dispatch": b.idle_dispatch,
            "inline_max_us": u64::try_from(b.inline_max.as_micros()).unwrap_or(u64::MAX),
            "queue_order": b.queue_order.as_str(),
            "preempt": b.preempt,
            "reserve_top_class": b.reserve_top_class,
            "max_batch_tokens": b.max_batch_tokens,
        })
    };
    json!({
        "name": spec.name,
        "version": spec.version,
        "path": spec.path.display().to_string(),
        "idle_unload_s": spec.idle_unload.map(|d| d.as_secs()),
        "warmup": spec.warmup,
        "batching": batching(&spec.batching),
        "limits": json!({ "max_rows": spec.max_rows(), "max_tokens": spec.max_tokens() }),
        "cost": routing.and_then(|r| r.cost),
        "quality": routing.and_then(|r| r.quality),
        "pools": spec.pools.iter().map(|p| json!({
            "name": p.name,
            "device": p.device.to_string(),
            "workers": p.workers,
            "intra_op_threads": p.intra_op_threads,
            "cost": routing.and_then(|r| r.pool_costs.get(&p.name)),
            "batching": p.batching.as_ref().map(batching),
        })).collect::<Vec<_>>(),
    })
}

fn route_json(route: &RouteConfig) -> Value {
    json!({
        "name": route.name,
        "models": route.models,
        "budget_ms": { "default": ms(route.default_budget), "max": ms(route.max_budget) },
        "policy": serde_json::to_value(&route.policy).unwrap_or_default(),
        "cache": {
            "enabled": route.cache.enabled,
            "ttl_s": route.cache.ttl.as_secs(),
            "l2_ttl_s": route.cache.l2_ttl.as_secs(),
        },
        "auth": route.auth.as_ref().map(|a| json!({
            "keys": a.keys.iter().map(|k| match &k.from_env {
                Some(var) => json!({ "tenant": &*k.tenant, "key_env": var }),
                None => json!({ "tenant": &*k.tenant, "key": REDACTED }),
            }).chain(a.client_certs.iter().map(|c| json!({ "tenant": &*c.tenant, "client_cert_cn": &*c.cn })))
            .collect::<Vec<_>>(),
            "tenants": a.tenants.iter().map(tenant_json).collect::<Vec<_>>(),
            "fair_share": a.fair_share,
        })),
        "calibrate": route.calibrate.as_ref().map(|c| json!({ "shadow": c.shadow, "target": c.target })),
        // In force: a rollout's step, or none once promoted or rolled back.
        "candidate": route.candidate.as_ref().map(|c| json!({
            "model": c.model,
            "plan": c.plan,
            "steps": c.steps,
            "step": c.step,
            "share": c.share(),
            "min_rows": c.min_rows,
            "gate": {
                "min_agreement": c.gate.min_agreement,
                "max_p99_ratio": c.gate.max_p99_ratio,
                "max_error_ratio": c.gate.max_error_ratio,
            },
        })),
        "record": route.record.as_ref().map(|r| json!({
            "sample": r.sample,
            "path": r.path.display().to_string(),
            "max_bytes": r.max_bytes,
            "files": r.files,
            "max_line_bytes": r.max_line_bytes,
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    #[test]
    fn redis_passwords_are_redacted() {
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact_url("redis://u:p4ss@h:1/0"), "redis://u:[redacted]@h:1/0");
        assert_eq!(redact_url("rediss://:p4ss@h"), "rediss://:[redacted]@h");
        assert_eq!(redact_url("redis://p4ss@h"), "redis://[redacted]@h");
    }

    #[test]
    fn no_secret_reaches_the_document() {
        let text = r#"
[admin]
token = "admin-token-0123456789"
[cache]
redis = { url = "redis://default:redis-password@127.0.0.1:6379" }
[[models]]
name = "m"
path = "m.onnx"
[[routes]]
name = "r"
models = ["m"]
policy = { type = "fixed", model = "m" }
auth = { keys = [{ key = "route-key-0123456789", tenant = "team-a" }] }
"#;
        let config = parse(text, Path::new("/")).unwrap();
        let shown = config_json(&config).to_string();
        for secret in ["admin-token-0123456789", "redis-password", "route-key-0123456789"] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
        let doc = config_json(&config);
        assert_eq!(doc["routes"][0]["auth"]["keys"][0]["tenant"], "team-a");
        assert_eq!(doc["routes"][0]["auth"]["fair_share"], true);
        assert_eq!(doc["tenants"], json!([]));
        assert_eq!(doc["routes"][0]["policy"]["type"], "fixed");
        assert_eq!(doc["admin"]["token_source"], "config");
    }
}
