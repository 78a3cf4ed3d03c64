//! Defaults as the config file's JSON Schema states them: the raw types'
//! `Option` fields name one of these in `#[schemars(default = ...)]`,
//! with the same constant their section's check falls back to when the
//! field is left out, so the schema (and the reference page generated
//! from it, docs/src/reference/config-fields.md) cannot say another
//! default than the code applies. Only the schema reads them: serde's
//! `Deserialize` ignores `#[schemars]` attributes, and an absent field
//! stays `None`. Fields whose default is computed (the number of cores, a
//! share of another field) state none; their doc comment says it.

/// `Some(N)`: the default of an `Option<u64>` field.
pub fn some_u64<const N: u64>() -> Option<u64> {
    Some(N)
}

/// `Some(N)`: the default of an `Option<usize>` field.
pub fn some_usize<const N: usize>() -> Option<usize> {
    Some(N)
}

/// `Some(N)`: the default of an `Option<u32>` field.
pub fn some_u32<const N: u32>() -> Option<u32> {
    Some(N)
}

/// `Some(B)`: the default of an `Option<bool>` field.
pub fn some_bool<const B: bool>() -> Option<bool> {
    Some(B)
}

#[cfg(test)]
mod tests {
    use crate::config::{config_json_schema, parse, Config};
    use serde_json::{json, Value};
    use std::collections::BTreeMap;
    use std::path::Path;

    /// Every `default` the schema states, by field path (`a.b`, `a[].b`).
    fn stated(schema: &Value) -> BTreeMap<String, Value> {
        fn walk(node: &Value, path: &str, defs: &Value, out: &mut BTreeMap<String, Value>) {
            if let Some(name) = node["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
                walk(&defs[name], path, defs, out);
            }
            for key in ["anyOf", "oneOf", "allOf"] {
                for sub in node[key].as_array().into_iter().flatten() {
                    walk(sub, path, defs, out);
                }
            }
            if node.get("items").is_some() {
                walk(&node["items"], &format!("{path}[]"), defs, out);
            }
            for (name, sub) in node["properties"].as_object().into_iter().flatten() {
                let inner = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
                if let Some(default) = sub.get("default") {
                    out.insert(inner.clone(), default.clone());
                }
                walk(sub, &inner, defs, out);
            }
        }
        let mut out = BTreeMap::new();
        walk(schema, "", &schema["$defs"], &mut out);
        out
    }

    /// A config that leaves every defaulted field out, each of its tables
    /// present so that their checks run.
    const SPARSE: &str = r#"
[server]
[server.http2]
[cache]
redis = { url = "redis://127.0.0.1:6379" }
[[models]]
name = "m"
path = "m.onnx"
pools = [{ device = "cpu" }]
tokenizer = { path = "tokenizer.json" }
[[routes]]
name = "r"
models = ["m"]
cache = {}
[[routes]]
name = "fleet"
models = ["m"]
cache = { fleet_coalesce = true }
[[models]]
name = "m2"
path = "m2.onnx"
[[routes]]
name = "cascade"
models = ["m2", "m"]
policy = { type = "cascade", confidence_output = "p", threshold = 0.8 }
draft = {}
record = { sample = 1.0, path = "traffic.jsonl" }
calibrate = { shadow = 0.5 }
[[upstreams]]
name = "app"
addrs = ["127.0.0.1:8200"]
[[upstreams]]
name = "secure"
addrs = ["https://127.0.0.1:8443"]
tls = {}
[[prefix_routes]]
name = "app"
prefix = "/apps/app/"
upstream = "app"
cache = {}
[repository]
uri = "file:///srv/store"
[reload]
[telemetry]
otlp_endpoint = "http://127.0.0.1:4318/v1/traces"
"#;

