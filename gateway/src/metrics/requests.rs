//! Metrics recorded on the request path: requests by route, endpoint and
//! status with their durations (once per request, in the app's `logging`
//! phase), and upstream attempts (once per attempt, V2 calls and proxied
//! requests alike, from [`crate::upstream::observe::attempt_finished`]).
//!
//! They live in one process-wide registry: a process has one set of
//! listeners, and a global keeps them out of the per-request state that
//! hot reload swaps.
//!
//! Cardinality is bounded by construction: `route` is a route, model or
//! prefix-route name from the config in force (anything else is
//! [`OTHER`]), `endpoint`, `status`, `via` and `outcome` come from closed
//! sets, and `upstream` is an upstream's configured name (the caller's
//! duty, see [`upstream_attempt`]).

use crate::config::Config;
use crate::endpoint::{parse_openai_path, parse_path, Endpoint};
use prometheus::proto::MetricFamily;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use std::sync::LazyLock;
use std::time::Duration;

/// The `route` label of requests that name no configured route or model
/// (health checks, unknown names, paths outside the V2 API).
pub const OTHER: &str = "_other";

/// Request-duration buckets (seconds): 50 µs to 10 s, so that cache hits
/// (tens of µs) and model runs (ms) both resolve.
const DURATION_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
];

/// The registry and its request-path metrics.
struct RequestMetrics {
    registry: Registry,
    requests: IntCounterVec,
    duration: HistogramVec,
    upstream_attempts: IntCounterVec,
    upstream_duration: HistogramVec,
}

impl RequestMetrics {
    fn new() -> prometheus::Result<RequestMetrics> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new("switchyard_requests_total", "Requests answered on the API listener."),
            &["route", "endpoint", "status"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "switchyard_request_duration_seconds",
                "Time from the request's arrival to its last response byte.",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
            &["route", "endpoint"],
        )?;
        let upstream_attempts = IntCounterVec::new(
            Opts::new(
                "switchyard_upstream_attempts_total",
                "Attempts on upstream addresses (retries included), by how they ended.",
            ),
            &["upstream", "via", "outcome"],
        )?;
        let upstream_duration = HistogramVec::new(
            HistogramOpts::new(
                "switchyard_upstream_attempt_duration_seconds",
                "Time from an attempt's start to the upstream's response head, or to its failure.",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
            &["upstream", "via"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(upstream_attempts.clone()))?;
        registry.register(Box::new(upstream_duration.clone()))?;
        Ok(RequestMetrics { registry, requests, duration, upstream_attempts, upstream_duration })
    }
}

static METRICS: LazyLock<Option<RequestMetrics>> = LazyLock::new(|| match RequestMetrics::new() {
    Ok(m) => Some(m),
    Err(e) => {
        tracing::error!(error = %e, "request metrics unavailable");
        None
    }
});

/// The `route` and `endpoint` labels of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLabels<'a> {
    /// A route, model or prefix-route name from `config`, or [`OTHER`].
    pub route: &'a str,
    /// `infer`, `model_metadata`, `model_ready`, `model_config`,
    /// `model_statistics`, `server_metadata`, `health`, `openai_embeddings`,
    /// `openai_models`, `proxy` (a prefix route), `other`
    /// (not a V2 path), or a gRPC call's (`grpc_infer`,
    /// `grpc_stream_infer`, `grpc_model_metadata`, ...).
    pub endpoint: &'static str,
}

impl<'a> RequestLabels<'a> {
    /// Labels of a request under the prefix route `name` (a configured
    /// name, so bounded like the others): endpoint `proxy`.
    pub fn prefix_route(name: &'a str) -> RequestLabels<'a> {
        RequestLabels { route: name, endpoint: "proxy" }
    }

    /// Labels of a gRPC call ([`crate::grpc`]) on `name` (when the call
    /// names a model): `endpoint` is the call's (`grpc_infer`, ...), from
    /// a closed set; names not in the config map to [`OTHER`].
    pub fn grpc(config: &'a Config, name: Option<&str>, endpoint: &'static str) -> RequestLabels<'a> {
        RequestLabels { route: name.and_then(|n| configured_name(config, n)).unwrap_or(OTHER), endpoint }
    }

    /// These labels with the route named in the request's body (an
    /// OpenAI call's `model`); names not in the config map to [`OTHER`].
    pub fn named(self, config: &'a Config, name: &str) -> RequestLabels<'a> {
        RequestLabels { route: configured_name(config, name).unwrap_or(OTHER), ..self }
    }

    /// Labels for `path` under `config`. Names not in the config map to
    /// [`OTHER`], so unknown names never create label values.
    pub fn classify(config: &'a Config, path: &str) -> RequestLabels<'a> {
        if let Some(openai) = parse_openai_path(path) {
            // The name is in the body: the app adds it ([`Self::named`]).
            return RequestLabels { route: OTHER, endpoint: openai.label() };
        }
        let (name, endpoint) = match parse_path(path) {
            None => (None, "other"),
            Some(Endpoint::ServerMetadata) => (None, "server_metadata"),
            Some(Endpoint::Live | Endpoint::Ready) => (None, "health"),
            Some(Endpoint::ModelMetadata(n, _)) => (Some(n), "model_metadata"),
            Some(Endpoint::ModelReady(n, _)) => (Some(n), "model_ready"),
            Some(Endpoint::ModelConfig(n, _)) => (Some(n), "model_config"),
            Some(Endpoint::Infer(n, _)) => (Some(n), "infer"),
            Some(Endpoint::ModelStatistics(n, _)) => (n, "model_statistics"),
        };
        let route = name.and_then(|n| configured_name(config, n)).unwrap_or(OTHER);
        RequestLabels { route, endpoint }
    }
}

/// `name` as spelled in `config` (a route, else a model), if present.
fn configured_name<'a>(config: &'a Config, name: &str) -> Option<&'a str> {
    if let Some(route) = config.route(name) {
        return Some(route.name.as_str());
    }
    config.models.iter().find(|m| m.name == name).map(|m| m.name.as_str())
}

