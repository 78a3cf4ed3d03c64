//! Gateway errors. Each knows its HTTP status, its low-cardinality metric
//! label and whether the client may retry; one mapping serves responses
//! and metrics alike.

use crate::upstream_error::UpstreamError;
use std::borrow::Cow;
use std::time::Duration;
use switchyard_protocol::v2::V2Error;
use switchyard_runtime::{ErrorClass, RuntimeError};
use thiserror::Error;

/// Anything that ends a request with an error response.
#[derive(Debug, Clone, Error)]
pub enum GatewayError {
    /// The V2 request could not be decoded (400/413).
    #[error(transparent)]
    Protocol(#[from] V2Error),
    /// The runtime refused or failed the request.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A model on an upstream server could not answer (its failure's
    /// status: 503, 429, 400, 502 or 504).
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// No model or route by this name (404).
    #[error("{0}")]
    NotFound(String),
    /// The path exists but not for this method (405).
    #[error("method {method} not allowed on {path}")]
    MethodNotAllowed {
        /// The request method.
        method: String,
        /// The request path.
        path: String,
    },
    /// The body is larger than `server.max_body_bytes` (413).
    #[error("request body exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The response would exceed `server.max_response_bytes` (413): the
    /// request asks for more output than the server sends in one answer.
    #[error(
        "the response would take up to {bytes} bytes, more than server.max_response_bytes ({limit}); ask for fewer rows or outputs, or raise the limit"
    )]
    ResponseTooLarge {
        /// The response's size bound.
        bytes: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The body did not arrive within `server.body_read_timeout_ms` (408).
    #[error("request body not received within {0:?}")]
    BodyTimeout(Duration),
    /// The client's body could not be read (400).
    #[error("could not read the request body: {0}")]
    BodyRead(String),
    /// Too many requests in flight (429).
    #[error("too many concurrent requests; retry shortly")]
    TooManyRequests,
    /// The calls of one gRPC connection hold its whole share of the
    /// request permits (429).
    #[error(
        "this connection already has {limit} requests in flight (server.grpc_max_requests_per_connection); retry shortly"
    )]
    ConnectionShare {
        /// The connection's share.
        limit: usize,
    },
    /// The request's latency budget (header or `timeout`) is invalid (400).
    #[error(transparent)]
    Budget(#[from] router_policies::BudgetError),
    /// The routing policy shed the request: overload (429) or no usable
    /// model (503), with `Retry-After` rounded up to whole seconds.
    #[error("route {route:?} shed the request ({reason}); retry in {} ms", retry_after.as_millis())]
    Shed {
        /// The route (or model) addressed.
        route: String,
        /// The policy's reason (`Shed`, `BudgetExhausted`, `Unavailable`).
        reason: router_policies::Reason,
        /// When the client may usefully retry.
        retry_after: Duration,
    },
    /// No valid credentials: a route's API key or the admin token is
    /// missing or wrong (401, with `WWW-Authenticate: Bearer`).
    #[error("{message}")]
    Unauthorized {
        /// The protection space named in `WWW-Authenticate`.
        realm: &'static str,
        /// What is missing and how to send it (never the expected secret).
        message: String,
    },
    /// The caller may not make this request at all, whatever it sends
    /// (403): e.g. an admin request naming another host, or a cross-site
    /// change ([`crate::admin::host_check`], [`crate::admin::cross_site`]).
    #[error("{0}")]
    Forbidden(String),
    /// The body has a `Content-Encoding` the V2 API does not decompress
    /// (415): anything but `identity`, `gzip` and `deflate`, or more than
    /// one coding.
    #[error("Content-Encoding {0:?} is not supported: send the body uncompressed, gzip or deflate")]
    UnsupportedEncoding(String),
    /// The body is not valid in the `Content-Encoding` it names (400): a
    /// corrupt or truncated gzip or deflate stream.
    #[error("the {coding} body could not be decompressed: {message}")]
    CorruptBody {
        /// The coding the request named.
        coding: &'static str,
        /// What the decoder found.
        message: String,
    },
    /// The request's `Expect` asks for something other than
    /// `100-continue` (417).
    #[error("unsupported expectation {0:?}: only \"100-continue\" is supported")]
    ExpectationFailed(String),
    /// A defect of the gateway itself (for example two of its schemas
    /// disagreeing); reported as 500 with what went wrong, never a panic.
    #[error("internal error: {0}")]
    Internal(String),
    /// A tenant's limit refused the request (429; 413 for a batch larger
    /// than its row burst; 503 when the fleet's limits cannot be checked),
    /// as `crate::tenants` words it.
    #[error("{}", .0.message)]
    TenantLimited(Box<LimitRefusal>),
    /// The request's priority (V2 `priority` parameter or `x-priority`
    /// header) is not a whole number >= 0 (400).
    #[error("invalid priority: {0}")]
    BadPriority(String),
    /// A header value is malformed (400).
    #[error("invalid header {name}: {message}")]
    BadHeader {
        /// The header name.
        name: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

impl GatewayError {
    /// The HTTP status, following Triton's conventions.
    pub fn status(&self) -> u16 {
        match self {
            GatewayError::Protocol(e) => e.status(),
            GatewayError::Runtime(e) => match e.class() {
                ErrorClass::InvalidInput => 400,
                ErrorClass::TooLarge => 413,
                ErrorClass::NotFound => 404,
                ErrorClass::Overloaded => 429,
                ErrorClass::Unavailable => 503,
                ErrorClass::Internal => 500,
            },
            GatewayError::Upstream(e) => e.failure.status(),
            GatewayError::NotFound(_) => 404,
            GatewayError::MethodNotAllowed { .. } => 405,
            GatewayError::BodyTooLarge { .. } | GatewayError::ResponseTooLarge { .. } => 413,
            GatewayError::BodyTimeout(_) => 408,
            GatewayError::BodyRead(_)
            | GatewayError::BadHeader { .. }
            | GatewayError::BadPriority(_)
            | GatewayError::CorruptBody { .. } => 400,
            GatewayError::TooManyRequests | GatewayError::ConnectionShare { .. } => 429,
            GatewayError::ExpectationFailed(_) => 417,
            GatewayError::UnsupportedEncoding(_) => 415,
            GatewayError::Unauthorized { .. } => 401,
            GatewayError::Forbidden(_) => 403,
            GatewayError::Internal(_) => 500,
            GatewayError::TenantLimited(r) => r.status,
            GatewayError::Budget(e) => e.http_status(),
            GatewayError::Shed { reason: router_policies::Reason::Unavailable, .. } => 503,
            GatewayError::Shed { .. } => 429,
        }
    }

    /// A low-cardinality label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            GatewayError::Protocol(_) => "bad_request",
            GatewayError::Runtime(e) => e.label(),
            GatewayError::Upstream(e) => e.failure.label(),
            GatewayError::NotFound(_) => "not_found",
            GatewayError::MethodNotAllowed { .. } => "method_not_allowed",
            GatewayError::BodyTooLarge { .. } => "body_too_large",
            GatewayError::ResponseTooLarge { .. } => "response_too_large",
            GatewayError::BodyTimeout(_) => "body_timeout",
            GatewayError::BodyRead(_) => "body_read",
            GatewayError::TooManyRequests => "too_many_requests",
            GatewayError::ConnectionShare { .. } => "connection_share",
            GatewayError::Unauthorized { .. } => "unauthorized",
            GatewayError::Forbidden(_) => "forbidden",
            GatewayError::BadHeader { .. } => "bad_header",
            GatewayError::BadPriority(_) => "bad_priority",
            GatewayError::Internal(_) => "internal",
            GatewayError::ExpectationFailed(_) => "expectation_failed",
            GatewayError::UnsupportedEncoding(_) => "unsupported_encoding",
            GatewayError::CorruptBody { .. } => "corrupt_body",
            GatewayError::Budget(e) => e.label(),
            GatewayError::TenantLimited(r) => r.label,
            GatewayError::Shed { reason, .. } => reason.as_str(),
        }
    }

    /// True when a request with a larger latency budget might not have
    /// failed this way: a shed (the policy weighs the remaining budget),
    /// and the runtime and upstream errors routing falls back from
    /// (overload, an unavailable device, an execution or upstream failure,
    /// a timeout), since fallbacks are tried only while budget remains and
    /// upstream calls are cut to it. Errors about the request's content (bad
    /// input, unknown output) are the same under any budget.
    ///
    /// Identical coalesced requests share such an error only when their
    /// budget is no larger than the one it happened under
    /// ([`crate::cache`]).
    pub fn budget_bound(&self) -> bool {
        match self {
            GatewayError::Shed { .. } => true,
            GatewayError::Runtime(e) => runtime_falls_back(e),
            GatewayError::Upstream(e) => e.failure.falls_back(),
            _ => false,
        }
    }

    /// The message a client is sent (REST `error`, gRPC `grpc-message`,
    /// a stream's `error_message`): the error's text, cut to
    /// [`MAX_MESSAGE_BYTES`] so that a request echoing a huge name gets
    /// its error, not a response its client refuses to read (gRPC
    /// clients refuse metadata over a few KiB).
    pub fn client_message(&self) -> String {
        let text = self.to_string();
        match cut_to(&text, MAX_MESSAGE_BYTES) {
            Cow::Borrowed(_) => text,
            Cow::Owned(cut) => cut,
        }
    }

    /// Seconds a client should wait before retrying, for 429/503 answers.
    pub fn retry_after(&self) -> Option<u64> {
        if let GatewayError::Shed { retry_after, .. } = self {
            let whole = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
            return Some(whole.max(1));
        }
        if let GatewayError::TenantLimited(r) = self {
            return r.retry_after_s;
        }
        match self.status() {
            429 | 503 => Some(1),
            _ => None,
        }
    }
}

