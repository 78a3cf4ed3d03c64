//! A complete HTTP answer built by a handler, independent of Pingora, so
//! handlers can be tested without a server. [`crate::app`] writes it out.

use crate::error::GatewayError;
use bytes::Bytes;

/// Status, headers and body of one response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// Extra headers (content-type and length are set by the writer from
    /// `content_type` and `body`).
    pub headers: Vec<(&'static str, String)>,
    /// `Content-Type` of the body.
    pub content_type: &'static str,
    /// The body.
    pub body: Bytes,
    /// The error label when this reply reports an error (for metrics).
    pub error_label: Option<&'static str>,
}

impl Reply {
    /// A JSON reply.
    pub fn json(status: u16, body: impl Into<Bytes>) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            content_type: "application/json",
            body: body.into(),
            error_label: None,
        }
    }

    /// A JSON reply serialising `value`.
    pub fn json_value(status: u16, value: &serde_json::Value) -> Reply {
        Reply::json(status, serde_json::to_vec(value).unwrap_or_default())
    }

    /// An empty 200, as the V2 health endpoints answer.
    pub fn empty(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            content_type: "text/plain",
            body: Bytes::new(),
            error_label: None,
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    /// The V2 error body `{"error": "..."}` with the error's status and,
    /// for 429/503, a `Retry-After` header.
    pub fn error(err: &GatewayError) -> Reply {
        let body = serde_json::json!({ "error": err.to_string() });
        let mut reply = Reply::json_value(err.status(), &body);
        reply.error_label = Some(err.label());
        if let Some(secs) = err.retry_after() {
            reply = reply.with_header("retry-after", secs.to_string());
        }
        if let GatewayError::Unauthorized { realm, .. } = err {
            reply = reply.with_header("www-authenticate", format!("Bearer realm=\"{realm}\""));
        }
        reply
    }
}

impl From<GatewayError> for Reply {
    fn from(err: GatewayError) -> Reply {
        Reply::error(&err)
    }
}
