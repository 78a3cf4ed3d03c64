//! The one place where every attempt on an upstream address is recorded,
//! for V2 calls and proxied prefix-route requests alike:
//! [`attempt_finished`] counts it (`switchyard_upstream_attempts_total`,
//! `switchyard_upstream_attempt_duration_seconds`), ends its trace span
//! ([`crate::telemetry::spans::upstream_call`]) and logs it at debug level.
//!
//! Labels are low-cardinality: the upstream's configured name, [`Via`] and
//! [`Outcome`] (closed sets). Which route or model the attempt served is on
//! the span and in the request metrics, not on these counters.

use crate::telemetry::spans;
use std::net::SocketAddr;
use std::time::Duration;
use tracing::Span;

/// Which path made the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The gateway's own V2 call for a route member.
    V2,
    /// A prefix route's proxied request.
    Proxy,
}

impl Via {
    /// `v2` or `proxy`.
    pub fn label(self) -> &'static str {
        match self {
            Via::V2 => "v2",
            Via::Proxy => "proxy",
        }
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The address answered (V2: a usable answer; proxy: any status below
    /// 400).
    Ok,
    /// No connection could be made.
    ConnectError,
    /// The connection broke after the request was sent.
    Broken,
    /// No answer in time.
    Timeout,
    /// The answer was unusable (not V2, truncated, too large).
    BadResponse,
    /// The address answered 429.
    Overloaded,
    /// The address answered 4xx other than 429 (the request's fault).
    ClientError,
    /// The address answered 5xx.
    ServerError,
}

impl Outcome {
    /// `ok`, `connect_error`, `broken`, `timeout`, `bad_response`,
    /// `overloaded`, `client_error` or `server_error`.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ConnectError => "connect_error",
            Outcome::Broken => "broken",
            Outcome::Timeout => "timeout",
            Outcome::BadResponse => "bad_response",
            Outcome::Overloaded => "overloaded",
            Outcome::ClientError => "client_error",
            Outcome::ServerError => "server_error",
        }
    }

    /// The outcome of an answer with `status`: 429 overloaded, other 4xx
    /// client error, 5xx server error, anything else ok.
    pub fn of_status(status: u16) -> Outcome {
        match status {
            429 => Outcome::Overloaded,
            400..=499 => Outcome::ClientError,
            500..=599 => Outcome::ServerError,
            _ => Outcome::Ok,
        }
    }

    /// Whether the address itself failed (counts towards its breaker).
    pub fn is_address_failure(self) -> bool {
        matches!(
            self,
            Outcome::ConnectError
                | Outcome::Broken
                | Outcome::Timeout
                | Outcome::BadResponse
                | Outcome::ServerError
        )
    }
}

/// One finished attempt.
#[derive(Debug, Clone, Copy)]
pub struct AttemptRecord<'a> {
    /// The upstream's configured name.
    pub upstream: &'a str,
    /// The address tried.
    pub addr: SocketAddr,
    /// Which path made it.
    pub via: Via,
    /// How it ended.
    pub outcome: Outcome,
    /// The response status, when the address answered.
    pub status: Option<u16>,
    /// From the attempt's start to the answer's head (or the failure).
    pub elapsed: Duration,
    /// The attempt's `upstream_call` span (disabled when not traced).
    pub span: &'a Span,
}

/// Records a finished attempt. Called once per attempt, retries included.
pub fn attempt_finished(record: &AttemptRecord<'_>) {
    let (via, outcome) = (record.via.label(), record.outcome.label());
    crate::metrics::upstream_attempt(record.upstream, via, outcome, record.elapsed);
    spans::upstream_call_ended(record.span, record.status, outcome);
    tracing::debug!(
        target: "switchyard::upstream",
        upstream = record.upstream,
        addr = %record.addr,
        via,
        outcome,
        status = record.status,
        elapsed_us = u64::try_from(record.elapsed.as_micros()).unwrap_or(u64::MAX),
        "upstream attempt"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_outcomes() {
        assert_eq!(Outcome::of_status(200), Outcome::Ok);
        assert_eq!(Outcome::of_status(304), Outcome::Ok);
        assert_eq!(Outcome::of_status(404), Outcome::ClientError);
        assert_eq!(Outcome::of_status(429), Outcome::Overloaded);
        assert_eq!(Outcome::of_status(500), Outcome::ServerError);
        assert_eq!(Outcome::of_status(503), Outcome::ServerError);
        assert!(!Outcome::Overloaded.is_address_failure() && !Outcome::ClientError.is_address_failure());
    }
}
