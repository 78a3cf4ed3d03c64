//! `[server]`: the listeners, request limits and shutdown timing. Its
//! client-connection, gRPC and admin-host settings are checked by
//! [`super::connections_section`], [`super::grpc_section`] and
//! [`super::admin_hosts_section`], which own those slices of the table.

use super::connections_section::{
    ConnectionLimits, RawConnections, DEFAULT_HEADER_TIMEOUT_MS, DEFAULT_KEEPALIVE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
};
use super::grpc_section::{
    Bounds, GrpcLimits, RawGrpcLimits, DEFAULT_MAX_IN_FLIGHT_PER_STREAM, DEFAULT_MAX_STREAMS,
};
use super::http2_section::{Http2Limits, RawHttp2};
use super::issue::Issues;
use super::schema_default::{some_u32, some_u64, some_usize};
use super::size::ByteSize;
use super::tls_section::{ListenerTls, RawTls};
use schemars::JsonSchema;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;

/// Default V2 API listener.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8000";
/// Default admin listener.
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:9000";
/// Default largest request body: 64 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 64 << 20;
/// Default requests served at once.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 4096;
/// Default time allowed to receive a whole body.
pub const DEFAULT_BODY_READ_TIMEOUT_MS: u64 = 30_000;
/// Default most elements one request may declare: 16 Mi.
pub const DEFAULT_MAX_REQUEST_ELEMENTS: usize = 16 << 20;
/// Default largest response of one infer request: 64 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 << 20;
/// Default seconds in-flight requests get after SIGTERM.
pub const DEFAULT_SHUTDOWN_GRACE_S: u64 = 10;
/// Default notice between SIGTERM and closing the listeners.
pub const DEFAULT_SHUTDOWN_NOTICE_MS: u64 = 0;

/// `[server]`
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// V2 API listener, default `127.0.0.1:8000`.
    #[schemars(default = "default_listen")]
    pub listen: Option<String>,
    /// Admin listener (metrics, admin API), default `127.0.0.1:9000`.
    #[schemars(default = "default_admin_listen")]
    pub admin_listen: Option<String>,
    /// Extra names the admin listener answers to (see
    /// [`super::admin_hosts_section`]).
    pub admin_hosts: Option<Vec<String>>,
    /// gRPC listener (Open Inference Protocol over gRPC); absent = off.
    pub grpc_listen: Option<String>,
    /// Worker threads of the HTTP server, default: number of cores.
    #[schemars(range(min = 1))]
    pub threads: Option<usize>,
    /// Largest request body accepted (413 beyond), default 64MiB.
    #[schemars(default = "some_u64::<DEFAULT_MAX_BODY_BYTES>", extend("minimum" = 1))]
    pub max_body_bytes: Option<ByteSize>,
    /// Requests served at once; more get 429. Default 4096.
    #[schemars(default = "some_usize::<DEFAULT_MAX_CONCURRENT_REQUESTS>", range(min = 1))]
    pub max_concurrent_requests: Option<usize>,
    /// Time allowed to receive the whole body, default 30000 ms.
    #[schemars(default = "some_u64::<DEFAULT_BODY_READ_TIMEOUT_MS>")]
    pub body_read_timeout_ms: Option<u64>,
    /// Most elements one request may declare across its inputs, default 16M.
    #[schemars(default = "some_usize::<DEFAULT_MAX_REQUEST_ELEMENTS>", range(min = 1))]
    pub max_request_elements: Option<usize>,
    /// Largest response an infer request may produce (413 beyond, checked
    /// before the models run and before encoding), default 64MiB.
    #[schemars(default = "some_u64::<DEFAULT_MAX_RESPONSE_BYTES>", extend("minimum" = 1))]
    pub max_response_bytes: Option<ByteSize>,
    /// Seconds in-flight requests get to finish after SIGTERM, default 10.
    #[schemars(default = "some_u64::<DEFAULT_SHUTDOWN_GRACE_S>")]
    pub shutdown_grace_s: Option<u64>,
    /// After SIGTERM, keep accepting for this long while readiness says
    /// 503, so load balancers stop sending first; default 0.
    #[schemars(default = "some_u64::<DEFAULT_SHUTDOWN_NOTICE_MS>")]
    pub shutdown_notice_ms: Option<u64>,
    /// Most open client connections (see [`super::connections_section`]).
    #[schemars(default = "some_usize::<DEFAULT_MAX_CONNECTIONS>", range(min = 1))]
    pub max_connections: Option<usize>,
    /// Idle keep-alive connections are closed after this, default 60 s.
    #[schemars(default = "some_u64::<DEFAULT_KEEPALIVE_TIMEOUT_S>", range(min = 1))]
    pub keepalive_timeout_s: Option<u64>,
    /// Time from a request's first byte to the end of its head, default 10000 ms.
    #[schemars(default = "some_u64::<DEFAULT_HEADER_TIMEOUT_MS>", range(min = 1))]
    pub header_timeout_ms: Option<u64>,
    /// Concurrent HTTP/2 streams per gRPC connection (see
    /// [`super::grpc_section`]), default 128.
    #[schemars(default = "some_u32::<DEFAULT_MAX_STREAMS>", range(min = 1))]
    pub grpc_max_streams: Option<u32>,
    /// `ModelStreamInfer` requests in flight per stream, default 32.
    #[schemars(default = "some_usize::<DEFAULT_MAX_IN_FLIGHT_PER_STREAM>", range(min = 1))]
    pub grpc_max_in_flight_per_stream: Option<usize>,
    /// Admission permits one gRPC connection may hold, default three
    /// quarters of `max_concurrent_requests`.
    #[schemars(range(min = 1))]
    pub grpc_max_requests_per_connection: Option<usize>,
    /// Bytes of large gRPC messages being received at once, default
    /// `max_body_bytes`.
    pub grpc_max_receiving_bytes: Option<ByteSize>,
    /// TLS on the V2 listener: `{ cert, key, client_ca }` (see
    /// [`super::tls_section`]); absent = cleartext.
    pub tls: Option<RawTls>,
    /// TLS on the admin listener, same shape.
    pub admin_tls: Option<RawTls>,
    /// TLS on the gRPC listener, same shape.
    pub grpc_tls: Option<RawTls>,
    /// HTTP/2 with prior knowledge (h2c) on a cleartext V2 listener,
    /// beside HTTP/1.1; default false.
    pub h2c: Option<bool>,
    /// HTTP/2 limits of the V2 and admin listeners (see
    /// [`super::http2_section`]).
    pub http2: Option<RawHttp2>,
}

