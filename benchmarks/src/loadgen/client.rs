//! HTTP/1.1 client side: the target, request construction, and one
//! keep-alive connection per virtual client (raw `hyper::client::conn::http1`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue, HOST};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::body::PreparedBody;
use super::error::{LoadgenError, Result};

/// A resolved `http://` target.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// Socket address connections go to.
    pub addr: SocketAddr,
    /// `Host` header value (the URL's authority).
    pub host: HeaderValue,
    /// Origin-form request target (path and query).
    pub path: Uri,
}

impl Target {
    /// Parses and resolves `url` (plain `http` only).
    pub async fn resolve(url: &str) -> Result<Self> {
        let bad = |reason: &str| LoadgenError::Url { url: url.to_string(), reason: reason.to_string() };
        let uri: Uri = url.parse().map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        match uri.scheme_str() {
            Some("http") => {}
            _ => return Err(bad("only http:// URLs are supported")),
        }
        let authority = uri.authority().ok_or_else(|| bad("missing host"))?;
        let port = authority.port_u16().unwrap_or(80);
        let addr = tokio::net::lookup_host((authority.host(), port))
            .await
            .map_err(|e| bad(&e.to_string()))?
            .next()
            .ok_or_else(|| bad("host resolves to no address"))?;
        let host = HeaderValue::from_str(authority.as_str()).map_err(|e| bad(&e.to_string()))?;
        let path: Uri = uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        Ok(Target { url: url.to_string(), addr, host, path })
    }
}

/// Parses a `--header 'name: value'` argument.
pub fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue)> {
    let bad = || LoadgenError::Args(format!("--header {s:?}: expected 'name: value'"));
    let (name, value) = s.split_once(':').ok_or_else(bad)?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
    let value = HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
    Ok((name, value))
}

/// Builds requests from prepared bodies, cycling through them round-robin.
/// Shared by all workers; building a request clones only reference-counted data.
#[derive(Debug)]
pub struct RequestTemplate {
    path: Uri,
    host: HeaderValue,
    bodies: Vec<PreparedBody>,
    extra: Vec<(HeaderName, HeaderValue)>,
    next: AtomicUsize,
}

impl RequestTemplate {
    /// Creates a template; `extra` headers override the bodies' own headers.
    pub fn new(
        target: &Target,
        bodies: Vec<PreparedBody>,
        extra: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<Self> {
        if bodies.is_empty() {
            return Err(LoadgenError::Args("no request bodies".into()));
        }
        Ok(RequestTemplate {
            path: target.path.clone(),
            host: target.host.clone(),
            bodies,
            extra,
            next: AtomicUsize::new(0),
        })
    }

    /// The prepared bodies.
    pub fn bodies(&self) -> &[PreparedBody] {
        &self.bodies
    }

    /// The next request (a `POST` with the next body in round-robin order).
    pub fn build(&self) -> Request<Full<Bytes>> {
        let n = self.bodies.len();
        let idx = if n == 1 { 0 } else { self.next.fetch_add(1, Ordering::Relaxed) % n };
        let body = self.bodies.get(idx);
        let mut req = Request::new(Full::new(body.map(|b| b.body.clone()).unwrap_or_default()));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = self.path.clone();
        let headers = req.headers_mut();
        headers.insert(HOST, self.host.clone());
        for (k, v) in body.map(|b| b.headers.as_slice()).unwrap_or_default() {
            headers.insert(k.clone(), v.clone());
        }
        for (k, v) in &self.extra {
            headers.insert(k.clone(), v.clone());
        }
        req
    }
}

/// What became of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A complete response with this status code was received.
    Status(u16),
    /// Connecting, sending or reading the response failed.
    ConnError,
    /// The request did not complete within the timeout.
    Timeout,
}

impl Outcome {
    /// True for a 2xx response.
    pub fn is_success(self) -> bool {
        matches!(self, Outcome::Status(s) if (200..300).contains(&s))
    }
}

