//! Every gRPC error comes from a [`GatewayError`], by its HTTP status, in
//! this one place, so a REST client and a gRPC client see the same failure
//! (the message is the same text as the REST `error` field).
//!
//! | HTTP | gRPC code |
//! |---|---|
//! | 400, 415, 417, 422 | `INVALID_ARGUMENT` |
//! | 401 | `UNAUTHENTICATED` |
//! | 403 | `PERMISSION_DENIED` |
//! | 404 | `NOT_FOUND` |
//! | 405, 501 | `UNIMPLEMENTED` |
//! | 408, 504 | `DEADLINE_EXCEEDED` |
//! | 413, 429 | `RESOURCE_EXHAUSTED` |
//! | 499 | `CANCELLED` |
//! | 502, 503 | `UNAVAILABLE` |
//! | other 4xx | `FAILED_PRECONDITION` |
//! | 500, other 5xx | `INTERNAL` |
//!
//! A 429 or 503 also carries `retry-after` (seconds) in its metadata, as
//! the REST answer does in its header; a tenant's limit adds
//! `ratelimit-policy` and `ratelimit` ([`crate::tenants::refusal`]).

use crate::error::GatewayError;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

/// The gRPC code for an HTTP status (table in the module docs).
pub fn code_for(status: u16) -> Code {
    match status {
        400 | 415 | 417 | 422 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        405 | 501 => Code::Unimplemented,
        408 | 504 => Code::DeadlineExceeded,
        413 | 429 => Code::ResourceExhausted,
        499 => Code::Cancelled,
        502 | 503 => Code::Unavailable,
        400..=499 => Code::FailedPrecondition,
        _ => Code::Internal,
    }
}

/// The gRPC status for `err`.
pub fn status_of(err: &GatewayError) -> Status {
    let mut status = Status::new(code_for(err.status()), err.client_message());
    if let Some(secs) = err.retry_after() {
        status.metadata_mut().insert("retry-after", MetadataValue::from(secs));
    }
    if let GatewayError::TenantLimited(refusal) = err {
        for (name, value) in
            [("ratelimit-policy", &refusal.policy_header), ("ratelimit", &refusal.limit_header)]
        {
            if let Ok(value) = MetadataValue::try_from(value.as_str()) {
                status.metadata_mut().insert(name, value);
            }
        }
    }
    status
}

/// The start of tonic's message for a message over the size limit.
pub const TONIC_OVERSIZED: &str = "Error, decoded message length too large";

/// The start of tonic's message for a compressed message it could not
/// inflate (a corrupt gzip or deflate stream; one that inflates past the
/// size limit is `RESOURCE_EXHAUSTED` already).
pub const TONIC_UNDECOMPRESSABLE: &str = "Error decompressing";

/// tonic's refusals of a message, with the codes gRPC servers answer:
/// `OUT_OF_RANGE` for a message over the size limit as
/// `RESOURCE_EXHAUSTED` (see [`super::listener`]), `INTERNAL` for a
/// corrupt compressed message as `INVALID_ARGUMENT` (the client's fault,
/// as a corrupt gzip body is a 400 over REST); any other status unchanged.
pub fn tonic_refusal(status: Status) -> Status {
    let code = match status.code() {
        Code::OutOfRange if status.message().starts_with(TONIC_OVERSIZED) => Code::ResourceExhausted,
        Code::Internal if status.message().starts_with(TONIC_UNDECOMPRESSABLE) => Code::InvalidArgument,
        _ => return status,
    };
    Status::new(code, status.message().to_string())
}

impl From<GatewayError> for Status {
    fn from(err: GatewayError) -> Status {
        status_of(&err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_statuses_map_to_the_documented_codes() {
        let table = [
            (400, Code::InvalidArgument),
            (401, Code::Unauthenticated),
            (404, Code::NotFound),
            (408, Code::DeadlineExceeded),
            (413, Code::ResourceExhausted),
            (429, Code::ResourceExhausted),
            (500, Code::Internal),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::DeadlineExceeded),
            (409, Code::FailedPrecondition),
        ];
        for (http, code) in table {
            assert_eq!(code_for(http), code, "HTTP {http}");
        }
    }

    #[test]
    fn overload_carries_retry_after() {
        let status = status_of(&GatewayError::TooManyRequests);
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(status.metadata().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
        let missing = status_of(&GatewayError::NotFound("model \"nope\"".into()));
        assert_eq!(missing.code(), Code::NotFound);
        assert!(missing.message().contains("nope"));
    }
}