/// `[server]`, checked.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// V2 API listener.
    pub listen: SocketAddr,
    /// Admin listener.
    pub admin_listen: SocketAddr,
    /// Names besides its own address that the admin listener answers to
    /// (`server.admin_hosts`; [`crate::admin::host_check`]).
    pub admin_hosts: Vec<super::admin_hosts_section::AdminHost>,
    /// gRPC listener ([`crate::grpc`]); `None`: gRPC is off.
    pub grpc_listen: Option<SocketAddr>,
    /// HTTP worker threads.
    pub threads: usize,
    /// Request limits.
    pub limits: Limits,
    /// Time in-flight requests get after SIGTERM.
    pub shutdown_grace: Duration,
    /// Time between SIGTERM and closing the listeners, while readiness
    /// answers 503.
    pub shutdown_notice: Duration,
    /// Client connection limits and timeouts.
    pub connections: ConnectionLimits,
    /// What one gRPC connection may ask at once.
    pub grpc: GrpcLimits,
    /// TLS per listener (filled in by [`super::tls_section`], which needs
    /// the config's folder).
    pub tls: ListenerTls,
    /// `server.h2c`.
    pub h2c: bool,
    /// `[server.http2]`: HTTP/2 limits of the V2 and admin listeners.
    pub http2: Http2Limits,
}

/// Limits that protect the server from oversized or slow requests.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest body accepted; beyond it the answer is 413.
    pub max_body_bytes: usize,
    /// Requests in flight at once; beyond it the answer is 429.
    pub max_concurrent_requests: usize,
    /// Time allowed to read the whole body.
    pub body_read_timeout: Duration,
    /// Most tensor elements one request may declare.
    pub max_request_elements: usize,
    /// Largest encoded response of one infer request (an upper bound,
    /// see `v2::size`); beyond it the answer is 413.
    pub max_response_bytes: usize,
}