/// One keep-alive HTTP/1.1 connection that reconnects on demand.
#[derive(Debug)]
pub struct Conn {
    addr: SocketAddr,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Connections opened so far (including the first).
    pub connects: u64,
}

impl Conn {
    /// A connection to `addr`, not yet opened.
    pub fn new(addr: SocketAddr) -> Self {
        Conn { addr, sender: None, connects: 0 }
    }

    /// Opens the connection now (before the measurement starts).
    pub async fn open(&mut self, timeout: Duration) -> Result<()> {
        match tokio::time::timeout(timeout, self.ensure_ready()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(LoadgenError::Net(format!("connect {}: {e}", self.addr))),
            Err(_) => Err(LoadgenError::Net(format!("connect {}: timed out", self.addr))),
        }
    }

    async fn ensure_ready(&mut self) -> std::result::Result<(), String> {
        if let Some(sender) = self.sender.as_mut() {
            if sender.ready().await.is_ok() {
                return Ok(());
            }
            self.sender = None;
        }
        let stream = TcpStream::connect(self.addr).await.map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            // The connection ends when the sender is dropped or the peer closes; nothing to report.
            let _ = conn.await;
        });
        self.connects += 1;
        sender.ready().await.map_err(|e| e.to_string())?;
        self.sender = Some(sender);
        Ok(())
    }

    async fn send_inner(&mut self, req: Request<Full<Bytes>>) -> Outcome {
        if self.ensure_ready().await.is_err() {
            return Outcome::ConnError;
        }
        let Some(sender) = self.sender.as_mut() else {
            return Outcome::ConnError;
        };
        let result = async {
            let resp = sender.send_request(req).await?;
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            while let Some(frame) = body.frame().await {
                frame?;
            }
            Ok::<u16, hyper::Error>(status)
        }
        .await;
        match result {
            Ok(status) => Outcome::Status(status),
            Err(_) => {
                self.sender = None;
                Outcome::ConnError
            }
        }
    }

    /// Sends `req` (reconnecting first if needed) and reads the whole response.
    pub async fn send(&mut self, req: Request<Full<Bytes>>, timeout: Duration) -> Outcome {
        match tokio::time::timeout(timeout, self.send_inner(req)).await {
            Ok(outcome) => outcome,
            Err(_) => {
                self.sender = None;
                Outcome::Timeout
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn target_and_template() {
        let t = Target::resolve("http://127.0.0.1:8000/v2/models/digits/infer?x=1").await.unwrap();
        assert_eq!(t.addr, "127.0.0.1:8000".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:8000");
        assert_eq!(t.path, "/v2/models/digits/infer?x=1");
        assert!(Target::resolve("https://127.0.0.1/").await.is_err());
        let bodies = vec![
            PreparedBody { body: Bytes::from_static(b"a"), headers: vec![] },
            PreparedBody {
                body: Bytes::from_static(b"b"),
                headers: vec![(HeaderName::from_static("x-k"), HeaderValue::from_static("body"))],
            },
        ];
        let tpl = RequestTemplate::new(&t, bodies, vec![parse_header("X-K: user").unwrap()]).unwrap();
        let r1 = tpl.build();
        let r2 = tpl.build();
        let r3 = tpl.build();
        assert_eq!(r1.method(), Method::POST);
        assert_eq!(r1.uri(), "/v2/models/digits/infer?x=1");
        assert_eq!(r1.headers()[HOST], "127.0.0.1:8000");
        assert_eq!(r1.headers()["x-k"], "user");
        assert_eq!(r2.headers()["x-k"], "user");
        let bytes =
            |r: Request<Full<Bytes>>| async move { r.into_body().collect().await.unwrap().to_bytes() };
        assert_eq!(bytes(r1).await, "a");
        assert_eq!(bytes(r2).await, "b");
        assert_eq!(bytes(r3).await, "a");
        assert!(parse_header("nocolon").is_err());
    }
}
