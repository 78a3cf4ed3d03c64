//! A complete HTTP answer built by a handler, independent of Pingora, so
//! handlers can be tested without a server. [`crate::app`] writes it out.

use crate::error::GatewayError;
use crate::header_names as names;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, InvalidHeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};

/// Status, headers and body of one response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// Extra headers (content-type and length are set by the writer from
    /// `content_type` and `body`). Names and values are in their wire form
    /// already, so writing (and cloning a cached reply) copies no text.
    pub headers: Vec<(HeaderName, HeaderValue)>,
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

    /// Adds a header. A value that cannot be a header value (a control
    /// character from a model's name, say) is left out with a warning
    /// rather than failing the whole answer.
    pub fn with_header(self, name: HeaderName, value: impl Into<String>) -> Reply {
        self.with_value(name, HeaderValue::try_from(value.into()))
    }

    /// Adds a header whose value is fixed text (no copy).
    pub fn with_static_header(self, name: HeaderName, value: &'static str) -> Reply {
        self.with_value(name, static_value(value))
    }

    fn with_value(mut self, name: HeaderName, value: Result<HeaderValue, InvalidHeaderValue>) -> Reply {
        match value {
            Ok(value) => self.headers.push((name, value)),
            Err(_) => {
                tracing::warn!(header = %name, "response header left out: its value is not valid in a header")
            }
        }
        self
    }

    /// The V2 error body `{"error": "..."}` with the error's status and,
    /// for 429/503, a `Retry-After` header.
    pub fn error(err: &GatewayError) -> Reply {
        let body = serde_json::json!({ "error": err.client_message() });
        let mut reply = Reply::json_value(err.status(), &body);
        reply.error_label = Some(err.label());
        if let Some(secs) = err.retry_after() {
            reply = reply.with_header(RETRY_AFTER, secs.to_string());
        }
        if let GatewayError::TenantLimited(refusal) = err {
            reply = reply
                .with_header(names::RATELIMIT_POLICY, refusal.policy_header.clone())
                .with_header(names::RATELIMIT, refusal.limit_header.clone());
        }
        if let GatewayError::Unauthorized { realm, .. } = err {
            reply = reply.with_header(WWW_AUTHENTICATE, format!("Bearer realm=\"{realm}\""));
        }
        reply
    }
}

/// `text` as a header value without copying it; an invalid one (outside
/// visible ASCII, space and tab) is refused instead of panicking.
pub fn static_value(text: &'static str) -> Result<HeaderValue, InvalidHeaderValue> {
    if text.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        Ok(HeaderValue::from_static(text))
    } else {
        HeaderValue::from_str(text)
    }
}

impl From<GatewayError> for Reply {
    fn from(err: GatewayError) -> Reply {
        Reply::error(&err)
    }
}
