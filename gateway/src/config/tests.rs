use super::*;
use std::path::Path;

fn issues(text: &str) -> Vec<ConfigIssue> {
    match parse(text, Path::new("/base")) {
        Ok(_) => panic!("expected config errors for:\n{text}"),
        Err(issues) => issues,
    }
}

#[test]
fn embedded_default_config_is_valid() {
    let config = load_default().expect("default config must validate");
    assert_eq!(config.models.len(), 4);
    let route = config.route("digits").expect("digits route");
    assert_eq!(route.models, vec!["digits-cheap", "digits-heavy"]);
    assert!(route.policy.as_cascade().is_some(), "the built-in digits route is a cascade");
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:8000");
}

/// deploy/examples/switchyard.toml says it is the built-in config as a
/// file: parsed, the two are the same `Config` (paths resolved to the same
/// files; `Config` has no `PartialEq`, so everything but the routing map,
/// a `HashMap` compared on its own, is compared through `Debug`).
#[test]
fn example_file_is_the_built_in_config() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let examples = workspace.join("deploy/examples");
    let text = std::fs::read_to_string(examples.join("switchyard.toml")).expect("the example file");
    // The example's `../../models` from its folder and the built-in
    // `models` from the workspace root spell the same paths.
    let mut example = parse(&text, &examples).unwrap_or_else(|e| panic!("{e:?}"));
    let mut built_in = parse(DEFAULT_CONFIG, &examples.join("../..")).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(!built_in.model_routing.is_empty());
    assert_eq!(example.model_routing, built_in.model_routing);
    example.model_routing.clear();
    built_in.model_routing.clear();
    assert_eq!(format!("{example:#?}"), format!("{built_in:#?}"));
}

#[test]
fn unknown_field_is_reported_with_its_path() {
    let found = issues("[server]\nlisten = \"127.0.0.1:1\"\nmax_body = 3\n");
    assert_eq!(found.len(), 1);
    assert!(found[0].path.starts_with("server"), "{found:?}");
    assert!(found[0].message.contains("max_body"), "{found:?}");
}

#[test]
fn nested_type_error_names_the_field_path() {
    let found =
        issues("[[models]]\nname = \"m\"\npath = \"m.onnx\"\nbatching = { max_batch_size = \"many\" }\n");
    assert_eq!(found[0].path, "models[0].batching.max_batch_size", "{found:?}");
}

#[test]
fn every_semantic_mistake_is_collected() {
    let text = r#"
[server]
listen = "not-an-address"
[[models]]
name = "a"
path = "a.onnx"
pools = [{ device = "tpu" }, { device = "cpu", workers = 0 }]
[[models]]
name = "a"
path = "b.onnx"
[[routes]]
name = "r"
models = ["a", "missing"]
budget_ms = { default = 100, max = 10 }
"#;
    let found = issues(text);
    let device = found.iter().find(|i| i.path == "models[0].pools[0].device");
    assert_eq!(
        device.map(|i| i.message.as_str()),
        Some("unknown device \"tpu\": use \"cpu\" or \"cuda\""),
        "{found:?}"
    );
    let paths: Vec<String> = found.into_iter().map(|i| i.path).collect();
    for expected in [
        "server.listen",
        "models[0].pools[0].device",
        "models[0].pools[1].workers",
        "models[1].name",
        "routes[0].models[1]",
        "routes[0].budget_ms.max",
    ] {
        assert!(paths.iter().any(|p| p == expected), "missing {expected} in {paths:?}");
    }
}

#[test]
fn relative_model_paths_start_at_the_repository_folder() {
    let config = parse(
        "[repository]\npath = \"m\"\n[[models]]\nname = \"x\"\npath = \"x.onnx\"\n",
        Path::new("/etc/sy"),
    )
    .expect("valid");
    assert_eq!(config.models[0].path, Path::new("/etc/sy/m/x.onnx"));
    assert_eq!(config.models[0].pools.len(), 1, "a default CPU pool");
}