/// Checks `[server]`; `None` when a listener address is not one (the
/// problem is in `issues`).
pub fn check(raw: &RawServer, issues: &mut Issues) -> Option<ServerConfig> {
    let listen = parse_addr(raw.listen.as_deref(), DEFAULT_LISTEN, "server.listen", issues);
    let admin = parse_addr(raw.admin_listen.as_deref(), DEFAULT_ADMIN_LISTEN, "server.admin_listen", issues);
    let admin_hosts = super::admin_hosts_section::check(raw.admin_hosts.as_deref(), issues);
    let grpc =
        raw.grpc_listen.as_deref().map(|text| parse_addr(Some(text), "", "server.grpc_listen", issues));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let threads = issues.positive(raw.threads, cores, "server.threads");
    let max_body = raw.max_body_bytes.map_or(DEFAULT_MAX_BODY_BYTES, |s| s.0);
    if max_body == 0 {
        issues.push("server.max_body_bytes", "must be at least 1 byte");
    }
    let max_response = raw.max_response_bytes.map_or(DEFAULT_MAX_RESPONSE_BYTES, |s| s.0);
    if max_response == 0 {
        issues.push("server.max_response_bytes", "must be at least 1 byte");
    }
    let limits = Limits {
        max_body_bytes: usize::try_from(max_body).unwrap_or(usize::MAX),
        max_concurrent_requests: issues.positive(
            raw.max_concurrent_requests,
            DEFAULT_MAX_CONCURRENT_REQUESTS,
            "server.max_concurrent_requests",
        ),
        body_read_timeout: Duration::from_millis(
            raw.body_read_timeout_ms.unwrap_or(DEFAULT_BODY_READ_TIMEOUT_MS).max(1),
        ),
        max_request_elements: issues.positive(
            raw.max_request_elements,
            DEFAULT_MAX_REQUEST_ELEMENTS,
            "server.max_request_elements",
        ),
        max_response_bytes: usize::try_from(max_response).unwrap_or(usize::MAX),
    };
    let shutdown_grace = Duration::from_secs(raw.shutdown_grace_s.unwrap_or(DEFAULT_SHUTDOWN_GRACE_S));
    let shutdown_notice = Duration::from_millis(raw.shutdown_notice_ms.unwrap_or(DEFAULT_SHUTDOWN_NOTICE_MS));
    let connections = super::connections_section::check(
        RawConnections {
            max_connections: raw.max_connections,
            keepalive_timeout_s: raw.keepalive_timeout_s,
            header_timeout_ms: raw.header_timeout_ms,
        },
        issues,
    );
    let grpc_limits = super::grpc_section::check(
        RawGrpcLimits {
            max_streams: raw.grpc_max_streams,
            max_in_flight_per_stream: raw.grpc_max_in_flight_per_stream,
            max_requests_per_connection: raw.grpc_max_requests_per_connection,
            max_receiving_bytes: raw
                .grpc_max_receiving_bytes
                .map(|s| usize::try_from(s.0).unwrap_or(usize::MAX)),
        },
        Bounds {
            max_concurrent_requests: limits.max_concurrent_requests,
            max_body_bytes: limits.max_body_bytes,
        },
        issues,
    );
    Some(ServerConfig {
        listen: listen?,
        admin_listen: admin?,
        admin_hosts,
        grpc_listen: match grpc {
            Some(addr) => Some(addr?),
            None => None,
        },
        threads,
        limits,
        shutdown_grace,
        shutdown_notice,
        connections,
        grpc: grpc_limits,
        tls: ListenerTls::default(),
        h2c: raw.h2c.unwrap_or(false),
        http2: super::http2_section::check(raw.http2.as_ref(), issues),
    })
}

/// The schema's `server.listen` default.
fn default_listen() -> Option<&'static str> {
    Some(DEFAULT_LISTEN)
}

/// The schema's `server.admin_listen` default.
fn default_admin_listen() -> Option<&'static str> {
    Some(DEFAULT_ADMIN_LISTEN)
}

fn parse_addr(value: Option<&str>, default: &str, path: &str, issues: &mut Issues) -> Option<SocketAddr> {
    let text = value.unwrap_or(default);
    match text.parse() {
        Ok(addr) => Some(addr),
        Err(_) => {
            issues.push(path, format!("{text:?} is not an address like \"127.0.0.1:8000\""));
            None
        }
    }
}
