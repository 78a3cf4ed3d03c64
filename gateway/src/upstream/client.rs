//! A pooled HTTP/1.1 client for calls the gateway makes itself (V2
//! inference and metadata on upstream servers), with the two timeouts an
//! attempt needs: to the response head, and for the whole exchange.
//!
//! One client per upstream: its connect timeout and idle-pool size come
//! from the upstream's config. Idle connections are reused across
//! requests; a request whose pooled connection turns out closed before it
//! was sent is retried on a fresh connection by hyper itself.
//!
//! An `https://` upstream's client speaks TLS (rustls, through
//! hyper-rustls) with the upstream's roots and client certificate; each
//! address gets the server name of the host it was written with (or
//! `tls.server_name`). A handshake that fails (unknown CA, wrong name, a
//! client certificate refused) is a [`TransportError::Connect`] naming why.

use crate::config::upstream_section::UpstreamTls;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
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
    inner: Inner,
    scheme: &'static str,
}

/// Plain HTTP, or HTTPS.
#[derive(Clone, Debug)]
enum Inner {
    Plain(Client<HttpConnector, Full<Bytes>>),
    Tls(Client<HttpsConnector<HttpConnector>, Full<Bytes>>, Box<UpstreamTls>),
}

impl HttpClient {
    /// A client connecting within `connect_timeout`, keeping up to
    /// `max_idle` idle connections per address; `tls` for an `https://`
    /// upstream (its URIs are then `https://`).
    pub fn new(connect_timeout: Duration, max_idle: usize, tls: Option<&UpstreamTls>) -> HttpClient {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        let mut builder = Client::builder(TokioExecutor::new());
        builder.pool_idle_timeout(POOL_IDLE).pool_max_idle_per_host(max_idle).retry_canceled_requests(true);
        let inner = match tls {
            None => Inner::Plain(builder.build(connector)),
            Some(tls) => {
                connector.enforce_http(false);
                let config = (*tls.settings.rustls).clone();
                let names = tls.clone();
                let connector = HttpsConnectorBuilder::new()
                    .with_tls_config(config)
                    .https_only()
                    .with_server_name_resolver(move |uri: &Uri| server_name(Some(&names), uri))
                    .enable_http1()
                    .wrap_connector(connector);
                Inner::Tls(builder.build(connector), Box::new(tls.clone()))
            }
        };
        let scheme = if matches!(inner, Inner::Tls(..)) { "https" } else { "http" };
        HttpClient { inner, scheme }
    }

    /// The URI of `path` (with its query) at `addr`: `http://` or `https://`.
    pub fn uri(&self, addr: SocketAddr, path: &str) -> String {
        format!("{}://{addr}{path}", self.scheme)
    }

    /// Sends `request`; to a TLS upstream with the `Host` of its server
    /// name (hyper would write the address of the URI).
    fn send(&self, mut request: Request<Full<Bytes>>) -> hyper_util::client::legacy::ResponseFuture {
        match &self.inner {
            Inner::Plain(client) => client.request(request),
            Inner::Tls(client, tls) => {
                let addr = request.uri().authority().and_then(|a| a.as_str().parse::<SocketAddr>().ok());
                if let Some(value) = addr.and_then(|a| http::HeaderValue::from_str(&tls.host_header(a)).ok())
                {
                    request.headers_mut().insert(http::header::HOST, value);
                }
                client.request(request)
            }
        }
    }

    /// Sends `request` and reads the whole response within `limits`.
    pub async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
        limits: ExchangeLimits,
    ) -> Result<Exchange, TransportError> {
        let total = async {
            let head = tokio::time::timeout(limits.first_byte, self.send(request))
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

/// The server name for a request to `uri` (an address of the upstream).
fn server_name(tls: Option<&UpstreamTls>, uri: &Uri) -> Result<ServerName<'static>, String> {
    let addr: Option<SocketAddr> = uri.authority().and_then(|a| a.as_str().parse().ok());
    let name = match (tls, addr) {
        (Some(tls), Some(addr)) => tls.server_name(addr),
        _ => uri.host().unwrap_or_default().trim_matches(|c| c == '[' || c == ']').to_string(),
    };
    ServerName::try_from(name.clone()).map_err(|e| format!("{name:?} is not a server name: {e}"))
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
