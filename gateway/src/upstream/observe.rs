//! The one place where every attempt on an upstream address is recorded,
//! for V2 calls and proxied prefix-route requests alike: metrics and trace
//! spans of upstream calls belong in [`attempt_finished`].
//!
//! Outcome labels are a closed, low-cardinality set ([`Outcome::label`]).

use std::net::SocketAddr;
use std::time::Duration;

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The address answered (any status the caller accepts).
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
    /// The upstream's name.
    pub upstream: &'a str,
    /// The address tried.
    pub addr: SocketAddr,
    /// `v2` (the gateway's own call) or `proxy` (a prefix route).
    pub via: &'static str,
    /// How it ended.
    pub outcome: Outcome,
    /// From sending to the answer (or the failure).
    pub elapsed: Duration,
}

/// Records a finished attempt. Called once per attempt, retries included.
pub fn attempt_finished(record: &AttemptRecord<'_>) {
    tracing::debug!(
        target: "switchyard::upstream",
        upstream = record.upstream,
        addr = %record.addr,
        via = record.via,
        outcome = record.outcome.label(),
        elapsed_us = u64::try_from(record.elapsed.as_micros()).unwrap_or(u64::MAX),
        "upstream attempt"
    );
}