    /// What the checks made of each field of [`SPARSE`], by schema path.
    fn applied(config: &Config) -> BTreeMap<&'static str, Value> {
        let s = &config.server;
        let redis = config.cache.as_ref().and_then(|c| c.redis.as_ref()).unwrap();
        let model = &config.models[0];
        let text = model.text.as_ref().unwrap();
        let (route, fleet) = (config.route("r").unwrap(), config.route("fleet").unwrap());
        let cascade = config.route("cascade").unwrap();
        let record = cascade.record.as_ref().unwrap();
        let telemetry = config.telemetry.as_ref().unwrap();
        let upstream = &config.proxy.upstreams[0];
        let secure = config.proxy.upstreams[1].tls.as_ref().unwrap();
        let store = config.store.as_ref().unwrap();
        let repo_dir = model.path.parent().and_then(|p| p.strip_prefix("/").ok()).unwrap();
        let cache_dir = store.settings.cache.dir.strip_prefix("/").unwrap();
        let prefix = &config.proxy.prefix_routes[0];
        let prefix_cache = prefix.cache.as_ref().unwrap();
        let methods: Vec<&str> = prefix_cache.methods.iter().map(http::Method::as_str).collect();
        let b = &model.batching;
        BTreeMap::from([
            ("server.listen", json!(s.listen.to_string())),
            ("server.admin_listen", json!(s.admin_listen.to_string())),
            ("server.max_body_bytes", json!(s.limits.max_body_bytes)),
            ("server.max_concurrent_requests", json!(s.limits.max_concurrent_requests)),
            ("server.body_read_timeout_ms", json!(s.limits.body_read_timeout.as_millis())),
            ("server.max_request_elements", json!(s.limits.max_request_elements)),
            ("server.max_response_bytes", json!(s.limits.max_response_bytes)),
            ("server.shutdown_grace_s", json!(s.shutdown_grace.as_secs())),
            ("server.shutdown_notice_ms", json!(s.shutdown_notice.as_millis())),
            ("server.max_connections", json!(s.connections.max_connections)),
            ("server.keepalive_timeout_s", json!(s.connections.keepalive_timeout.as_secs())),
            ("server.header_timeout_ms", json!(s.connections.header_timeout.as_millis())),
            ("server.grpc_max_streams", json!(s.grpc.max_streams)),
            ("server.grpc_max_in_flight_per_stream", json!(s.grpc.max_in_flight_per_stream)),
            ("server.http2.max_concurrent_streams", json!(s.http2.max_concurrent_streams)),
            ("server.http2.max_header_list_bytes", json!(s.http2.max_header_list_bytes)),
            ("server.http2.stream_window_bytes", json!(s.http2.stream_window_bytes)),
            ("server.http2.connection_window_bytes", json!(s.http2.connection_window_bytes)),
            ("server.http2.max_pending_reset_streams", json!(s.http2.max_pending_reset_streams)),
            ("cache.l1_max_bytes", json!(config.cache.as_ref().unwrap().l1_max_bytes)),
            ("cache.redis.namespace", json!(redis.namespace)),
            ("cache.redis.timeout_ms", json!(redis.timeout.as_millis())),
            ("cache.redis.write_timeout_ms", json!(redis.write_timeout.as_millis())),
            ("cache.redis.connect_timeout_ms", json!(redis.connect_timeout.as_millis())),
            ("cache.redis.breaker_failures", json!(redis.breaker_failures)),
            ("cache.redis.breaker_cool_down_ms", json!(redis.breaker_cool_down.as_millis())),
            ("cache.redis.write_queue", json!(redis.write_queue)),
            ("models[].version", json!(model.version)),
            ("models[].warmup", json!(model.warmup)),
            (
                "models[].batching",
                json!({
                    "max_batch_size": b.max_batch_size,
                    "max_queue_delay_us": b.max_queue_delay.as_micros(),
                    "queue_capacity": b.queue_capacity,
                    "idle_dispatch": b.idle_dispatch,
                    "inline_max_us": b.inline_max.as_micros(),
                    "queue_order": b.queue_order.as_str(),
                    "preempt": b.preempt,
                    "reserve_top_class": b.reserve_top_class,
                }),
            ),
            ("models[].pools[].workers", json!(model.pools[0].workers)),
            ("models[].pools[].intra_op_threads", json!(model.pools[0].intra_op_threads)),
            ("models[].tokenizer.max_length", json!(text.max_length)),
            ("models[].tokenizer.input", json!(text.input)),
            ("routes[].budget_ms.default", json!(route.default_budget.as_millis())),
            ("routes[].cache.enabled", json!(route.cache.enabled)),
            ("routes[].cache.ttl_s", json!(route.cache.ttl.as_secs())),
            ("routes[].cache.fleet_coalesce", json!(route.cache.fleet_wait.is_some())),
            ("routes[].cache.fleet_wait_ms", json!(fleet.cache.fleet_wait.unwrap().as_millis())),
            ("routes[].draft.mode", json!(cascade.draft.mode.as_str())),
            ("routes[].draft.heartbeat_ms", json!(cascade.draft.heartbeat.as_millis())),
            ("routes[].record.max_bytes", json!(record.max_bytes)),
            ("routes[].record.files", json!(record.files)),
            ("routes[].record.max_line_bytes", json!(record.max_line_bytes)),
            ("routes[].calibrate.target", json!(cascade.calibrate.unwrap().target)),
            ("repository.path", json!(repo_dir)),
            ("repository.anonymous", json!(store.settings.s3.anonymous)),
            ("repository.cache_dir", json!(cache_dir)),
            ("repository.cache_max_bytes", json!(store.settings.cache.max_bytes)),
            ("repository.verify_etag", json!(store.settings.integrity.verify_etag)),
            ("repository.require_checksum", json!(store.settings.integrity.require_checksum)),
            ("repository.warmup", json!(store.warmup)),
            ("upstreams[].kind", json!(upstream.kind.as_str())),
            ("upstreams[].tensors", json!(format!("{:?}", upstream.tensors).to_lowercase())),
            ("upstreams[].max_idle_per_addr", json!(upstream.max_idle_per_addr)),
            ("upstreams[].timeouts.connect_ms", json!(upstream.timeouts.connect.as_millis())),
            ("upstreams[].health.enabled", json!(upstream.health.enabled)),
            ("upstreams[].health.interval_ms", json!(upstream.health.interval.as_millis())),
            ("upstreams[].health.timeout_ms", json!(upstream.health.timeout.as_millis())),
            ("upstreams[].health.failures", json!(upstream.health.failures)),
            ("upstreams[].health.successes", json!(upstream.health.successes)),
            ("upstreams[].breaker.failures", json!(upstream.breaker.failures)),
            ("upstreams[].breaker.cool_down_ms", json!(upstream.breaker.cool_down.as_millis())),
            ("upstreams[].tls.verify", json!(secure.settings.verify)),
            ("prefix_routes[].strip_prefix", json!(prefix.strip_prefix)),
            ("prefix_routes[].preserve_host", json!(prefix.preserve_host)),
            ("prefix_routes[].cache.enabled", json!(prefix.cache.is_some())),
            ("prefix_routes[].cache.ttl_s", json!(prefix_cache.ttl.as_secs())),
            ("prefix_routes[].cache.methods", json!(methods)),
            ("prefix_routes[].cache.force", json!(prefix_cache.force)),
            ("prefix_routes[].cache.max_body_bytes", json!(prefix_cache.max_body_bytes)),
            ("prefix_routes[].cache.max_entry_bytes", json!(prefix_cache.max_entry_bytes)),
            ("prefix_routes[].cache.max_bytes", json!(prefix_cache.max_bytes)),
            ("reload.watch", json!(config.reload.watch)),
            ("reload.interval_ms", json!(config.reload.interval.as_millis())),
            ("telemetry.service_name", json!(telemetry.service_name)),
            ("telemetry.sampling_ratio", json!(telemetry.sampling_ratio)),
            ("telemetry.batch_delay_ms", json!(telemetry.batch_delay.as_millis())),
            ("telemetry.export_timeout_ms", json!(telemetry.export_timeout.as_millis())),
        ])
    }

    /// Defaults serde itself applies while reading the file, from the same
    /// function or `Default` the schema's value comes from.
    const BY_SERDE: [&str; 3] =
        ["routes[].policy.cheap", "routes[].policy.heavy", "routes[].policy.shed_margin"];

    #[test]
    fn every_default_the_schema_states_is_the_one_the_checks_apply() {
        let schema: Value = serde_json::from_str(&config_json_schema().unwrap()).unwrap();
        let stated = stated(&schema);
        assert!(stated.len() > 30, "{stated:?}");
        let config = parse(SPARSE, Path::new("/")).unwrap();
        let applied = applied(&config);
        for (path, default) in &stated {
            if BY_SERDE.contains(&path.as_str()) {
                continue;
            }
            let Some(value) = applied.get(path.as_str()) else {
                panic!("the schema states a default for {path} that this test does not check: add it to `applied`")
            };
            assert_eq!(value, default, "{path}: the checks apply {value}, the schema says {default}");
        }
        for path in applied.keys() {
            assert!(stated.contains_key(*path), "{path}: no default in the schema");
        }
    }
}
