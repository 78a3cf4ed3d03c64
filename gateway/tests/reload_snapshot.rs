//! The reload's snapshot builder on the real runtime: the next generation
//! shares unchanged models (sessions and statistics), keeps restart-only
//! settings, reports them, and a config whose model cannot be loaded is
//! rejected at that model's path while the running snapshot is untouched.

// A helper outside #[test]: a failed set-up should stop the test loudly.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use switchyard::{next_snapshot, open_repository, parse_config as parse, Snapshot};

/// ONNX Runtime from `$ORT_DYLIB_PATH` (as `make test` sets it), else the
/// set-up's copy in the workspace's `.cache`.
fn init_onnxruntime() {
    let library = match std::env::var("ORT_DYLIB_PATH") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/onnxruntime/libonnxruntime.so.1.31.1"),
    };
    switchyard_runtime::init_onnxruntime(Some(&library)).expect("ONNX Runtime library (run the set-up)");
}

fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../models")
}

fn config_text(threshold: f32, heavy_file: &str, listen: &str) -> String {
    let dir = models_dir();
    format!(
        r#"
[server]
listen = "{listen}"
[[models]]
name = "digits-cheap"
path = "{dir}/digits-cheap.onnx"
[[models]]
name = "digits-heavy"
path = "{dir}/{heavy_file}"
[[routes]]
name = "digits"
models = ["digits-cheap", "digits-heavy"]
policy = {{ type = "cascade", confidence_output = "probabilities", threshold = {threshold} }}
"#,
        dir = dir.display()
    )
}

#[test]
fn next_generation_shares_unchanged_models_and_rejects_broken_ones() {
    init_onnxruntime();
    let first = parse(&config_text(0.5, "digits-heavy.onnx", "127.0.0.1:8000"), Path::new("/")).unwrap();
    let repo = open_repository(&first).expect("ONNX Runtime and models (run the set-up)");
    let current = Snapshot::new(1, first, repo);

    let changed = parse(&config_text(0.9, "digits-heavy.onnx", "127.0.0.1:8001"), Path::new("/")).unwrap();
    let built = next_snapshot(changed, &current).unwrap_or_else(|e| panic!("{e:?}"));
    let next = &built.snapshot;
    assert_eq!(next.generation, 2);
    assert_eq!(built.report.reused, vec!["digits-cheap".to_string(), "digits-heavy".to_string()]);
    assert_eq!(next.restart_pending, vec!["server.listen".to_string()]);
    assert_eq!(next.config.server.listen, current.config.server.listen, "restart-only: running value kept");
    let threshold = next.config.route("digits").and_then(|r| r.policy.as_cascade()).map(|c| c.threshold);
    assert_eq!(threshold, Some(0.9), "the policy reloads");
    assert_ne!(
        next.config.route("digits").map(|r| &r.fingerprint),
        current.config.route("digits").map(|r| &r.fingerprint),
        "a new threshold gives new cache keys"
    );

    let broken = parse(&config_text(0.9, "no-such-model.onnx", "127.0.0.1:8000"), Path::new("/")).unwrap();
    let issues = next_snapshot(broken, &current).err().expect("a missing model file is rejected");
    assert_eq!(issues[0].path, "models[1]", "{issues:?}");
    assert!(issues[0].message.contains("not found"), "{issues:?}");
    assert_eq!(
        current.repo.model_names(),
        vec!["digits-cheap", "digits-heavy"],
        "running snapshot untouched"
    );
}

#[test]
fn a_route_over_an_upstream_the_running_registry_lacks_is_rejected() {
    init_onnxruntime();
    let base = config_text(0.5, "digits-heavy.onnx", "127.0.0.1:8000");
    let current = {
        let first = parse(&base, Path::new("/")).unwrap();
        let repo = open_repository(&first).expect("ONNX Runtime and models (run the set-up)");
        Snapshot::new(1, first, repo)
    };
    // Upstreams are restart-only: the new upstream model is not in the
    // running registry, so a route naming it first must not slip through.
    let text = format!(
        "{base}[[upstreams]]\nname = \"remote\"\nkind = \"v2\"\naddrs = [\"127.0.0.1:9\"]\n\
         models = [{{ name = \"remote-heavy\", model = \"digits-heavy\" }}]\n\
         [[routes]]\nname = \"remote-first\"\nmodels = [\"remote-heavy\", \"digits-cheap\"]\n"
    );
    let issues = match next_snapshot(parse(&text, Path::new("/")).unwrap(), &current) {
        Ok(_) => panic!("a route over an unknown upstream model must be rejected"),
        Err(issues) => issues,
    };
    assert!(issues.iter().any(|i| i.path == "routes[1].models[0]"), "{issues:?}");
}
