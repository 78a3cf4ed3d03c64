//! Client connection limits of `[server]`: how many connections the V2
//! listener holds open, how long an idle keep-alive connection is kept,
//! and how long a client may take to send a request's head. They protect
//! the server from slow or idle clients (slowloris, idle floods) that
//! would otherwise hold file descriptors for ever. Read at start-up (a
//! reload reports a change as needing a restart).

use super::issue::Issues;
use std::time::Duration;

/// Default most open client connections on the V2 listener.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default idle time after which a keep-alive connection is closed.
pub const DEFAULT_KEEPALIVE_TIMEOUT_S: u64 = 60;
/// Default time from a request's first byte to the end of its head.
pub const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;

/// The three settings as written (all optional) in `[server]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawConnections {
    /// `server.max_connections`.
    pub max_connections: Option<usize>,
    /// `server.keepalive_timeout_s`.
    pub keepalive_timeout_s: Option<u64>,
    /// `server.header_timeout_ms`.
    pub header_timeout_ms: Option<u64>,
}

/// Checked connection limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most client connections open at once on the V2 listener. At the
    /// limit, the longest-idle connections (idle keep-alive ones, then
    /// ones still sending a head) are closed to make room; when none can
    /// be closed, a new connection gets a 503 and is closed.
    pub max_connections: usize,
    /// A connection with no request in progress is closed after this long
    /// (also before its first request).
    pub keepalive_timeout: Duration,
    /// A request's head must be complete this long after its first byte
    /// arrived, however slowly it trickles in; else the connection is
    /// closed.
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            keepalive_timeout: Duration::from_secs(DEFAULT_KEEPALIVE_TIMEOUT_S),
            header_timeout: Duration::from_millis(DEFAULT_HEADER_TIMEOUT_MS),
        }
    }
}

/// Checks the settings; each bad value is an issue at its field path.
pub fn check(raw: RawConnections, issues: &mut Issues) -> ConnectionLimits {
    let mut limits = ConnectionLimits::default();
    match raw.max_connections {
        Some(0) => issues.push("server.max_connections", "must be at least 1"),
        Some(n) => limits.max_connections = n,
        None => {}
    }
    match raw.keepalive_timeout_s {
        Some(0) => issues.push("server.keepalive_timeout_s", "must be at least 1 second"),
        Some(s) => limits.keepalive_timeout = Duration::from_secs(s),
        None => {}
    }
    match raw.header_timeout_ms {
        Some(0) => issues.push("server.header_timeout_ms", "must be at least 1 ms"),
        Some(ms) => limits.header_timeout = Duration::from_millis(ms),
        None => {}
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let mut issues = Issues::default();
        assert_eq!(check(RawConnections::default(), &mut issues), ConnectionLimits::default());
        let raw = RawConnections {
            max_connections: Some(10),
            keepalive_timeout_s: Some(2),
            header_timeout_ms: Some(500),
        };
        let limits = check(raw, &mut issues);
        assert!(issues.is_empty());
        assert_eq!(limits.max_connections, 10);
        assert_eq!(limits.keepalive_timeout, Duration::from_secs(2));
        assert_eq!(limits.header_timeout, Duration::from_millis(500));
    }

    #[test]
    fn zero_is_refused_at_its_field_path() {
        let mut issues = Issues::default();
        let raw = RawConnections {
            max_connections: Some(0),
            keepalive_timeout_s: Some(0),
            header_timeout_ms: Some(0),
        };
        check(raw, &mut issues);
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            ["server.max_connections", "server.keepalive_timeout_s", "server.header_timeout_ms"]
        );
    }
}
