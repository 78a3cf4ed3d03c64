//! What every gRPC call gets, as an HTTP request gets it from the Pingora
//! app: its metadata as headers (so `x-api-key`, `authorization`,
//! `x-latency-budget-ms`, `x-request-id` and `traceparent` mean what they
//! mean over REST), the `grpc-timeout` deadline folded into the budget,
//! the request's span and id, in-flight counting for graceful shutdown,
//! and once it ends a `switchyard_requests_total` count and an access-log
//! line (`method` `POST`, `path` the gRPC method's path, `status` the
//! HTTP status of the same outcome over REST, 200 when it succeeded).

use super::conn::ConnInfo;
use crate::error::GatewayError;
use crate::lifecycle::InFlight;
use crate::metrics::RequestLabels;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::telemetry::RequestObs;
use http::{HeaderMap, HeaderValue};
use router_policies::BUDGET_HEADER;
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;

/// The calls of `GRPCInferenceService`: their paths and metric endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    /// `ServerLive`
    ServerLive,
    /// `ServerReady`
    ServerReady,
    /// `ModelReady`
    ModelReady,
    /// `ServerMetadata`
    ServerMetadata,
    /// `ModelMetadata`
    ModelMetadata,
    /// `ModelInfer`
    ModelInfer,
    /// `ModelStreamInfer` (one per stream)
    ModelStreamInfer,
    /// `ModelConfig`
    ModelConfig,
    /// `ModelStatistics`
    ModelStatistics,
}

impl Rpc {
    /// The HTTP/2 path of the call.
    pub fn path(self) -> &'static str {
        match self {
            Rpc::ServerLive => "/inference.GRPCInferenceService/ServerLive",
            Rpc::ServerReady => "/inference.GRPCInferenceService/ServerReady",
            Rpc::ModelReady => "/inference.GRPCInferenceService/ModelReady",
            Rpc::ServerMetadata => "/inference.GRPCInferenceService/ServerMetadata",
            Rpc::ModelMetadata => "/inference.GRPCInferenceService/ModelMetadata",
            Rpc::ModelInfer => "/inference.GRPCInferenceService/ModelInfer",
            Rpc::ModelStreamInfer => "/inference.GRPCInferenceService/ModelStreamInfer",
            Rpc::ModelConfig => "/inference.GRPCInferenceService/ModelConfig",
            Rpc::ModelStatistics => "/inference.GRPCInferenceService/ModelStatistics",
        }
    }

    /// The call of an HTTP/2 path, if it is one of the service's.
    pub fn from_path(path: &str) -> Option<Rpc> {
        const ALL: [Rpc; 9] = [
            Rpc::ServerLive,
            Rpc::ServerReady,
            Rpc::ModelReady,
            Rpc::ServerMetadata,
            Rpc::ModelMetadata,
            Rpc::ModelInfer,
            Rpc::ModelStreamInfer,
            Rpc::ModelConfig,
            Rpc::ModelStatistics,
        ];
        ALL.into_iter().find(|rpc| rpc.path() == path)
    }

    /// The `endpoint` label of its requests.
    pub fn endpoint(self) -> &'static str {
        match self {
            Rpc::ServerLive | Rpc::ServerReady => "grpc_health",
            Rpc::ModelReady => "grpc_model_ready",
            Rpc::ServerMetadata => "grpc_server_metadata",
            Rpc::ModelMetadata => "grpc_model_metadata",
            Rpc::ModelInfer => "grpc_infer",
            Rpc::ModelStreamInfer => "grpc_stream_infer",
            Rpc::ModelConfig => "grpc_model_config",
            Rpc::ModelStatistics => "grpc_model_statistics",
        }
    }
}

/// One call in progress.
pub struct CallObs {
    rpc: Rpc,
    started: Instant,
    in_flight: InFlight,
    /// The call's span and request id.
    pub obs: RequestObs,
}

/// An inference call's admission: a permit of its connection's share
/// (`server.grpc_max_requests_per_connection`) and one of
/// `server.max_concurrent_requests`, held while its models run.
pub struct Admission {
    _connection: Option<OwnedSemaphorePermit>,
    _server: OwnedSemaphorePermit,
}

/// Admits an inference call on `conn` (see [`Admission`]); a full share
/// or no global permit left is 429 (`RESOURCE_EXHAUSTED`), as over REST.
pub fn admit(state: &AppState, conn: Option<&ConnInfo>) -> Result<Admission, GatewayError> {
    let connection = match conn {
        Some(conn) => Some(
            conn.share()
                .clone()
                .try_acquire_owned()
                .map_err(|_| GatewayError::ConnectionShare { limit: conn.share_size() })?,
        ),
        None => None,
    };
    let server = state.limiter.clone().try_acquire_owned().map_err(|_| GatewayError::TooManyRequests)?;
    Ok(Admission { _connection: connection, _server: server })
}

