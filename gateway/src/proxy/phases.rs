//! The Pingora phases of a prefix-route request, in order. Each function
//! is called from the matching hook of [`crate::app::GatewayApp`], with
//! the request's [`ProxyCtx`].
//!
//! 1. [`start`] (`request_filter`): size limit on the declared length
//!    (413); the cache lookup when the route has one (the body, at most
//!    64 KiB, is read and kept in Pingora's retry buffer, which re-sends
//!    it upstream on a miss). Otherwise the body is not touched: Pingora
//!    streams it to the upstream as it arrives.
//! 2. [`ProxyCtx::peer`] (`upstream_peer`): an address by health, breaker
//!    and P2C over peak-EWMA, not tried before by this request, with the
//!    upstream's connect and first-byte timeouts (cut to the total). The
//!    attempt's `upstream_call` span starts here (traced requests only).
//! 3. [`ProxyCtx::forward`] (`upstream_request_filter`): path rewrite,
//!    `Host`, `X-Forwarded-*` and the attempt's `traceparent`
//!    ([`super::headers`]).
//! 4. [`ProxyCtx::request_body`] (`request_body_filter`): counts bytes
//!    against `max_request_bytes` (413) and the total timeout.
//! 5. [`ProxyCtx::connect_failed`] (`fail_to_connect`) and
//!    [`ProxyCtx::proxy_failed`] (`error_while_proxy`): the attempt failed;
//!    retry on another address when one is left and time remains, for a
//!    connect failure always (nothing was sent), after that only for
//!    idempotent requests whose response has not started and whose body
//!    Pingora still holds.
//! 6. [`ProxyCtx::upstream_response`] (`upstream_response_filter`): the
//!    address answered (its latency is the time to the response head; only
//!    502-504 count against its breaker: other statuses are the app's
//!    answers); declared length against `max_response_bytes` (502),
//!    hop-by-hop fields removed, cacheability decided.
//! 7. [`ProxyCtx::upstream_body`] (`upstream_response_body_filter`): counts
//!    bytes (a stream over the limit is cut), fills the cache entry; the
//!    attempt's span ends with the body.
//!
//! Every attempt ends in [`crate::upstream::observe::attempt_finished`]
//! (metrics, span), from step 5 or 6.
//! 8. [`error_reply`] (`fail_to_proxy`): a JSON error the client can read:
//!    504 for timeouts, 502 for connection failures and bad answers.

use super::cache::CachedResponse;
use super::headers::{forward_request, set_trace_context, strip_hop_by_hop, Forwarding};
use super::routes::PrefixRoute;
use crate::cache::control::Control;
use crate::config::Limits;
use crate::http_io::read_body;
use crate::reply::Reply;
use crate::telemetry::spans::{self, UpstreamCall};
use crate::upstream::address::Attempt;
use crate::upstream::observe::{attempt_finished, AttemptRecord, Outcome, Via};
use crate::upstream::select::choose;
use bytes::{Bytes, BytesMut};
use http::Method;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::{HttpPeer, Session};
use pingora::{Error, ErrorSource, ErrorType};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Span;

/// How long an idle pooled upstream connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The cache's part in one request.
#[derive(Debug)]
enum CacheStep {
    /// The route has no cache.
    Off,
    /// Not looked up (`x-cache: bypass`); stored when `key` is set
    /// (`Cache-Control: no-cache`).
    Bypass(Option<[u8; 32]>),
    /// Looked up, not found (`x-cache: miss`).
    Miss([u8; 32]),
}

/// A response being collected for the cache.
#[derive(Debug)]
struct Filling {
    key: [u8; 32],
    ttl: Duration,
    status: u16,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    body: BytesMut,
}

/// Per-request state of a proxied request.
#[derive(Debug)]
pub struct ProxyCtx {
    /// The route.
    pub route: Arc<PrefixRoute>,
    deadline: Option<Instant>,
    tried: Vec<usize>,
    attempt: Option<Attempt>,
    addr: Option<SocketAddr>,
    /// The current attempt's `upstream_call` span (disabled when the
    /// request is not traced), kept until its response ends.
    span: Span,
    forwarding: Forwarding,
    /// Request body bytes sent upstream.
    pub request_bytes: u64,
    response_bytes: u64,
    cache: CacheStep,
    filling: Option<Filling>,
}

/// What [`start`] decided.
pub enum Start {
    /// Proxy it.
    Proxy(Box<ProxyCtx>),
    /// Answered from the cache; the status sent.
    Answered(u16),
    /// Refused; the reply to send.
    Refused(Reply),
}

