//! The Pingora phases of a prefix-route request, in order. Each function
//! is called from the matching hook of [`crate::app::GatewayApp`], with
//! the request's [`ProxyCtx`].
//!
//! 1. [`start`] (`request_filter`): size limit on the declared length
//!    (413); the cache lookup when the route has one
//!    ([`super::http_cache_step`]: the body, at most 64 KiB, is read and kept
//!    in Pingora's retry buffer, which re-sends it upstream on a miss).
//!    Otherwise the body is not touched: Pingora streams it to the
//!    upstream as it arrives.
//! 2. [`ProxyCtx::peer`] (`upstream_peer`): an address by health, breaker
//!    and P2C over peak-EWMA, not tried before by this request, with the
//!    upstream's connect and first-byte timeouts (cut to the total). The
//!    attempt's `upstream_call` span starts here (traced requests only).
//! 3. [`ProxyCtx::connected`] (`connected_to_upstream`): a
//!    [`Watchdog`] bounds the wait for the response head: until the total
//!    timeout, and from the end of the request until the first-byte one
//!    (Pingora's own read timeout restarts at every read).
//! 4. [`ProxyCtx::forward`] (`upstream_request_filter`): path rewrite,
//!    `Host`, `X-Forwarded-*` and the attempt's `traceparent`
//!    ([`super::headers`]).
//! 5. [`ProxyCtx::request_body`] (`request_body_filter`): counts bytes
//!    against `max_request_bytes` (413) and the total timeout; its end
//!    starts the first-byte deadline.
//! 6. [`ProxyCtx::connect_failed`] (`fail_to_connect`) and
//!    [`ProxyCtx::proxy_failed`] (`error_while_proxy`): the attempt failed
//!    (a watchdog's shutdown is reported as the timeout it is); retry on
//!    another address when one is left and time remains, for a connect
//!    failure always (nothing was sent), after that only for idempotent
//!    requests whose response has not started and whose body Pingora
//!    still holds.
//! 7. [`ProxyCtx::upstream_response`] (`upstream_response_filter`): the
//!    address answered (its latency is the time to the response head; only
//!    502-504 count against its breaker: other statuses are the app's
//!    answers); the watchdog stands down; declared length against
//!    `max_response_bytes` (502), hop-by-hop fields removed, cacheability
//!    decided.
//! 8. [`ProxyCtx::upstream_body`] (`upstream_response_body_filter`): counts
//!    bytes (a stream over the limit is cut), fills the cache entry; the
//!    attempt's span ends with the body.
//!
//! Every attempt ends in [`crate::upstream::observe::attempt_finished`]
//! (metrics, span), from step 6 or 7.
//! 9. [`error_reply`] (`fail_to_proxy`): a JSON error the client can read:
//!    504 for timeouts, 502 for connection failures and bad answers; when
//!    the response had started, only its access-log label
//!    ([`error_label`]), e.g. `upstream_truncated`.

use super::headers::{forward_request, set_trace_context, strip_hop_by_hop, Forwarding};
use super::http_cache_step::{lookup, Filling, HttpCacheStep, Looked};
use super::watchdog::{Deadline, Limit, Watchdog};
use crate::config::Limits;
use crate::prefix::PrefixRoute;
use crate::reply::Reply;
use crate::telemetry::spans::{self, UpstreamCall};
use crate::upstream::address::Attempt;
use crate::upstream::observe::{attempt_finished, AttemptRecord, Outcome, Via};
use crate::upstream::select::choose;
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::{HttpPeer, Session};
use pingora::{Error, ErrorSource, ErrorType};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Span;

/// How long an idle pooled upstream connection is kept (see
/// [`crate::upstream::client::POOL_IDLE`] for why it is short).
const IDLE_TIMEOUT: Duration = crate::upstream::client::POOL_IDLE;

/// Per-request state of a proxied request.
#[derive(Debug)]
pub struct ProxyCtx {
    /// The route.
    pub route: Arc<PrefixRoute>,
    /// Arrival + `timeouts.total_ms`.
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
    cache: HttpCacheStep,
    filling: Option<Filling>,
    /// The current attempt's head deadline, while the head is awaited.
    watchdog: Option<Watchdog>,
    /// The current attempt has not had its response head yet.
    awaiting_head: bool,
    /// When the current attempt's request was sent in full.
    request_sent: Option<Instant>,
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
        cache: HttpCacheStep::Off,
        filling: None,
        watchdog: None,
        awaiting_head: false,
        request_sent: None,
    };
    match lookup(session, route, ctx.forwarding.host.as_deref(), declared, limits).await {
        Ok(Looked { answered: Some(status), .. }) => Start::Answered(status),
        Ok(looked) => {
            ctx.cache = looked.step;
            ctx.request_bytes = looked.request_bytes;
            Start::Proxy(Box::new(ctx))
        }
        Err(reply) => Start::Refused(reply),
    }
}