impl CallObs {
    /// Starts observing a call with these headers.
    pub fn start(state: &AppState, rpc: Rpc, headers: &HeaderMap) -> CallObs {
        CallObs::start_at(state, rpc, headers, Instant::now())
    }

    /// Starts observing a call that began at `started`.
    pub fn start_at(state: &AppState, rpc: Rpc, headers: &HeaderMap, started: Instant) -> CallObs {
        CallObs {
            rpc,
            started,
            in_flight: state.lifecycle.enter(),
            obs: RequestObs::start(&http::Method::POST, rpc.path(), headers),
        }
    }

    /// Ends the call: counts it under `name` (the model it named, if any)
    /// with the HTTP status of its outcome and writes the access-log line.
    pub fn finish(self, snap: &Snapshot, name: Option<&str>, outcome: Result<(), &GatewayError>) {
        let (status, error) = match outcome {
            Ok(()) => (200, ""),
            Err(e) => (e.status(), e.label()),
        };
        self.finish_as(snap, name, status, error);
    }

    /// Ends the call with an HTTP `status` and error label given directly
    /// (a call refused before it reached the service, see
    /// `super::edge`).
    pub fn finish_as(mut self, snap: &Snapshot, name: Option<&str>, status: u16, error: &'static str) {
        self.in_flight.finish();
        let took = self.started.elapsed();
        crate::metrics::record_request(
            RequestLabels::grpc(&snap.config, name, self.rpc.endpoint()),
            status,
            took,
        );
        self.obs.finish(status);
        self.obs.in_scope(|| {
            crate::telemetry::access_log::log(&crate::telemetry::access_log::AccessLine {
                method: "POST",
                path: self.rpc.path(),
                status,
                error,
                request_bytes: None,
                duration_us: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
                trace_id: self.obs.trace_id(),
            })
        });
    }
}

/// A call's metadata as request headers, with its `grpc-timeout` deadline
/// folded into `x-latency-budget-ms`: the tighter of the two is the ask
/// (and the route's maximum still bounds it). An unreadable budget header
/// is left for the budget check to refuse with its 400
/// (`INVALID_ARGUMENT`).
pub fn call_headers(metadata: tonic::metadata::MetadataMap) -> HeaderMap {
    let mut headers = metadata.into_headers();
    let Some(deadline) = headers.get("grpc-timeout").and_then(|v| parse_grpc_timeout(v.as_bytes())) else {
        return headers;
    };
    let deadline_ms = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX).max(1);
    let asked = match headers.get(BUDGET_HEADER) {
        None => Some(u64::MAX),
        Some(value) => value.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()).filter(|&ms| ms > 0),
    };
    if let Some(asked) = asked {
        headers.insert(BUDGET_HEADER, HeaderValue::from(asked.min(deadline_ms)));
    }
    headers
}

/// A `grpc-timeout` value: up to 8 digits and a unit (`H`, `M`, `S`, `m`,
/// `u`, `n`); `None` when malformed (the call then has no deadline, as
/// gRPC servers treat it).
pub fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let amount: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(amount * 3600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataMap;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = MetadataMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        call_headers(map)
    }

    #[test]
    fn grpc_timeouts_parse_in_every_unit() {
        assert_eq!(parse_grpc_timeout(b"2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout(b"150m"), Some(Duration::from_millis(150)));
        assert_eq!(parse_grpc_timeout(b"99999u"), Some(Duration::from_micros(99_999)));
        assert_eq!(parse_grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout(b"123456789m"), None, "more than 8 digits");
        assert_eq!(parse_grpc_timeout(b"5x"), None);
        assert_eq!(parse_grpc_timeout(b"m"), None);
    }

    #[test]
    fn the_tighter_of_deadline_and_budget_header_wins() {
        let budget = |h: &HeaderMap| h.get(BUDGET_HEADER).map(|v| v.to_str().unwrap().to_string());
        assert_eq!(budget(&headers(&[("grpc-timeout", "250m")])), Some("250".into()));
        assert_eq!(
            budget(&headers(&[("grpc-timeout", "250m"), ("x-latency-budget-ms", "40")])),
            Some("40".into())
        );
        assert_eq!(
            budget(&headers(&[("grpc-timeout", "20m"), ("x-latency-budget-ms", "40")])),
            Some("20".into())
        );
        assert_eq!(
            budget(&headers(&[("grpc-timeout", "300u")])),
            Some("1".into()),
            "rounds to at least 1 ms"
        );
        assert_eq!(budget(&headers(&[("x-latency-budget-ms", "40")])), Some("40".into()));
        // An invalid header stays for the budget check to refuse.
        assert_eq!(
            budget(&headers(&[("grpc-timeout", "20m"), ("x-latency-budget-ms", "abc")])),
            Some("abc".into())
        );
        assert_eq!(budget(&headers(&[])), None);
    }
}
