//! Why a model on an upstream inference server could not answer: the
//! gateway's own words for failures the runtime never sees (the runtime
//! runs local pools only). Built by `upstream` (a call, a model's
//! signature), carried through routing as the remote side of
//! `routing::backend::BackendError`, and held by
//! [`crate::error::GatewayError::Upstream`], which answers with its status
//! and label. Kept at the bottom so that every layer may name it.

use thiserror::Error;

/// What went wrong on the upstream side; each kind has one metric label
/// and one HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpstreamFailure {
    /// The model's signature is not known (its server unreachable since
    /// start-up) or does not fit its route (503, `upstream_model_unavailable`).
    ModelUnavailable,
    /// No address could take the request: connections refused, health
    /// checks failing or breakers open, or the server answered 503 (503,
    /// `upstream_unavailable`).
    Unavailable,
    /// The server answered 429 (429, `upstream_overloaded`).
    Overloaded,
    /// The server refused the request as the client's fault, a 4xx other
    /// than 404 and 429; another server would refuse it too (400,
    /// `upstream_rejected`).
    Rejected,
    /// The server's answer is unusable: a body that does not decode or fit
    /// the request, or a 404 for a model it should serve (502,
    /// `upstream_bad_response`).
    BadResponse,
    /// The server failed: a 5xx other than 503, a broken connection, a body
    /// over the limit (502, `upstream_error`).
    Failed,
    /// No answer in time: the upstream's timeouts or the request's budget
    /// ran out (504, `upstream_timeout`).
    TimedOut,
}

impl UpstreamFailure {
    /// A short, fixed label for metrics, logs and the traffic sample.
    pub const fn label(self) -> &'static str {
        match self {
            UpstreamFailure::ModelUnavailable => "upstream_model_unavailable",
            UpstreamFailure::Unavailable => "upstream_unavailable",
            UpstreamFailure::Overloaded => "upstream_overloaded",
            UpstreamFailure::Rejected => "upstream_rejected",
            UpstreamFailure::BadResponse => "upstream_bad_response",
            UpstreamFailure::Failed => "upstream_error",
            UpstreamFailure::TimedOut => "upstream_timeout",
        }
    }

    /// The HTTP status the client gets.
    pub const fn status(self) -> u16 {
        match self {
            UpstreamFailure::ModelUnavailable | UpstreamFailure::Unavailable => 503,
            UpstreamFailure::Overloaded => 429,
            UpstreamFailure::Rejected => 400,
            UpstreamFailure::BadResponse | UpstreamFailure::Failed => 502,
            UpstreamFailure::TimedOut => 504,
        }
    }

    /// True when another model or pool may answer where this server did
    /// not (and so when a larger budget might have helped): every failure
    /// but [`UpstreamFailure::Rejected`], which is about the request.
    pub const fn falls_back(self) -> bool {
        !matches!(self, UpstreamFailure::Rejected)
    }
}

/// A model on an upstream server could not answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("model '{model}' on upstream '{upstream}': {message}")]
pub struct UpstreamError {
    /// The model, by its name in this gateway.
    pub model: String,
    /// The upstream server (its configured name).
    pub upstream: String,
    /// What went wrong.
    pub failure: UpstreamFailure,
    /// What happened, for the client.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_has_its_status_label_and_fallback() {
        let all = [
            (UpstreamFailure::ModelUnavailable, 503, "upstream_model_unavailable", true),
            (UpstreamFailure::Unavailable, 503, "upstream_unavailable", true),
            (UpstreamFailure::Overloaded, 429, "upstream_overloaded", true),
            (UpstreamFailure::Rejected, 400, "upstream_rejected", false),
            (UpstreamFailure::BadResponse, 502, "upstream_bad_response", true),
            (UpstreamFailure::Failed, 502, "upstream_error", true),
            (UpstreamFailure::TimedOut, 504, "upstream_timeout", true),
        ];
        for (failure, status, label, falls_back) in all {
            assert_eq!(
                (failure.status(), failure.label(), failure.falls_back()),
                (status, label, falls_back)
            );
        }
        let e = UpstreamError {
            model: "heavy".into(),
            upstream: "remote".into(),
            failure: UpstreamFailure::TimedOut,
            message: "no answer".into(),
        };
        assert_eq!(e.to_string(), "model 'heavy' on upstream 'remote': no answer");
    }
}
