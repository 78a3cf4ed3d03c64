//! Errors in OpenAI's shape: `{"error": {"message", "type", "param",
//! "code"}}`, with the status the V2 path gives the same failure (every
//! [`GatewayError`] maps through its own status), so a client's retry
//! logic (the SDKs retry 408, 429 and 5xx) sees what a V2 client sees.

use crate::error::GatewayError;
use crate::reply::Reply;
use serde_json::json;

/// One failed OpenAI call.
#[derive(Debug, Clone)]
pub enum OpenAiError {
    /// A request the front end refuses before decoding it (400): `param`
    /// names the field, `message` says what is wrong and what to send.
    Invalid {
        /// The request field at fault (`input`, `model`, ...).
        param: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A failure as the rest of the gateway knows it: its status, metric
    /// label and `Retry-After` / `WWW-Authenticate` headers.
    Gateway(GatewayError),
}

impl OpenAiError {
    /// A 400 about the field `param`.
    pub fn invalid(param: &'static str, message: impl Into<String>) -> OpenAiError {
        OpenAiError::Invalid { param, message: message.into() }
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            OpenAiError::Invalid { .. } => 400,
            OpenAiError::Gateway(e) => e.status(),
        }
    }

    /// OpenAI's `type` for the status: `invalid_request_error` for the
    /// client's mistakes, `authentication_error` (401),
    /// `permission_error` (403), `rate_limit_error` (429), `server_error`
    /// for 5xx.
    pub fn kind(&self) -> &'static str {
        match self.status() {
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_error",
            s if s >= 500 => "server_error",
            _ => "invalid_request_error",
        }
    }

    /// OpenAI's `code`: `invalid_api_key`, `model_not_found`, or the
    /// gateway's error label (`body_too_large`, `shed`, ...); `null` for
    /// a field the front end refused.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            OpenAiError::Invalid { .. } => None,
            OpenAiError::Gateway(GatewayError::Unauthorized { .. }) => Some("invalid_api_key"),
            OpenAiError::Gateway(GatewayError::NotFound(_)) => Some("model_not_found"),
            OpenAiError::Gateway(e) => Some(e.label()),
        }
    }

    /// The HTTP answer: for a gateway error, the V2 error reply's status
    /// and headers with OpenAI's body.
    pub fn reply(&self) -> Reply {
        let (mut reply, message, param) = match self {
            OpenAiError::Invalid { param, message } => {
                let mut reply = Reply::json(400, Vec::new());
                reply.error_label = Some("bad_request");
                (reply, message.clone(), Some(*param))
            }
            OpenAiError::Gateway(e) => (Reply::error(e), e.client_message(), None),
        };
        let body = json!({
            "error": { "message": message, "type": self.kind(), "param": param, "code": self.code() }
        });
        reply.body = serde_json::to_vec(&body).unwrap_or_default().into();
        reply
    }
}

impl From<GatewayError> for OpenAiError {
    fn from(error: GatewayError) -> OpenAiError {
        OpenAiError::Gateway(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(err: &OpenAiError) -> serde_json::Value {
        serde_json::from_slice(&err.reply().body).unwrap()
    }

    #[test]
    fn statuses_types_and_codes() {
        let bad = OpenAiError::invalid("input", "input must not be empty");
        assert_eq!(bad.reply().status, 400);
        let b = body(&bad);
        assert_eq!(b["error"]["type"], "invalid_request_error");
        assert_eq!(b["error"]["param"], "input");
        assert_eq!(b["error"]["code"], serde_json::Value::Null);
        assert_eq!(b["error"]["message"], "input must not be empty");

        let missing = OpenAiError::from(GatewayError::NotFound("unknown model or route \"x\"".into()));
        assert_eq!(
            (missing.reply().status, body(&missing)["error"]["code"].as_str()),
            (404, Some("model_not_found"))
        );

        let key =
            OpenAiError::from(GatewayError::Unauthorized { realm: "switchyard", message: "key".into() });
        let reply = key.reply();
        assert_eq!(reply.status, 401);
        assert!(reply.headers.iter().any(|(n, _)| n == http::header::WWW_AUTHENTICATE));
        assert_eq!(body(&key)["error"]["type"], "authentication_error");

        let busy = OpenAiError::from(GatewayError::TooManyRequests);
        let reply = busy.reply();
        assert_eq!(reply.status, 429);
        assert!(reply.headers.iter().any(|(n, _)| n == http::header::RETRY_AFTER));
        assert_eq!(body(&busy)["error"]["type"], "rate_limit_error");
    }
}
