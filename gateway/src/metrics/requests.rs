//! Metrics recorded on the request path: requests by route, endpoint and
//! status with their durations (once per request, in the app's `logging`
//! phase), and upstream calls (for proxied routes).
//!
//! They live in one process-wide registry: a process has one set of
//! listeners, and a global keeps them out of the per-request state that
//! hot reload swaps.
//!
//! Cardinality is bounded by construction: `route` is a route or model
//! name from the config in force (anything else is [`OTHER`]), `endpoint`
//! and `status` come from closed sets, and upstream labels are addresses
//! from the config (the caller's duty, see [`upstream_request`]).

use crate::config::Config;
use crate::handlers::{parse_path, Endpoint};
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
    upstream_requests: IntCounterVec,
    upstream_duration: HistogramVec,
    upstream_errors: IntCounterVec,
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
        let upstream_requests = IntCounterVec::new(
            Opts::new("switchyard_upstream_requests_total", "Responses received from upstream servers."),
            &["route", "upstream", "status"],
        )?;
        let upstream_duration = HistogramVec::new(
            HistogramOpts::new(
                "switchyard_upstream_request_duration_seconds",
                "Time from connecting to an upstream to the end of its response.",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
            &["route", "upstream"],
        )?;
        let upstream_errors = IntCounterVec::new(
            Opts::new("switchyard_upstream_errors_total", "Upstream calls that failed without a response."),
            &["route", "upstream", "kind"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(upstream_requests.clone()))?;
        registry.register(Box::new(upstream_duration.clone()))?;
        registry.register(Box::new(upstream_errors.clone()))?;
        Ok(RequestMetrics {
            registry,
            requests,
            duration,
            upstream_requests,
            upstream_duration,
            upstream_errors,
        })
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
    /// A route or model name from `config`, or [`OTHER`].
    pub route: &'a str,
    /// `infer`, `model_metadata`, `model_ready`, `model_config`,
    /// `server_metadata`, `health`, or `other` (not a V2 path).
    pub endpoint: &'static str,
}

impl<'a> RequestLabels<'a> {
    /// Labels for `path` under `config`. Names not in the config map to
    /// [`OTHER`], so unknown names never create label values.
    pub fn classify(config: &'a Config, path: &str) -> RequestLabels<'a> {
        let (name, endpoint) = match parse_path(path) {
            None => (None, "other"),
            Some(Endpoint::ServerMetadata) => (None, "server_metadata"),
            Some(Endpoint::Live | Endpoint::Ready) => (None, "health"),
            Some(Endpoint::ModelMetadata(n, _)) => (Some(n), "model_metadata"),
            Some(Endpoint::ModelReady(n, _)) => (Some(n), "model_ready"),
            Some(Endpoint::ModelConfig(n, _)) => (Some(n), "model_config"),
            Some(Endpoint::Infer(n, _)) => (Some(n), "infer"),
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

/// Why an upstream call failed without a usable response (the `kind`
/// label of `switchyard_upstream_errors_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamErrorKind {
    /// Connection refused, no route, or another connect failure.
    Connect,
    /// Connecting, reading or writing timed out.
    Timeout,
    /// TLS handshake or certificate failure.
    Tls,
    /// The connection broke after it was established (reset, closed,
    /// read/write error).
    Io,
    /// The upstream spoke invalid HTTP.
    Protocol,
    /// Anything else.
    Other,
}

impl UpstreamErrorKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamErrorKind::Connect => "connect",
            UpstreamErrorKind::Timeout => "timeout",
            UpstreamErrorKind::Tls => "tls",
            UpstreamErrorKind::Io => "io",
            UpstreamErrorKind::Protocol => "protocol",
            UpstreamErrorKind::Other => "other",
        }
    }

    /// The kind of a Pingora error met while proxying (e.g. in
    /// `fail_to_connect` or `error_while_proxy`).
    pub fn from_pingora(error: &pingora::Error) -> UpstreamErrorKind {
        use pingora::ErrorType as E;
        match error.etype() {
            E::ConnectTimedout | E::ReadTimedout | E::WriteTimedout | E::TLSHandshakeTimedout => {
                UpstreamErrorKind::Timeout
            }
            E::ConnectRefused
            | E::ConnectNoRoute
            | E::ConnectError
            | E::ConnectProxyFailure
            | E::SocketError
            | E::BindError => UpstreamErrorKind::Connect,
            E::TLSHandshakeFailure | E::TLSWantX509Lookup | E::InvalidCert | E::HandshakeError => {
                UpstreamErrorKind::Tls
            }
            E::ReadError | E::WriteError | E::ConnectionClosed => UpstreamErrorKind::Io,
            E::InvalidHTTPHeader | E::H1Error | E::H2Error | E::InvalidH2 | E::H2Downgrade => {
                UpstreamErrorKind::Protocol
            }
            _ => UpstreamErrorKind::Other,
        }
    }
}

/// Counts one upstream response and observes how long the call took.
/// `route` is the proxied route's configured name and `upstream` the
/// upstream's configured address: never values taken from the request.
pub fn upstream_request(route: &str, upstream: &str, status: u16, took: Duration) {
    let Some(m) = METRICS.as_ref() else { return };
    let mut buf = [0; 3];
    m.upstream_requests.with_label_values(&[route, upstream, status_label(status, &mut buf)]).inc();
    m.upstream_duration.with_label_values(&[route, upstream]).observe(took.as_secs_f64());
}

/// Counts one upstream call that failed without a response (same label
/// rules as [`upstream_request`]).
pub fn upstream_error(route: &str, upstream: &str, kind: UpstreamErrorKind) {
    let Some(m) = METRICS.as_ref() else { return };
    m.upstream_errors.with_label_values(&[route, upstream, kind.as_str()]).inc();
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
    fn upstream_calls_and_errors_are_counted() {
        let labels = [("route", "app-test"), ("upstream", "127.0.0.1:1"), ("status", "502")];
        let before = counter_value("switchyard_upstream_requests_total", &labels);
        upstream_request("app-test", "127.0.0.1:1", 502, Duration::from_millis(3));
        assert_eq!(counter_value("switchyard_upstream_requests_total", &labels), before + 1);
        let err = pingora::Error::new(pingora::ErrorType::ConnectRefused);
        let kind = UpstreamErrorKind::from_pingora(&err);
        assert_eq!(kind, UpstreamErrorKind::Connect);
        let labels = [("route", "app-test"), ("kind", "connect")];
        let before = counter_value("switchyard_upstream_errors_total", &labels);
        upstream_error("app-test", "127.0.0.1:1", kind);
        assert_eq!(counter_value("switchyard_upstream_errors_total", &labels), before + 1);
    }
}
