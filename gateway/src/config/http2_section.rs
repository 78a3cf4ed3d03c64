//! `[server.http2]`: the HTTP/2 limits of the V2 and admin listeners (over
//! TLS with ALPN `h2`, or h2c), passed to Pingora's HTTP/2 server (the `h2`
//! crate's server builder). They bound what one client connection may make
//! the server hold: streams open at once (stream floods), decoded header
//! bytes per request, bytes received ahead of the handler (flow-control
//! windows), and streams the client resets before the server accepts them
//! (rapid reset, CVE-2023-44487). Read when the listeners are bound (a
//! reload reports a change as needing a restart).
//!
//! ```toml
//! [server.http2]
//! max_concurrent_streams = 100     # SETTINGS_MAX_CONCURRENT_STREAMS
//! max_header_list_bytes = "64KiB"  # SETTINGS_MAX_HEADER_LIST_SIZE
//! stream_window_bytes = "1MiB"     # SETTINGS_INITIAL_WINDOW_SIZE
//! connection_window_bytes = "4MiB" # the connection's window (WINDOW_UPDATE on stream 0)
//! max_pending_reset_streams = 20   # reset before accepted, at once (rapid reset)
//! ```
//!
//! The idle timeout of an HTTP/2 connection is `server.keepalive_timeout_s`
//! (the connection table closes one with no stream in progress); Pingora's
//! HTTP/2 server sends no PINGs. The gRPC listener has its own settings
//! (`server.grpc_max_streams`, see [`super::grpc_section`]).

use super::issue::Issues;
use super::schema_default::{some_u32, some_usize};
use super::size::ByteSize;
use schemars::JsonSchema;
use serde::Deserialize;

/// Default most concurrent streams per connection (Pingora's default).
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 100;
/// Default largest decoded header list of one request: 64 KiB (Pingora's default).
pub const DEFAULT_MAX_HEADER_LIST_BYTES: u32 = 64 << 10;
/// Default bytes a client may send ahead on one stream: 1 MiB.
pub const DEFAULT_STREAM_WINDOW_BYTES: u32 = 1 << 20;
/// Default bytes a client may send ahead on one connection: 4 MiB.
pub const DEFAULT_CONNECTION_WINDOW_BYTES: u32 = 4 << 20;
/// Default streams reset by the client before the server accepted them,
/// held at once; beyond it the connection is closed (the `h2` crate's
/// default).
pub const DEFAULT_MAX_PENDING_RESET_STREAMS: usize = 20;

/// Largest flow-control window HTTP/2 allows (RFC 9113, 6.9.1).
const MAX_WINDOW: u64 = (1 << 31) - 1;
/// Smallest window accepted: HTTP/2's initial 65535 bytes (smaller
/// windows only make uploads slower).
const MIN_WINDOW: u64 = 65_535;
/// Smallest header list accepted: a request's pseudo-headers and a few
/// ordinary ones must fit.
const MIN_HEADER_LIST: u64 = 1 << 10;
/// Largest header list accepted: 16 MiB.
const MAX_HEADER_LIST: u64 = 16 << 20;

/// `[server.http2]` as written.
#[derive(Debug, Deserialize, JsonSchema, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawHttp2 {
    /// Most streams (requests) open at once on one HTTP/2 connection,
    /// advertised in SETTINGS; a stream beyond it is refused
    /// (`REFUSED_STREAM`). Default 100.
    #[schemars(default = "some_u32::<DEFAULT_MAX_CONCURRENT_STREAMS>", range(min = 1))]
    pub max_concurrent_streams: Option<u32>,
    /// Largest decoded header list of one request, advertised in SETTINGS;
    /// a request beyond it is refused (431 or a stream reset). Default
    /// 64KiB, from 1KiB to 16MiB.
    #[schemars(default = "some_u32::<DEFAULT_MAX_HEADER_LIST_BYTES>", extend("minimum" = 1024))]
    pub max_header_list_bytes: Option<ByteSize>,
    /// Bytes a client may send on one stream before the server has read
    /// them (the initial stream window, advertised in SETTINGS). Default
    /// 1MiB, from 65535 to 2^31-1.
    #[schemars(default = "some_u32::<DEFAULT_STREAM_WINDOW_BYTES>", extend("minimum" = 65535))]
    pub stream_window_bytes: Option<ByteSize>,
    /// Bytes a client may send on the whole connection before the server
    /// has read them (bounds the memory one connection holds). Default
    /// 4MiB, from 65535 to 2^31-1.
    #[schemars(default = "some_u32::<DEFAULT_CONNECTION_WINDOW_BYTES>", extend("minimum" = 65535))]
    pub connection_window_bytes: Option<ByteSize>,
    /// Streams the client reset before the server accepted them, held at
    /// once; a client beyond it (rapid reset) gets GOAWAY
    /// `ENHANCE_YOUR_CALM` and its connection is closed. Default 20.
    #[schemars(default = "some_usize::<DEFAULT_MAX_PENDING_RESET_STREAMS>", range(min = 1))]
    pub max_pending_reset_streams: Option<usize>,
}

