//! `[[upstreams]]` and `[[prefix_routes]]`: defaults, references, and
//! mistakes reported with their field paths.

use super::{TensorEncoding, UpstreamKind};
use crate::config::{parse, ConfigIssue};
use std::path::Path;
use std::time::Duration;

const BASE: &str = r#"
[[models]]
name = "cheap"
path = "cheap.onnx"

[[upstreams]]
name = "remote"
kind = "v2"
addrs = ["127.0.0.1:8101", "127.0.0.1:8102"]
cost = 10.0
models = [{ name = "heavy-remote", model = "digits-heavy", quality = 9 }, { name = "other", cost = 2.0 }]

[[upstreams]]
name = "app"
addrs = ["127.0.0.1:8200"]
timeouts = { first_byte_ms = 500 }

[[routes]]
name = "digits"
models = ["cheap", "heavy-remote"]
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }

[[prefix_routes]]
name = "app"
prefix = "/apps/app/"
upstream = "app"
cache = { ttl_s = 5, methods = ["get", "POST"], headers = ["Accept"] }
"#;

fn issues(text: &str) -> Vec<ConfigIssue> {
    match parse(text, Path::new("/m")) {
        Ok(_) => panic!("expected config errors for:\n{text}"),
        Err(issues) => issues,
    }
}

fn has(issues: &[ConfigIssue], path: &str) -> bool {
    issues.iter().any(|i| i.path == path)
}

#[test]
fn upstreams_models_and_prefix_routes_with_defaults() {
    let config = parse(BASE, Path::new("/m")).unwrap();
    let remote = config.proxy.upstream("remote").unwrap();
    assert_eq!(remote.kind, UpstreamKind::V2);
    assert_eq!(remote.addrs.len(), 2);
    assert_eq!(remote.timeouts.connect, Duration::from_millis(1000));
    assert_eq!(remote.timeouts.total, Some(Duration::from_secs(60)));
    assert_eq!(remote.health.path.as_deref(), Some("/v2/health/ready"));
    assert_eq!((remote.breaker.failures, remote.breaker.cool_down), (3, Duration::from_secs(1)));
    let (upstream, model) = config.proxy.upstream_model("heavy-remote").unwrap();
    assert_eq!((upstream.name.as_str(), model.remote.as_str()), ("remote", "digits-heavy"));
    assert_eq!((model.cost, model.quality), (Some(10.0), Some(9)), "cost inherited, quality own");
    let (_, other) = config.proxy.upstream_model("other").unwrap();
    assert_eq!((other.remote.as_str(), other.cost), ("other", Some(2.0)));

    let app = config.proxy.upstream("app").unwrap();
    assert_eq!(app.kind, UpstreamKind::Http);
    assert_eq!(app.timeouts.first_byte, Duration::from_millis(500));
    assert_eq!(app.timeouts.total, None, "plain apps may stream for as long as they like");
    assert_eq!(app.health.path, None, "TCP check by default");

    let route = &config.proxy.prefix_routes[0];
    assert!(route.strip_prefix && !route.preserve_host);
    assert_eq!(route.max_request_bytes, 64 << 20, "server.max_body_bytes by default");
    let cache = route.cache.as_ref().unwrap();
    assert_eq!(cache.methods, vec![http::Method::GET, http::Method::POST]);
    assert_eq!(cache.headers[0].as_str(), "accept");
    assert_eq!((cache.ttl, cache.max_body_bytes), (Duration::from_secs(5), 64 << 10));

    let digits = config.route("digits").unwrap();
    assert!(
        digits.fingerprint.contains("heavy-remote@upstream:remote:digits-heavy"),
        "{}",
        digits.fingerprint
    );
}

#[test]
fn references_and_names_are_checked() {
    let text = BASE
        .replace("upstream = \"app\"", "upstream = \"nope\"")
        .replace("name = \"other\"", "name = \"cheap\"")
        .replace("\"heavy-remote\"]", "\"heavy-remot\"]");
    let found = issues(&text);
    assert!(has(&found, "prefix_routes[0].upstream"), "{found:?}");
    assert!(has(&found, "upstreams[0].models[1].name"), "{found:?}");
    assert!(has(&found, "routes[0].models[1]"), "{found:?}");
}