impl ProxyCtx {
    /// Adds `x-cache` to the response the client gets.
    pub fn response(&self, resp: &mut ResponseHeader) -> pingora::Result<()> {
        self.cache.mark(resp)
    }

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
        self.watchdog = None;
        self.awaiting_head = true;
        self.request_sent = None;
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
        let mut peer = upstream.peer(addr);
        peer.options.connection_timeout = Some(timeouts.connect.min(left));
        peer.options.read_timeout = Some(timeouts.first_byte.min(left));
        peer.options.write_timeout = Some(timeouts.first_byte.min(left));
        peer.options.idle_timeout = Some(IDLE_TIMEOUT);
        Ok(Box::new(peer))
    }

    /// Step 3: `fd` is the connection's descriptor, valid during the
    /// `connected_to_upstream` call this runs in.
    pub fn connected(&mut self, fd: RawFd) {
        match Watchdog::watch(fd, self.head_deadline()) {
            Ok(watchdog) => self.watchdog = Some(watchdog),
            // Only the head deadline is lost; Pingora's timeouts still apply.
            Err(e) => tracing::warn!(error = %e, "cannot watch the upstream connection's head deadline"),
        }
    }

    /// When the response head must have arrived: by the total deadline,
    /// and within the first-byte timeout of the request's end.
    fn head_deadline(&self) -> Option<Deadline> {
        if !self.awaiting_head {
            return None;
        }
        let timeouts = self.route.upstream.config.timeouts;
        let total = self.deadline.zip(timeouts.total).map(|(at, t)| Deadline { at, limit: Limit::Total(t) });
        let first_byte = self.request_sent.map(|sent| Deadline {
            at: sent + timeouts.first_byte,
            limit: Limit::FirstByte(timeouts.first_byte),
        });
        Deadline::earliest(total, first_byte)
    }

    /// Step 4.
    pub fn forward(&self, req: &mut RequestHeader) -> pingora::Result<()> {
        match self.addr {
            Some(addr) => {
                forward_request(req, &self.route, addr, &self.forwarding)?;
                set_trace_context(req, &self.span)
            }
            None => Err(Error::explain(ErrorType::InternalError, "no upstream address chosen")),
        }
    }

    /// Step 5; `end`: the request body is complete.
    pub fn request_body(&mut self, body: &Option<Bytes>, end: bool) -> pingora::Result<()> {
        if end && self.request_sent.is_none() {
            self.request_sent = Some(Instant::now());
            if let Some(watchdog) = &self.watchdog {
                watchdog.set(self.head_deadline());
            }
        }
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

    /// Step 6, connection failures.
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

    /// Step 6, failures after connecting.
    pub fn proxy_failed(&mut self, session: &Session, mut e: Box<Error>) -> Box<Error> {
        if let Some(expired) = self.watchdog.take().and_then(|w| w.expired()) {
            e = self.expired_error(expired);
        }
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

    /// Step 7.
    pub fn upstream_response(&mut self, resp: &mut ResponseHeader) -> pingora::Result<()> {
        if resp.status.is_informational() && resp.status != http::StatusCode::SWITCHING_PROTOCOLS {
            // `100 Continue` and the like: the real answer is still to come
            // (a `101` is the answer: the connection now carries the new protocol).
            strip_hop_by_hop(resp);
            return Ok(());
        }
        self.awaiting_head = false;
        self.watchdog = None;
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
        self.filling = self.cache.filling(&self.route, resp, declared);
        Ok(())
    }

    /// Step 8.
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
        if self.filling.as_mut().is_some_and(|f| !f.push(chunk, max_entry)) {
            self.filling = None;
        }
        if end {
            self.end_span();
            if let Some(filling) = self.filling.take() {
                filling.store(self.route.clone());
            }
        }
        Ok(())
    }

    /// The timeout error for a connection its watchdog shut down.
    fn expired_error(&self, expired: Deadline) -> Box<Error> {
        let what = if self.awaiting_head { "no response head" } else { "no complete response" };
        let why = match expired.limit {
            Limit::FirstByte(t) => {
                format!("{what} within {} ms of the request (timeouts.first_byte_ms)", t.as_millis())
            }
            Limit::Total(t) => format!("{what} within {} ms (timeouts.total_ms)", t.as_millis()),
        };
        Error::explain(ErrorType::ReadTimedout, why).into_up()
    }

    fn describe(&self, what: &str) -> String {
        match self.addr {
            Some(addr) => format!("upstream {:?} ({addr}): {what}", self.route.upstream.config.name),
            None => format!("upstream {:?}: {what}", self.route.upstream.config.name),
        }
    }
}

/// Step 9: the status and JSON body for a request that failed before its
/// response started.
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
    let mut reply = Reply::json_value(status, &serde_json::json!({ "error": message }));
    reply.error_label = Some(status_label(status));
    reply
}

/// The access-log label of a proxied exchange that failed after its
/// response had started (the client got a cut response): the timeout or
/// limit that cut it, `client_gone` when the client left, else
/// `upstream_truncated` (the upstream broke off or sent garbage).
pub fn error_label(e: &Error) -> &'static str {
    match e.etype() {
        ErrorType::HTTPStatus(code) => status_label(*code),
        ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout => "upstream_timeout",
        _ if *e.esource() == ErrorSource::Downstream => "client_gone",
        _ => "upstream_truncated",
    }
}

fn status_label(status: u16) -> &'static str {
    match status {
        504 => "upstream_timeout",
        413 => "body_too_large",
        400 => "bad_request",
        _ => "upstream_error",
    }
}
