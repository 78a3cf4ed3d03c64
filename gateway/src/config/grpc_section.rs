//! The gRPC listener's limits in `[server]`: how much one client
//! connection may ask of the server at once. They keep one client from
//! taking every request slot or unbounded memory: HTTP/2 lets a client
//! open many streams on one connection and send many requests on one
//! stream without reading a single response. Read at start-up, with the
//! listener's address.
//!
//! ```toml
//! [server]
//! grpc_listen = "127.0.0.1:8001"
//! grpc_max_streams = 128                 # concurrent HTTP/2 streams per connection
//! grpc_max_in_flight_per_stream = 32     # ModelStreamInfer requests running or unread, per stream
//! grpc_max_requests_per_connection = 3072  # admission permits one connection may hold
//! grpc_max_receiving_bytes = "64MiB"     # large messages being received at once, in all
//! ```

use super::issue::Issues;

/// Default most concurrent HTTP/2 streams per connection (the
/// `SETTINGS_MAX_CONCURRENT_STREAMS` the listener advertises).
pub const DEFAULT_MAX_STREAMS: u32 = 128;
/// Default most requests of one `ModelStreamInfer` stream in flight.
pub const DEFAULT_MAX_IN_FLIGHT_PER_STREAM: usize = 32;
/// By default the calls of one connection leave at least this share
/// (1/n) of `server.max_concurrent_requests` to the other clients.
pub const DEFAULT_RESERVE_DIVISOR: usize = 4;

/// The settings as written (all optional) in `[server]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawGrpcLimits {
    /// `server.grpc_max_streams`.
    pub max_streams: Option<u32>,
    /// `server.grpc_max_in_flight_per_stream`.
    pub max_in_flight_per_stream: Option<usize>,
    /// `server.grpc_max_requests_per_connection`.
    pub max_requests_per_connection: Option<usize>,
    /// `server.grpc_max_receiving_bytes`.
    pub max_receiving_bytes: Option<usize>,
}

/// Checked gRPC limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrpcLimits {
    /// Most concurrent streams (calls) on one connection; the client is
    /// told in the HTTP/2 settings, and a stream beyond it is refused.
    pub max_streams: u32,
    /// Most requests of one `ModelStreamInfer` stream running or waiting
    /// for the client to read their responses; at the limit the server
    /// reads no further request from the stream (HTTP/2 flow control then
    /// holds the client back) until one is done.
    pub max_in_flight_per_stream: usize,
    /// Most admission permits (of `server.max_concurrent_requests`) the
    /// calls of one connection hold at once; beyond it a call (or a
    /// stream's request) gets `RESOURCE_EXHAUSTED` with `retry-after`.
    /// By default three quarters of the permits (at least one is left to
    /// the other clients, when there are two or more).
    pub max_requests_per_connection: usize,
    /// Most bytes of large messages (64 KiB and more) being received at
    /// once over all connections, each counted at its declared length
    /// from its first bytes until it is complete; a large message that
    /// does not fit gets `RESOURCE_EXHAUSTED` (retry shortly), so that
    /// clients starting messages they never finish cannot hold more.
    /// Default and least: `server.max_body_bytes`.
    pub max_receiving_bytes: usize,
}

/// The server-wide settings the gRPC limits are checked against.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// `server.max_concurrent_requests`.
    pub max_concurrent_requests: usize,
    /// `server.max_body_bytes`.
    pub max_body_bytes: usize,
}

/// Checks the settings against `bounds`; each bad value is an issue at
/// its field path.
pub fn check(raw: RawGrpcLimits, bounds: Bounds, issues: &mut Issues) -> GrpcLimits {
    let Bounds { max_concurrent_requests, max_body_bytes } = bounds;
    let reserve = (max_concurrent_requests / DEFAULT_RESERVE_DIVISOR).max(1);
    let share = max_concurrent_requests.saturating_sub(reserve).max(1);
    let mut limits = GrpcLimits {
        max_streams: DEFAULT_MAX_STREAMS,
        max_in_flight_per_stream: DEFAULT_MAX_IN_FLIGHT_PER_STREAM,
        max_requests_per_connection: share,
        max_receiving_bytes: max_body_bytes,
    };
    match raw.max_streams {
        Some(0) => issues.push("server.grpc_max_streams", "must be at least 1"),
        Some(n) => limits.max_streams = n,
        None => {}
    }
    match raw.max_in_flight_per_stream {
        Some(0) => issues.push("server.grpc_max_in_flight_per_stream", "must be at least 1"),
        Some(n) => limits.max_in_flight_per_stream = n,
        None => {}
    }
    match raw.max_requests_per_connection {
        Some(0) => issues.push("server.grpc_max_requests_per_connection", "must be at least 1"),
        Some(n) if n > max_concurrent_requests => issues.push(
            "server.grpc_max_requests_per_connection",
            format!("must be at most server.max_concurrent_requests ({max_concurrent_requests})"),
        ),
        Some(n) => limits.max_requests_per_connection = n,
        None => {}
    }
    match raw.max_receiving_bytes {
        Some(n) if n < max_body_bytes => issues.push(
            "server.grpc_max_receiving_bytes",
            format!(
                "must be at least server.max_body_bytes ({max_body_bytes}), or no message could be received"
            ),
        ),
        Some(n) => limits.max_receiving_bytes = n,
        None => {}
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_request_limit() {
        let mut issues = Issues::default();
        let limits = check(RawGrpcLimits::default(), bounds(4096), &mut issues);
        assert_eq!(limits.max_requests_per_connection, 3072);
        assert_eq!(limits.max_streams, DEFAULT_MAX_STREAMS);
        let share = |max| {
            check(RawGrpcLimits::default(), bounds(max), &mut Issues::default()).max_requests_per_connection
        };
        assert_eq!((share(6), share(2), share(1)), (5, 1, 1));
        assert_eq!(limits.max_receiving_bytes, 64 << 20);
        assert!(issues.is_empty());
    }

    fn bounds(max_concurrent_requests: usize) -> Bounds {
        Bounds { max_concurrent_requests, max_body_bytes: 64 << 20 }
    }

    #[test]
    fn bad_values_are_refused_at_their_field_path() {
        let mut issues = Issues::default();
        let raw = RawGrpcLimits {
            max_streams: Some(0),
            max_in_flight_per_stream: Some(0),
            max_requests_per_connection: Some(10),
            max_receiving_bytes: Some(1 << 20),
        };
        check(raw, bounds(6), &mut issues);
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "server.grpc_max_streams",
                "server.grpc_max_in_flight_per_stream",
                "server.grpc_max_requests_per_connection",
                "server.grpc_max_receiving_bytes"
            ]
        );
        assert!(issues[2].message.contains("at most server.max_concurrent_requests (6)"));
    }
}