/// A tenant limit's refusal as the edges write it: the status, the
/// words, and the IETF draft's `RateLimit-Policy` / `RateLimit` values
/// (gRPC: trailers of the same names). Plain values, so this layer needs
/// nothing of the limits themselves; `crate::tenants` builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRefusal {
    /// 429, 413 (a batch no wait can admit) or 503 (fleet limits unknown).
    pub status: u16,
    /// The error label (`tenant_requests`, ...).
    pub label: &'static str,
    /// What the client is told.
    pub message: String,
    /// Whole seconds until a retry may pass (`Retry-After`); `None` when
    /// no wait helps.
    pub retry_after_s: Option<u64>,
    /// The refusing scope's limits (`RateLimit-Policy`).
    pub policy_header: String,
    /// The limit that refused, with nothing left (`RateLimit`).
    pub limit_header: String,
}

/// True for runtime errors another pool or model may not have: overload,
/// an unavailable device, an execution failure. Client errors (bad input,
/// an unknown output) would fail the same way anywhere. Routing falls back
/// on these (`routing::backend::BackendError::falls_back`).
pub fn runtime_falls_back(e: &RuntimeError) -> bool {
    matches!(e.class(), ErrorClass::Overloaded | ErrorClass::Unavailable | ErrorClass::Internal)
}