#[test]
fn sizes_accept_units() {
    let config = parse("[server]\nmax_body_bytes = \"2MiB\"\n", Path::new(".")).expect("valid");
    assert_eq!(config.server.limits.max_body_bytes, 2 << 20);
    let found = issues("[server]\nmax_body_bytes = \"2 lightyears\"\n");
    assert_eq!(found[0].path, "server.max_body_bytes");
}

#[test]
fn route_fingerprint_changes_when_a_model_file_is_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, b"first").expect("write");
    let text = "[[models]]\nname = \"m\"\npath = \"m.onnx\"\n[[routes]]\nname = \"r\"\nmodels = [\"m\"]\n\
                [repository]\npath = \".\"\n";
    let before = parse(text, dir.path()).expect("valid").routes[0].fingerprint.clone();
    std::fs::write(&model, b"a different, longer model file").expect("rewrite");
    let after = parse(text, dir.path()).expect("valid").routes[0].fingerprint.clone();
    assert_ne!(before, after);
    let threshold = parse(
        &text.replace(
            "models = [\"m\"]\n",
            "models = [\"m\"]\npolicy = { type = \"fixed\", model = \"m\" }\n",
        ),
        dir.path(),
    )
    .expect("valid");
    assert!(threshold.routes[0].fingerprint.contains("Fixed"));
}

#[test]
fn route_draft_settings_are_checked_and_a_non_cascade_pair_is_fingerprinted() {
    let models = "[[models]]\nname = \"a\"\npath = \"a.onnx\"\n[[models]]\nname = \"b\"\npath = \"b.onnx\"\n";
    let route = |extra: &str| format!("{models}[[routes]]\nname = \"r\"\nmodels = [\"a\", \"b\"]\n{extra}");
    let plain = parse(&route(""), Path::new("/base")).expect("valid");
    assert_eq!(plain.routes[0].draft.pair, None, "a fixed route streams one final unless it opts in");
    let opted = parse(&route("draft = { mode = \"sequential\", heartbeat_ms = 50 }\n"), Path::new("/base"))
        .expect("valid");
    let draft = &opted.routes[0].draft;
    assert_eq!(draft.heartbeat, std::time::Duration::from_millis(50));
    assert_eq!(draft.pair.as_ref().and_then(|p| p.heavy.as_deref()), Some("b"));
    assert_ne!(plain.routes[0].fingerprint, opted.routes[0].fingerprint);
    let found = issues(&route("draft = { mode = \"later\" }\n"));
    assert_eq!(found[0].path, "routes[0].draft.mode", "{found:?}");
    assert_eq!(found[0].message, "unknown mode \"later\": use \"parallel\", \"sequential\" or \"off\"");
    let found = issues(&route("draft = { eager = true }\n"));
    assert!(found[0].path.starts_with("routes[0].draft"), "{found:?}");
}

#[test]
fn request_limits_and_response_size() {
    let ok = r#"
[server]
max_response_bytes = "1MiB"
[[models]]
name = "m"
path = "m.onnx"
batching = { max_batch_size = 16 }
limits = { max_rows = 500 }
[[models]]
name = "d"
path = "d.onnx"
"#;
    let config = parse(ok, Path::new("/base")).expect("valid");
    assert_eq!(config.server.limits.max_response_bytes, 1 << 20);
    assert_eq!(config.models[0].max_rows(), 500);
    assert_eq!(config.models[1].max_rows(), 256, "8 batches of the default 32");
    let default = load_default().expect("default config");
    assert_eq!(default.server.limits.max_response_bytes, 64 << 20);
    let bad = r#"
[server]
max_response_bytes = 0
[[models]]
name = "m"
path = "m.onnx"
limits = { max_rows = 0, max_tokens = 5 }
"#;
    let paths: Vec<String> = issues(bad).into_iter().map(|i| i.path).collect();
    for expected in ["server.max_response_bytes", "models[0].limits.max_rows", "models[0].limits.max_tokens"]
    {
        assert!(paths.iter().any(|p| p == expected), "{expected} in {paths:?}");
    }
    let typo = issues("[[models]]\nname = \"m\"\npath = \"m.onnx\"\nlimits = { max_row = 5 }\n");
    assert!(typo[0].path.starts_with("models[0].limits"), "{typo:?}");
}