fn declared_length(session: &Session) -> Option<u64> {
    session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Step 1.
pub async fn start(
    session: &mut Session,
    route: &Arc<PrefixRoute>,
    limits: &Limits,
    received: Instant,
) -> Start {
    let header = session.req_header();
    let declared = declared_length(session);
    if declared.is_some_and(|n| n > route.config.max_request_bytes) {
        let limit = usize::try_from(route.config.max_request_bytes).unwrap_or(usize::MAX);
        return Start::Refused(Reply::error(&crate::error::GatewayError::BodyTooLarge { limit }));
    }
    let forwarding = Forwarding {
        client_ip: session.client_addr().and_then(|a| a.as_inet()).map(|a| a.ip()),
        host: header.headers.get(http::header::HOST).and_then(|v| v.to_str().ok()).map(str::to_string),
    };
    let mut ctx = ProxyCtx {
        route: route.clone(),
        deadline: route.upstream.config.timeouts.total.map(|t| received + t),
        tried: Vec::new(),
        attempt: None,
        addr: None,
        span: Span::none(),
        forwarding,
        request_bytes: 0,
        response_bytes: 0,
        cache: CacheStep::Off,
        filling: None,
    };
    match lookup(session, &mut ctx, declared, limits).await {
        Ok(Some(status)) => Start::Answered(status),
        Ok(None) => Start::Proxy(Box::new(ctx)),
        Err(reply) => Start::Refused(reply),
    }
}

/// The cache part of step 1: `Some(status)` when answered from it.
async fn lookup(
    session: &mut Session,
    ctx: &mut ProxyCtx,
    declared: Option<u64>,
    limits: &Limits,
) -> Result<Option<u16>, Reply> {
    let Some(cache) = &ctx.route.cache else { return Ok(None) };
    let header = session.req_header();
    let method = header.method.clone();
    let chunked = header.headers.contains_key(http::header::TRANSFER_ENCODING);
    let control = Control::from_headers(&header.headers);
    let body_fits = !chunked && declared.unwrap_or(0) <= cache.config.max_body_bytes as u64;
    if !cache.allows(&method) || !body_fits || control == Control::NoStore {
        cache.stats.bypass.fetch_add(1, Ordering::Relaxed);
        ctx.cache = CacheStep::Bypass(None);
        return Ok(None);
    }
    let body = if declared.unwrap_or(0) > 0 {
        // Kept by Pingora (up to 64 KiB) and re-sent upstream on a miss.
        session.enable_retry_buffering();
        let read_limits = Limits { max_body_bytes: cache.config.max_body_bytes, ..limits.clone() };
        read_body(session, &read_limits).await.map_err(|e| Reply::error(&e))?
    } else {
        Bytes::new()
    };
    ctx.request_bytes = body.len() as u64;
    let header = session.req_header();
    let path = header.uri.path_and_query().map_or("/", |p| p.as_str());
    let key = cache.key(&ctx.route.upstream.config.name, &method, path, &header.headers, &body);
    if control == Control::NoCache {
        cache.stats.bypass.fetch_add(1, Ordering::Relaxed);
        ctx.cache = CacheStep::Bypass(Some(key));
        return Ok(None);
    }
    let Some(hit) = cache.get(&key).await else {
        cache.stats.misses.fetch_add(1, Ordering::Relaxed);
        ctx.cache = CacheStep::Miss(key);
        return Ok(None);
    };
    cache.stats.hits.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = write_cached(session, &hit, method == Method::HEAD).await {
        // The client's connection failed; nothing else can be sent on it.
        tracing::debug!(error = %e, "could not write a cached response");
    }
    Ok(Some(hit.status))
}

async fn write_cached(session: &mut Session, hit: &CachedResponse, head_only: bool) -> pingora::Result<()> {
    let mut header = ResponseHeader::build(hit.status, Some(hit.headers.len() + 2))?;
    for (name, value) in &hit.headers {
        header.append_header(name.clone(), value.clone())?;
    }
    header.insert_header(http::header::CONTENT_LENGTH, hit.body.len().to_string())?;
    header.insert_header("x-cache", "hit-l1")?;
    let no_body = head_only || hit.body.is_empty();
    session.write_response_header(Box::new(header), no_body).await?;
    if !no_body {
        session.write_response_body(Some(hit.body.clone()), true).await?;
    }
    Ok(())
}

impl ProxyCtx {
    fn time_left(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }

    fn timed_out(&self) -> bool {
        self.time_left().is_some_and(|t| t.is_zero())
    }

    /// Step 2; `trace_parent` is the request's span when it is sampled.
    pub fn peer(&mut self, trace_parent: Option<&Span>) -> pingora::Result<Box<HttpPeer>> {
        let upstream = self.route.upstream.clone();
        if self.timed_out() {
            return Err(Error::explain(ErrorType::HTTPStatus(504), self.describe("total timeout reached")));
        }
        let Some((index, attempt)) = choose(&upstream.addresses, &self.tried) else {
            let why = if self.tried.is_empty() {
                "no address can take requests (health checks failing or breakers open)"
            } else {
                "every address failed"
            };
            return Err(Error::explain(ErrorType::HTTPStatus(502), self.describe(why)));
        };
        self.tried.push(index);
        let addr = attempt.address().addr;
        self.addr = Some(addr);
        self.attempt = Some(attempt);
        let call = UpstreamCall {
            upstream: &upstream.config.name,
            addr,
            via: Via::Proxy.label(),
            route: Some(&self.route.config.name),
            model: None,
        };
        self.span = spans::upstream_call(trace_parent, &call);
        let timeouts = upstream.config.timeouts;
        let left = self.time_left().unwrap_or(Duration::MAX);
        let mut peer = HttpPeer::new(addr, false, String::new());
        peer.options.connection_timeout = Some(timeouts.connect.min(left));
        peer.options.read_timeout = Some(timeouts.first_byte.min(left));
        peer.options.write_timeout = Some(timeouts.first_byte.min(left));
        peer.options.idle_timeout = Some(IDLE_TIMEOUT);
        Ok(Box::new(peer))
    }

    /// Step 3.
    pub fn forward(&self, req: &mut RequestHeader) -> pingora::Result<()> {
        match self.addr {
            Some(addr) => {
                forward_request(req, &self.route, addr, &self.forwarding)?;
                set_trace_context(req, &self.span)
            }
            None => Err(Error::explain(ErrorType::InternalError, "no upstream address chosen")),
        }
    }

    /// Step 4.
    pub fn request_body(&mut self, body: &Option<Bytes>) -> pingora::Result<()> {
        self.request_bytes += body.as_ref().map_or(0, |b| b.len() as u64);
        if self.request_bytes > self.route.config.max_request_bytes {
            let limit = self.route.config.max_request_bytes;
            return Err(Error::explain(
                ErrorType::HTTPStatus(413),
                format!("request body exceeds the limit of {limit} bytes"),
            ));
        }
        if self.timed_out() {
            return Err(Error::explain(ErrorType::HTTPStatus(504), self.describe("total timeout reached")));
        }
        Ok(())
    }

    /// Records the end of the current attempt: `status` when the address
    /// answered. A transport failure or a 502-504 counts against the
    /// address; other statuses are the app's answers.
    fn finish_attempt(&mut self, outcome: Outcome, status: Option<u16>) {
        let Some(attempt) = self.attempt.take() else { return };
        let elapsed = attempt.started().elapsed();
        attempt_finished(&AttemptRecord {
            upstream: &self.route.upstream.config.name,
            addr: attempt.address().addr,
            via: Via::Proxy,
            outcome,
            status,
            elapsed,
            span: &self.span,
        });
        let address_failed = match status {
            Some(code) => matches!(code, 502..=504),
            None => outcome.is_address_failure(),
        };
        if address_failed {
            attempt.failed();
        } else {
            attempt.succeeded(elapsed);
        }
    }

    /// Ends the current attempt's span.
    fn end_span(&mut self) {
        self.span = Span::none();
    }

    /// Whether another attempt may follow: an untried usable address, and time.
    fn can_retry(&self) -> bool {
        let ok = crate::upstream::select::eligible(&self.route.upstream.addresses, Instant::now());
        !self.timed_out() && (0..ok.len()).any(|i| !self.tried.contains(&i) && ok[i])
    }

    /// Step 5, connection failures.
    pub fn connect_failed(&mut self, mut e: Box<Error>) -> Box<Error> {
        let outcome = if matches!(e.etype(), ErrorType::ConnectTimedout) {
            Outcome::Timeout
        } else {
            Outcome::ConnectError
        };
        self.finish_attempt(outcome, None);
        self.end_span();
        e.set_retry(self.can_retry());
        e
    }

    /// Step 5, failures after connecting.
    pub fn proxy_failed(&mut self, session: &Session, mut e: Box<Error>) -> Box<Error> {
        if *e.esource() == ErrorSource::Upstream {
            let timeout = matches!(e.etype(), ErrorType::ReadTimedout | ErrorType::WriteTimedout);
            self.finish_attempt(if timeout { Outcome::Timeout } else { Outcome::Broken }, None);
        } else {
            // The client went away, or a limit of ours: not the address's fault.
            self.attempt = None;
        }
        self.end_span();
        let safe = session.req_header().method.is_idempotent()
            && !session.retry_buffer_truncated()
            && session.response_written().is_none()
            && !matches!(e.etype(), ErrorType::HTTPStatus(_));
        e.set_retry(safe && *e.esource() == ErrorSource::Upstream && self.can_retry());
        e
    }

    /// Step 6.
    pub fn upstream_response(&mut self, resp: &mut ResponseHeader) -> pingora::Result<()> {
        if resp.status.is_informational() {
            // `100 Continue` and the like: the real answer is still to come.
            strip_hop_by_hop(resp);
            return Ok(());
        }
        let status = resp.status.as_u16();
        self.finish_attempt(Outcome::of_status(status), Some(status));
        let declared =
            resp.headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok());
        if let (Some(limit), Some(len)) = (self.route.config.max_response_bytes, declared) {
            if len > limit {
                return Err(Error::explain(
                    ErrorType::HTTPStatus(502),
                    self.describe(&format!("response of {len} bytes exceeds the limit of {limit}")),
                ));
            }
        }
        strip_hop_by_hop(resp);
        self.filling = self.cache_fill(resp, declared);
        Ok(())
    }

    /// Whether (and for how long) this response is stored.
    fn cache_fill(&self, resp: &ResponseHeader, declared: Option<u64>) -> Option<Filling> {
        let key = match self.cache {
            CacheStep::Miss(key) | CacheStep::Bypass(Some(key)) => key,
            _ => return None,
        };
        let cache = self.route.cache.as_ref()?;
        if declared.is_some_and(|n| n > cache.config.max_entry_bytes as u64) {
            return None;
        }
        let ttl = cache.response_ttl(resp)?;
        let headers = resp
            .headers
            .iter()
            .filter(|(n, _)| *n != http::header::TRANSFER_ENCODING && *n != http::header::CONTENT_LENGTH)
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        Some(Filling { key, ttl, status: resp.status.as_u16(), headers, body: BytesMut::new() })
    }

    /// Adds `x-cache` to the response the client gets.
    pub fn response(&self, resp: &mut ResponseHeader) -> pingora::Result<()> {
        let value = match self.cache {
            CacheStep::Off => return Ok(()),
            CacheStep::Bypass(_) => "bypass",
            CacheStep::Miss(_) => "miss",
        };
        resp.insert_header("x-cache", value)
    }

    /// Step 7.
    pub fn upstream_body(&mut self, body: &Option<Bytes>, end: bool) -> pingora::Result<()> {
        let chunk = body.as_ref().map_or(&[][..], |b| &b[..]);
        self.response_bytes += chunk.len() as u64;
        if let Some(limit) = self.route.config.max_response_bytes.filter(|l| self.response_bytes > *l) {
            self.filling = None;
            return Err(Error::explain(
                ErrorType::HTTPStatus(502),
                self.describe(&format!("response exceeds {limit} bytes")),
            ));
        }
        if self.timed_out() {
            self.filling = None;
            return Err(Error::explain(ErrorType::HTTPStatus(504), self.describe("total timeout reached")));
        }
        let max_entry = self.route.cache.as_ref().map_or(0, |c| c.config.max_entry_bytes);
        if let Some(filling) = &mut self.filling {
            if filling.body.len() + chunk.len() > max_entry {
                self.filling = None;
            } else {
                filling.body.extend_from_slice(chunk);
            }
        }
        if end {
            self.end_span();
            self.store();
        }
        Ok(())
    }

    /// Stores a complete response in the background (never delays it).
    fn store(&mut self) {
        let Some(filling) = self.filling.take() else { return };
        let route = self.route.clone();
        let response = CachedResponse {
            status: filling.status,
            headers: filling.headers,
            body: filling.body.freeze(),
            ttl: filling.ttl,
        };
        tokio::spawn(async move {
            if let Some(cache) = &route.cache {
                cache.put(filling.key, response).await;
            }
        });
    }

    fn describe(&self, what: &str) -> String {
        match self.addr {
            Some(addr) => format!("upstream {:?} ({addr}): {what}", self.route.upstream.config.name),
            None => format!("upstream {:?}: {what}", self.route.upstream.config.name),
        }
    }
}

/// Step 8: the status and JSON body for a request that failed.
pub fn error_reply(e: &Error, ctx: Option<&ProxyCtx>) -> Reply {
    let status = match e.etype() {
        ErrorType::HTTPStatus(code) => *code,
        ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout => 504,
        _ if *e.esource() == ErrorSource::Downstream => 400,
        _ => 502,
    };
    let message = match ctx {
        Some(ctx) if !matches!(e.etype(), ErrorType::HTTPStatus(_)) => ctx.describe(&e.to_string()),
        _ => e.to_string(),
    };
    let label = match status {
        504 => "upstream_timeout",
        413 => "body_too_large",
        400 => "bad_request",
        _ => "upstream_error",
    };
    let mut reply = Reply::json_value(status, &serde_json::json!({ "error": message }));
    reply.error_label = Some(label);
    reply
}