/// `[server.http2]`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2Limits {
    /// Most concurrent streams per connection.
    pub max_concurrent_streams: u32,
    /// Largest decoded header list, bytes.
    pub max_header_list_bytes: u32,
    /// Initial stream window, bytes.
    pub stream_window_bytes: u32,
    /// Connection window, bytes.
    pub connection_window_bytes: u32,
    /// Most streams reset before being accepted, at once.
    pub max_pending_reset_streams: usize,
}

impl Default for Http2Limits {
    fn default() -> Self {
        Http2Limits {
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            max_header_list_bytes: DEFAULT_MAX_HEADER_LIST_BYTES,
            stream_window_bytes: DEFAULT_STREAM_WINDOW_BYTES,
            connection_window_bytes: DEFAULT_CONNECTION_WINDOW_BYTES,
            max_pending_reset_streams: DEFAULT_MAX_PENDING_RESET_STREAMS,
        }
    }
}

/// Checks `[server.http2]`; each bad value is an issue at its field path
/// (and its default is kept).
pub fn check(raw: Option<&RawHttp2>, issues: &mut Issues) -> Http2Limits {
    let mut limits = Http2Limits::default();
    let Some(raw) = raw else { return limits };
    match raw.max_concurrent_streams {
        Some(0) => issues.push("server.http2.max_concurrent_streams", "must be at least 1"),
        Some(n) => limits.max_concurrent_streams = n,
        None => {}
    }
    let mut bytes = |value: Option<ByteSize>, field: &str, (min, max): (u64, u64), slot: &mut u32| {
        let Some(ByteSize(n)) = value else { return };
        match u32::try_from(n) {
            Ok(v) if (min..=max).contains(&n) => *slot = v,
            _ => issues
                .push(format!("server.http2.{field}"), format!("{n} is not between {min} and {max} bytes")),
        }
    };
    bytes(
        raw.max_header_list_bytes,
        "max_header_list_bytes",
        (MIN_HEADER_LIST, MAX_HEADER_LIST),
        &mut limits.max_header_list_bytes,
    );
    bytes(
        raw.stream_window_bytes,
        "stream_window_bytes",
        (MIN_WINDOW, MAX_WINDOW),
        &mut limits.stream_window_bytes,
    );
    bytes(
        raw.connection_window_bytes,
        "connection_window_bytes",
        (MIN_WINDOW, MAX_WINDOW),
        &mut limits.connection_window_bytes,
    );
    limits.max_pending_reset_streams = issues.positive(
        raw.max_pending_reset_streams,
        DEFAULT_MAX_PENDING_RESET_STREAMS,
        "server.http2.max_pending_reset_streams",
    );
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(toml_text: &str) -> (Http2Limits, Vec<String>) {
        let raw: RawHttp2 = toml::from_str(toml_text).unwrap();
        let mut issues = Issues::default();
        let limits = check(Some(&raw), &mut issues);
        (limits, issues.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn absent_table_gives_the_defaults() {
        let mut issues = Issues::default();
        assert_eq!(check(None, &mut issues), Http2Limits::default());
        assert_eq!(Http2Limits::default().max_header_list_bytes, 65536);
    }

    #[test]
    fn values_are_taken_with_units() {
        let (limits, issues) = checked(
            "max_concurrent_streams = 8\nmax_header_list_bytes = \"4KiB\"\nstream_window_bytes = 65535\n\
             connection_window_bytes = \"16MiB\"\nmax_pending_reset_streams = 5",
        );
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(
            limits,
            Http2Limits {
                max_concurrent_streams: 8,
                max_header_list_bytes: 4096,
                stream_window_bytes: 65535,
                connection_window_bytes: 16 << 20,
                max_pending_reset_streams: 5,
            }
        );
    }

    #[test]
    fn out_of_range_values_name_their_field() {
        let (_, issues) = checked(
            "max_concurrent_streams = 0\nmax_header_list_bytes = 10\nstream_window_bytes = \"4GiB\"\n\
             connection_window_bytes = 100\nmax_pending_reset_streams = 0",
        );
        for field in [
            "max_concurrent_streams",
            "max_header_list_bytes",
            "stream_window_bytes",
            "connection_window_bytes",
            "max_pending_reset_streams",
        ] {
            assert!(
                issues.iter().any(|i| i.starts_with(&format!("server.http2.{field}"))),
                "{field}: {issues:?}"
            );
        }
    }
}