#[test]
fn idle_dispatch_defaults_on_and_can_be_turned_off_per_model_or_pool() {
    let text = r#"
[[models]]
name = "m"
path = "m.onnx"
batching = { max_batch_size = 8, max_queue_delay_us = 300, idle_dispatch = false }
pools = [{ device = "cpu" }, { name = "eager", device = "cpu", batching = { idle_dispatch = true } }]

[[models]]
name = "n"
path = "n.onnx"
"#;
    let config = parse(text, Path::new("/base")).expect("valid");
    let m = &config.models[0];
    assert!(!m.batching.idle_dispatch);
    assert!(!m.pool_batching(&m.pools[0]).idle_dispatch, "a pool inherits the model's setting");
    assert!(m.pool_batching(&m.pools[1]).idle_dispatch, "and can override it");
    assert!(config.models[1].batching.idle_dispatch, "on by default");
    let found =
        issues("[[models]]\nname = \"m\"\npath = \"m.onnx\"\nbatching = { idle_dispatch = \"yes\" }\n");
    assert_eq!(found[0].path, "models[0].batching.idle_dispatch", "{found:?}");
}

#[test]
fn queue_order_defaults_to_deadline_and_can_be_fifo_per_model_or_pool() {
    let text = r#"
[[models]]
name = "m"
path = "m.onnx"
batching = { queue_order = "fifo" }
pools = [{ device = "cpu" }, { name = "edf", device = "cpu", batching = { queue_order = "deadline" } }]

[[models]]
name = "n"
path = "n.onnx"
"#;
    let config = parse(text, Path::new("/base")).expect("valid");
    let m = &config.models[0];
    use switchyard_runtime::QueueOrder;
    assert_eq!(
        m.pool_batching(&m.pools[0]).queue_order,
        QueueOrder::Fifo,
        "a pool inherits the model's order"
    );
    assert_eq!(m.pool_batching(&m.pools[1]).queue_order, QueueOrder::Deadline, "and can override it");
    assert_eq!(config.models[1].batching.queue_order, QueueOrder::Deadline, "deadline by default");
    let found = issues(
        "[[models]]\nname = \"m\"\npath = \"m.onnx\"\npools = [{ device = \"cpu\", batching = { queue_order = \"lifo\" } }]\n",
    );
    assert_eq!(found[0].path, "models[0].pools[0].batching.queue_order", "{found:?}");
    assert!(found[0].message.contains("\"deadline\" or \"fifo\""), "{found:?}");
}

/// A CPU-only batching switch `field` (read by `get`): off by default, set
/// per model, overridden per pool, a wrong type refused at its path, and
/// refused on a CUDA pool with `cuda_message`.
fn cpu_only_switch(field: &str, get: fn(&switchyard_runtime::BatchingSpec) -> bool, cuda_message: &str) {
    let text = format!(
        "[[models]]\nname = \"m\"\npath = \"m.onnx\"\nbatching = {{ {field} = true }}\n\
         pools = [{{ device = \"cpu\" }}, {{ name = \"other\", device = \"cpu\", batching = {{ {field} = false }} }}]\n\n\
         [[models]]\nname = \"n\"\npath = \"n.onnx\"\n"
    );
    let config = parse(&text, Path::new("/base")).expect("valid");
    let m = &config.models[0];
    assert!(get(m.pool_batching(&m.pools[0])), "{field}: a pool inherits the model's setting");
    assert!(!get(m.pool_batching(&m.pools[1])), "{field}: and can override it");
    assert!(!get(&config.models[1].batching), "{field}: off by default");
    let found =
        issues(&format!("[[models]]\nname = \"m\"\npath = \"m.onnx\"\nbatching = {{ {field} = 1 }}\n"));
    assert_eq!(found[0].path, format!("models[0].batching.{field}"), "{found:?}");
    let found = issues(&format!(
        "[[models]]\nname = \"m\"\npath = \"m.onnx\"\n\
         pools = [{{ device = \"cpu\" }}, {{ device = \"cuda\", batching = {{ {field} = true }} }}]\n"
    ));
    assert_eq!(found[0].path, format!("models[0].pools[1].batching.{field}"), "{found:?}");
    assert!(found[0].message.contains(cuda_message), "{found:?}");
}

