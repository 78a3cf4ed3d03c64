//! `switchyard check-config` on real files: field-path errors and exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

fn check(config_text: &str) -> (bool, String) {
    run(&["check-config"], config_text)
}

/// Runs the binary with `args` and the config file last (`serve` takes it
/// as `--config`); no admin token from the environment.
fn run(args: &[&str], config_text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    std::fs::write(&path, config_text).unwrap();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .arg(&path)
        .env_remove("SWITCHYARD_ADMIN_TOKEN")
        .current_dir(workspace)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn reports_field_paths_and_fails() {
    let (ok, text) = check(
        r#"
[[models]]
name = "a"
path = "a.onnx"
pools = [{ device = "tpu" }]
[[routes]]
name = "r"
models = ["a", "digits-hevy"]
"#,
    );
    assert!(!ok, "{text}");
    assert!(text.contains("models[0].pools[0].device"), "{text}");
    assert!(text.contains("routes[0].models[1]"), "{text}");
}

#[test]
fn unknown_field_fails_with_its_path() {
    let (ok, text) = check("[server]\nlisten = \"127.0.0.1:1\"\nthreadz = 3\n");
    assert!(!ok);
    assert!(text.contains("threadz"), "{text}");
}

#[test]
fn example_config_passes() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let models = workspace.join("models");
    let text = std::fs::read_to_string(workspace.join("deploy/examples/switchyard.toml"))
        .unwrap()
        .replace("path = \"../../models\"", &format!("path = {:?}", models.display().to_string()));
    let (ok, out) = check(&text);
    assert!(ok, "{out}");
    assert!(out.contains("OK (4 models, 1 routes)"), "{out}");
}

#[test]
fn route_models_with_different_signatures_are_rejected() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = format!(
        "[[models]]\nname = \"cheap\"\npath = {:?}\n[[models]]\nname = \"other\"\npath = {:?}\n\
         [[routes]]\nname = \"r\"\nmodels = [\"cheap\", \"other\"]\n",
        workspace.join("models/digits-cheap.onnx").display().to_string(),
        workspace.join("runtime/tests/fixtures/types-echo.onnx").display().to_string()
    );
    let (ok, out) = check(&text);
    assert!(!ok, "{out}");
    assert!(out.contains("routes[0].models[1]") && out.contains("signature"), "{out}");
}

/// The two-tier fleet examples (deploy/examples/edge-tier.toml and
/// runtime-tier.toml) are valid as shipped (the edge's upstream address
/// need not answer for the check).
#[test]
fn fleet_tier_examples_pass() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let models = workspace.join("models");
    for (file, summary) in
        [("runtime-tier.toml", "OK (2 models, 0 routes)"), ("edge-tier.toml", "OK (2 models, 2 routes)")]
    {
        let text = std::fs::read_to_string(workspace.join("deploy/examples").join(file))
            .unwrap()
            .replace("path = \"../../models\"", &format!("path = {:?}", models.display().to_string()))
            .replace("switchyard-runtime:8000", "127.0.0.1:9");
        let (ok, out) = check(&text);
        assert!(ok, "{file}: {out}");
        assert!(out.contains(summary), "{file}: {out}");
    }
}

#[test]
fn text_example_config_passes() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let models = workspace.join("models");
    let text = std::fs::read_to_string(workspace.join("deploy/examples/text-embeddings.toml"))
        .unwrap()
        .replace("path = \"../../models\"", &format!("path = {:?}", models.display().to_string()));
    let (ok, out) = check(&text);
    assert!(ok, "{out}");
    assert!(out.contains("OK (2 models, 1 routes)"), "{out}");
}

#[test]
fn text_model_tokenizer_mistakes_name_the_field() {
    let (ok, out) = check(
        "[[models]]\nname = \"t\"\npath = \"t.onnx\"\ntokenizer = { path = \"t.json\", max_length = 64, buckets = [32, 16] }\n",
    );
    assert!(!ok, "{out}");
    assert!(out.contains("models[0].tokenizer.buckets"), "{out}");
}

/// `check-config` refuses what `serve` refuses (issue 24, item 15): an
/// admin listener reachable from other hosts without an admin token. Both
/// run `prepare::prepare`; `serve` stops before binding anything.
#[test]
fn an_exposed_admin_listener_without_a_token_fails_like_serve() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let model = workspace.join("models/digits-cheap.onnx").display().to_string();
    // Port 0: were `serve` to bind anything, it would take a free port.
    let config = |admin: &str, extra: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"{admin}:0\"\n{extra}\
             [[models]]\nname = \"cheap\"\npath = {model:?}\n[[routes]]\nname = \"r\"\nmodels = [\"cheap\"]\n"
        )
    };
    let exposed = config("0.0.0.0", "");
    let (ok, out) = check(&exposed);
    assert!(!ok, "{out}");
    assert!(out.contains("server.admin_listen") && out.contains("token"), "{out}");
    let (served, serve_out) = run(&["serve", "--config"], &exposed);
    assert!(!served && serve_out.contains("server.admin_listen"), "{serve_out}");

    let (ok, out) = check(&config("0.0.0.0", "[admin]\ntoken = \"0123456789abcdef0123\"\n"));
    assert!(ok, "with a token: {out}");
    let (ok, out) = check(&config("127.0.0.1", ""));
    assert!(ok, "on loopback: {out}");
}