#[test]
fn mistakes_name_their_fields() {
    let cases = [
        ("kind = \"v2\"", "kind = \"grpc\"", "upstreams[0].kind"),
        ("[\"127.0.0.1:8101\", \"127.0.0.1:8102\"]", "[\"localhost\"]", "upstreams[0].addrs[0]"),
        (
            "[\"127.0.0.1:8101\", \"127.0.0.1:8102\"]",
            "[\"no-such-host.invalid:80\"]",
            "upstreams[0].addrs[0]",
        ),
        ("[\"127.0.0.1:8101\", \"127.0.0.1:8102\"]", "[\"bad host:80\"]", "upstreams[0].addrs[0]"),
        ("[\"127.0.0.1:8101\", \"127.0.0.1:8102\"]", "[]", "upstreams[0].addrs"),
        (
            "[\"127.0.0.1:8101\", \"127.0.0.1:8102\"]",
            "[\"127.0.0.1:1\", \"127.0.0.1:1\"]",
            "upstreams[0].addrs[1]",
        ),
        (
            "[\"127.0.0.1:8101\", \"127.0.0.1:8102\"]",
            "[\"https://127.0.0.1:8101\", \"127.0.0.1:8102\"]",
            "upstreams[0].addrs[1]",
        ),
        ("addrs = [\"127.0.0.1:8200\"]", "addrs = [\"127.0.0.1:8200\"]\ntls = {}", "upstreams[1].tls"),
        (
            "addrs = [\"127.0.0.1:8200\"]",
            "addrs = [\"https://127.0.0.1:8200\"]\ntls = { ca = \"none.pem\" }",
            "upstreams[1].tls.ca",
        ),
        ("first_byte_ms = 500", "first_byte_ms = 0", "upstreams[1].timeouts.first_byte_ms"),
        ("cost = 10.0", "cost = -1.0", "upstreams[0].cost"),
        ("prefix = \"/apps/app/\"", "prefix = \"/v2/models/\"", "prefix_routes[0].prefix"),
        ("prefix = \"/apps/app/\"", "prefix = \"apps\"", "prefix_routes[0].prefix"),
        ("headers = [\"Accept\"]", "headers = [\"bad header\"]", "prefix_routes[0].cache.headers[0]"),
        ("ttl_s = 5", "ttl_s = 5, max_body_bytes = \"1MiB\"", "prefix_routes[0].cache.max_body_bytes"),
    ];
    for (from, to, path) in cases {
        let text = BASE.replacen(from, to, 1);
        assert_ne!(text, BASE, "{from}");
        let found = issues(&text);
        assert!(has(&found, path), "{to}: {found:?}");
    }
    let http_models = BASE.replace(
        "timeouts = { first_byte_ms = 500 }",
        "timeouts = { first_byte_ms = 500 }\nmodels = [{ name = \"x\" }]",
    );
    assert!(has(&issues(&http_models), "upstreams[1].models"));
    let grpc = issues(&BASE.replacen("kind = \"v2\"", "kind = \"grpc\"", 1));
    let kind = grpc.iter().find(|i| i.path == "upstreams[0].kind").map(|i| i.message.as_str());
    assert_eq!(kind, Some("unknown kind \"grpc\": use \"v2\" or \"http\""), "{grpc:?}");
    let unknown = BASE.replace("cost = 10.0", "cost = 10.0\nretries = 3");
    let found = issues(&unknown);
    assert!(found[0].path.starts_with("upstreams[0]") && found[0].message.contains("retries"), "{found:?}");
}

/// A name is resolved when the config is loaded, into every address it
/// has (an IP stays as written).
#[test]
fn names_in_addrs_are_resolved() {
    let text = BASE.replacen(
        "[\"127.0.0.1:8101\", \"127.0.0.1:8102\"]",
        "[\"localhost:8101\", \"127.0.0.1:8102\"]",
        1,
    );
    let config = crate::config::parse(&text, std::path::Path::new("/")).unwrap();
    let addrs = &config.proxy.upstreams[0].addrs;
    assert!(addrs.contains(&"127.0.0.1:8101".parse().unwrap()), "{addrs:?}");
    assert!(addrs.contains(&"127.0.0.1:8102".parse().unwrap()), "{addrs:?}");
}

