//! A pooled HTTP/1.1 client for calls the gateway makes itself (V2
//! inference and metadata on upstream servers), with the two timeouts an
//! attempt needs: to the response head, and for the whole exchange.
//!
//! One client per upstream: its connect timeout and idle-pool size come
//! from the upstream's config. Idle connections are reused across
//! requests; a request whose pooled connection turns out closed before it
//! was sent is retried on a fresh connection by hyper itself.

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;
use thiserror::Error;

/// How long an idle pooled connection is kept: well under the usual
/// server keep-alive timeouts (Switchyard's own default is 60 s), so the
/// client drops an idle connection before the server closes it, rather
/// than sending a request into a connection the server is closing.
pub const POOL_IDLE: Duration = Duration::from_secs(30);

/// A complete response.
#[derive(Debug)]
pub struct Exchange {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its whole body.
    pub body: Bytes,
}

/// Why an exchange produced no response.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum TransportError {
    /// No connection could be made (refused, unreachable, connect timeout):
    /// the request was not sent, any other address may take it.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The connection failed after the request was (maybe) sent: reset,
    /// closed, or a response that is not HTTP.
    #[error("connection failed: {0}")]
    Broken(String),
    /// No response head within the first-byte timeout.
    #[error("no response within {0:?}")]
    FirstByteTimeout(Duration),
    /// The response did not complete within the total timeout.
    #[error("response not complete within {0:?}")]
    TotalTimeout(Duration),
    /// The response body is larger than allowed.
    #[error("response body larger than {0} bytes")]
    TooLarge(usize),
}

impl TransportError {
    /// True for the timeouts.
    pub fn is_timeout(&self) -> bool {
        matches!(self, TransportError::FirstByteTimeout(_) | TransportError::TotalTimeout(_))
    }
}

/// Limits of one exchange.
#[derive(Debug, Clone, Copy)]
pub struct ExchangeLimits {
    /// Until the response head.
    pub first_byte: Duration,
    /// Until the end of the body.
    pub total: Duration,
    /// Largest body accepted.
    pub max_body: usize,
}

/// A pooled client; cheap to share.
#[derive(Clone, Debug)]
pub struct HttpClient {
    inner: Client<HttpConnector, Full<Bytes>>,
}

impl HttpClient {
    /// A client connecting within `connect_timeout`, keeping up to
    /// `max_idle` idle connections per address.
    pub fn new(connect_timeout: Duration, max_idle: usize) -> HttpClient {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        let inner = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(max_idle)
            .retry_canceled_requests(true)
            .build(connector);
        HttpClient { inner }
    }

    /// Sends `request` and reads the whole response within `limits`.
    pub async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
        limits: ExchangeLimits,
    ) -> Result<Exchange, TransportError> {
        let total = async {
            let head = tokio::time::timeout(limits.first_byte, self.inner.request(request))
                .await
                .map_err(|_| TransportError::FirstByteTimeout(limits.first_byte))?
                .map_err(|e| {
                    let text = error_chain(&e);
                    if e.is_connect() {
                        TransportError::Connect(text)
                    } else {
                        TransportError::Broken(text)
                    }
                })?;
            let (parts, body) = head.into_parts();
            let body = Limited::new(body, limits.max_body).collect().await.map_err(|e| {
                if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                    TransportError::TooLarge(limits.max_body)
                } else {
                    TransportError::Broken(e.to_string())
                }
            })?;
            Ok(Exchange { status: parts.status, headers: parts.headers, body: body.to_bytes() })
        };
        tokio::time::timeout(limits.total, total)
            .await
            .map_err(|_| TransportError::TotalTimeout(limits.total))?
    }
}

/// The error and its sources, e.g. "client error (Connect): tcp connect
/// error: Connection refused (os error 111)".
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