#[test]
fn preempt_is_off_by_default_can_be_set_per_model_or_pool_and_a_cuda_pool_cannot() {
    cpu_only_switch("preempt", |b| b.preempt, "only CPU pools preempt");
}

#[test]
fn reserve_top_class_is_off_by_default_can_be_set_per_model_or_pool_and_a_cuda_pool_cannot() {
    cpu_only_switch("reserve_top_class", |b| b.reserve_top_class, "only CPU pools reserve");
}

#[test]
fn inline_max_defaults_to_50_us_and_can_be_set_or_turned_off_per_model_or_pool() {
    let text = r#"
[[models]]
name = "m"
path = "m.onnx"
batching = { inline_max_us = 0 }
pools = [{ device = "cpu" }, { name = "inline", device = "cpu", batching = { inline_max_us = 120 } }]

[[models]]
name = "n"
path = "n.onnx"
"#;
    let config = parse(text, Path::new("/base")).expect("valid");
    let m = &config.models[0];
    assert!(m.pool_batching(&m.pools[0]).inline_max.is_zero(), "a pool inherits the model's setting");
    assert_eq!(
        m.pool_batching(&m.pools[1]).inline_max,
        std::time::Duration::from_micros(120),
        "and can override it"
    );
    assert_eq!(
        config.models[1].batching.inline_max,
        std::time::Duration::from_micros(50),
        "50 µs by default"
    );
    let found = issues("[[models]]\nname = \"m\"\npath = \"m.onnx\"\nbatching = { inline_max_us = -1 }\n");
    assert_eq!(found[0].path, "models[0].batching.inline_max_us", "{found:?}");
}

#[test]
fn max_batch_tokens_is_for_text_models_at_least_one_and_a_pool_may_override_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("tok.json"), "{}").expect("tokenizer file");
    let text = r#"
[[models]]
name = "t"
path = "t.onnx"
tokenizer = { path = "tok.json" }
batching = { max_batch_size = 64, max_batch_tokens = 1024 }
pools = [{ device = "cpu" }, { name = "wide", device = "cpu", batching = { max_batch_tokens = 4096 } }]

[[models]]
name = "n"
path = "n.onnx"
"#;
    let config = parse(text, dir.path()).expect("valid");
    let t = &config.models[0];
    assert_eq!(t.pool_batching(&t.pools[0]).max_batch_tokens, Some(1024), "a pool inherits the model's");
    assert_eq!(t.pool_batching(&t.pools[1]).max_batch_tokens, Some(4096), "and can override it");
    assert_eq!(config.models[1].batching.max_batch_tokens, None, "absent by default");
    let found = issues(
        "[[models]]\nname = \"m\"\npath = \"m.onnx\"\nbatching = { max_batch_tokens = 512 }\n\
         pools = [{ device = \"cpu\", batching = { max_batch_tokens = 256 } }]\n",
    );
    let paths: Vec<&str> = found.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(
        paths,
        ["models[0].batching.max_batch_tokens", "models[0].pools[0].batching.max_batch_tokens",],
        "{found:?}"
    );
    assert!(found[0].message.contains("only a text model"), "{found:?}");
    let found = issues("[[models]]\nname = \"m\"\npath = \"m.onnx\"\nbatching = { max_batch_tokens = 0 }\n");
    assert!(
        found
            .iter()
            .any(|i| i.path == "models[0].batching.max_batch_tokens" && i.message.contains("at least 1")),
        "{found:?}"
    );
}