#[test]
fn duplicate_prefixes_and_route_names_clash() {
    let text = format!(
        "{BASE}\n[[prefix_routes]]\nname = \"app\"\nprefix = \"/apps/app/\"\nupstream = \"remote\"\n\
         [[routes]]\nname = \"heavy-remote\"\nmodels = [\"cheap\"]\n"
    );
    let found = issues(&text);
    assert!(has(&found, "prefix_routes[1].name"), "{found:?}");
    assert!(has(&found, "prefix_routes[1].prefix"), "{found:?}");
    assert!(has(&found, "routes[1].name"), "route names must not shadow upstream models: {found:?}");
}

#[test]
fn tensor_encoding_defaults_to_auto_and_is_checked() {
    let config = parse(BASE, Path::new("/m")).unwrap();
    assert_eq!(config.proxy.upstream("remote").unwrap().tensors, TensorEncoding::Auto);
    let json = BASE.replacen("kind = \"v2\"\n", "kind = \"v2\"\ntensors = \"json\"\n", 1);
    assert_eq!(
        parse(&json, Path::new("/m")).unwrap().proxy.upstream("remote").unwrap().tensors,
        TensorEncoding::Json
    );
    let typo = BASE.replacen("kind = \"v2\"\n", "kind = \"v2\"\ntensors = \"protobuf\"\n", 1);
    let found = issues(&typo);
    assert!(has(&found, "upstreams[0].tensors"), "{found:?}");
    assert!(found.iter().any(|i| i.message.contains("\"auto\", \"binary\" or \"json\"")), "{found:?}");
    let on_http = BASE.replacen("name = \"app\"\n", "name = \"app\"\ntensors = \"binary\"\n", 1);
    assert!(has(&issues(&on_http), "upstreams[1].tensors"));
}

#[test]
fn https_addresses_turn_tls_on_with_their_host_as_the_server_name() {
    let text = BASE
        .replace(
            "addrs = [\"127.0.0.1:8200\"]",
            "addrs = [\"https://127.0.0.1:8200\"]\ntls = { verify = false }",
        )
        .replace(
            "[\"127.0.0.1:8101\", \"127.0.0.1:8102\"]",
            "[\"http://127.0.0.1:8101\", \"127.0.0.1:8102\"]",
        );
    let config = parse(&text, Path::new("/m")).unwrap();
    let remote = config.proxy.upstream("remote").unwrap();
    assert!(remote.tls.is_none(), "http:// is plain");
    assert_eq!(remote.scheme(), "http");
    let app = config.proxy.upstream("app").unwrap();
    let tls = app.tls.as_ref().unwrap();
    assert_eq!(app.scheme(), "https");
    assert_eq!(app.addrs, vec!["127.0.0.1:8200".parse().unwrap()]);
    assert_eq!(tls.server_name(app.addrs[0]), "127.0.0.1");
    assert_eq!(app.host_header(app.addrs[0]), "127.0.0.1:8200");
    assert_eq!(remote.host_header(remote.addrs[0]), "127.0.0.1:8101");
    assert!(!tls.settings.verify);
}

#[test]
fn the_host_header_of_a_tls_upstream_is_its_server_name() {
    let text = BASE.replace(
        "addrs = [\"127.0.0.1:8200\"]",
        "addrs = [\"https://[::1]:443\", \"https://127.0.0.1:8443\"]\ntls = { verify = false }",
    );
    let config = parse(&text, Path::new("/m")).unwrap();
    let app = config.proxy.upstream("app").unwrap();
    assert_eq!(app.host_header(app.addrs[0]), "[::1]");
    assert_eq!(app.host_header(app.addrs[1]), "127.0.0.1:8443");
    let named =
        text.replace("tls = { verify = false }", "tls = { verify = false, server_name = \"app.internal\" }");
    let config = parse(&named, Path::new("/m")).unwrap();
    let app = config.proxy.upstream("app").unwrap();
    assert_eq!(app.host_header(app.addrs[1]), "app.internal:8443");
}