/// The status label: the three-digit code written into `buf`, or `none`
/// when no response was written.
fn status_label(status: u16, buf: &mut [u8; 3]) -> &str {
    if !(100..=999).contains(&status) {
        return "none";
    }
    *buf = [b'0' + (status / 100) as u8, b'0' + (status / 10 % 10) as u8, b'0' + (status % 10) as u8];
    std::str::from_utf8(buf).unwrap_or("none")
}

/// Counts one finished request and observes its duration. Called once
/// per request, from the app's `logging` phase.
pub fn record_request(labels: RequestLabels<'_>, status: u16, took: Duration) {
    let Some(m) = METRICS.as_ref() else { return };
    let mut buf = [0; 3];
    m.requests.with_label_values(&[labels.route, labels.endpoint, status_label(status, &mut buf)]).inc();
    m.duration.with_label_values(&[labels.route, labels.endpoint]).observe(took.as_secs_f64());
}

/// Counts one finished upstream attempt and observes how long it took.
/// `upstream` is the upstream's configured name (never a value taken from
/// the request); `via` (`v2`, `proxy`) and `outcome` come from closed sets
/// ([`crate::upstream::observe`]).
pub fn upstream_attempt(upstream: &str, via: &'static str, outcome: &'static str, took: Duration) {
    let Some(m) = METRICS.as_ref() else { return };
    m.upstream_attempts.with_label_values(&[upstream, via, outcome]).inc();
    m.upstream_duration.with_label_values(&[upstream, via]).observe(took.as_secs_f64());
}

/// The request-path families, for the scrape.
pub fn gather() -> Vec<MetricFamily> {
    METRICS.as_ref().map(|m| m.registry.gather()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[[models]]
name = "m"
path = "m.onnx"

[[routes]]
name = "r"
models = ["m"]
"#;

    fn config() -> Config {
        crate::config::parse(CONFIG, std::path::Path::new(".")).unwrap()
    }

    #[test]
    fn labels_come_from_config_or_are_other() {
        let c = config();
        let l = |p: &str| {
            let l = RequestLabels::classify(&c, p);
            (l.route.to_string(), l.endpoint)
        };
        assert_eq!(l("/v2/models/r/infer"), ("r".into(), "infer"));
        assert_eq!(l("/v2/models/m/versions/1/config"), ("m".into(), "model_config"));
        assert_eq!(l("/v2/models/r/ready"), ("r".into(), "model_ready"));
        assert_eq!(l("/v2/models/r/stats"), ("r".into(), "model_statistics"));
        assert_eq!(l("/v2/models/stats"), (OTHER.into(), "model_statistics"));
        assert_eq!(l("/v2/models/unknown-42/infer"), (OTHER.into(), "infer"));
        assert_eq!(l("/v2/health/live"), (OTHER.into(), "health"));
        assert_eq!(l("/v2"), (OTHER.into(), "server_metadata"));
        assert_eq!(l("/favicon.ico"), (OTHER.into(), "other"));
    }

    #[test]
    fn status_labels_are_codes() {
        let mut buf = [0; 3];
        assert_eq!(status_label(200, &mut buf), "200");
        assert_eq!(status_label(429, &mut buf), "429");
        assert_eq!(status_label(503, &mut buf), "503");
        assert_eq!(status_label(0, &mut buf), "none");
    }

    fn counter_value(name: &str, labels: &[(&str, &str)]) -> u64 {
        gather()
            .iter()
            .filter(|mf| mf.name() == name)
            .flat_map(|mf| mf.get_metric().iter())
            .find(|m| {
                labels.iter().all(|(k, v)| m.get_label().iter().any(|p| p.name() == *k && p.value() == *v))
            })
            .map_or(0, |m| m.get_counter().get_value() as u64)
    }

    #[test]
    fn upstream_attempts_are_counted_by_outcome() {
        let ok = [("upstream", "up-test"), ("via", "proxy"), ("outcome", "ok")];
        let refused = [("upstream", "up-test"), ("via", "v2"), ("outcome", "connect_error")];
        let (ok_before, refused_before) = (
            counter_value("switchyard_upstream_attempts_total", &ok),
            counter_value("switchyard_upstream_attempts_total", &refused),
        );
        upstream_attempt("up-test", "proxy", "ok", Duration::from_millis(3));
        upstream_attempt("up-test", "v2", "connect_error", Duration::from_micros(80));
        upstream_attempt("up-test", "v2", "connect_error", Duration::from_micros(90));
        assert_eq!(counter_value("switchyard_upstream_attempts_total", &ok), ok_before + 1);
        assert_eq!(counter_value("switchyard_upstream_attempts_total", &refused), refused_before + 2);
        let v2 = gather()
            .into_iter()
            .filter(|mf| mf.name() == "switchyard_upstream_attempt_duration_seconds")
            .flat_map(|mf| mf.get_metric().to_vec())
            .find(|m| m.get_label().iter().any(|p| p.name() == "via" && p.value() == "v2"))
            .unwrap();
        assert!(v2.get_histogram().get_sample_count() >= 2);
        assert!(
            v2.get_label().iter().all(|p| p.name() != "outcome"),
            "durations are by upstream and via only"
        );
    }
}