/// Longest error message sent to a client, in bytes (see
/// [`GatewayError::client_message`]).
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// Longest piece of client-sent text (a model or input name) quoted in an
/// error message, in bytes.
pub const MAX_QUOTED_BYTES: usize = 128;

/// `text` as an error message may quote it: cut to [`MAX_QUOTED_BYTES`].
pub fn cut(text: &str) -> Cow<'_, str> {
    cut_to(text, MAX_QUOTED_BYTES)
}

/// `text` cut to at most `max` bytes (at a character boundary), saying how
/// much was left out.
fn cut_to(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let end = (0..=max).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    Cow::Owned(format!("{}... ({} more bytes)", &text[..end], text.len() - end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_and_messages_are_cut() {
        assert_eq!(cut("digits"), "digits");
        let long = "é".repeat(100);
        let quoted = cut(&long);
        assert!(quoted.starts_with(&"é".repeat(64)) && quoted.ends_with("... (72 more bytes)"), "{quoted}");
        let err = GatewayError::NotFound(format!("unknown model {:?}", "x".repeat(65_536)));
        let message = err.client_message();
        assert!(message.len() < MAX_MESSAGE_BYTES + 40, "{}", message.len());
        assert!(message.ends_with("more bytes)"));
        assert_eq!(GatewayError::TooManyRequests.client_message(), GatewayError::TooManyRequests.to_string());
    }
}
