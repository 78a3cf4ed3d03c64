//! The Pingora application: one `ProxyHttp` whose `request_filter` answers
//! local routes in-process (V2 inference, metadata) and returns `Ok(true)`
//! so no upstream is contacted, and lets requests under a prefix route
//! (`[[prefix_routes]]`) through to Pingora's proxy (`Ok(false)`), which
//! streams them to an upstream ([`crate::proxy`]). One app for both keeps
//! one listener, one set of limits and one access log.
//!
//! Phases, in order: admission (concurrency permit, else 429) -> prefix
//! route? proxy phases ([`crate::proxy::phases`]) : body (decoded from
//! gzip or deflate, size limit 413 on the decoded bytes, read timeout 408)
//! -> dispatch ([`crate::handlers`], or [`crate::openai`] for `/v1/`) -> write the reply (compressed when
//! the client accepts it, [`crate::http_io::encode_reply`]),
//! or the event stream of a streamed infer call
//! ([`crate::stream::respond`]) -> `logging` (metrics, access log line).
//! The request's span and id ([`RequestObs`]) cover the phases from
//! admission on.

use crate::connections::client_gone::client_gone;
use crate::endpoint::parse_openai_path;
use crate::error::GatewayError;
use crate::handlers::{self, Request};
use crate::http_io::{check_head, encode_reply, read_decoded_body, request_coding, write_reply};
use crate::lifecycle::InFlight;
use crate::proxy::{ProxyCtx, Start};
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::stream::{respond, Response};
use crate::telemetry::access_log::AccessLine;
use crate::telemetry::RequestObs;
use async_trait::async_trait;
use bytes::Bytes;
use http::Method;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::{HttpPeer, ProxyHttp, Session};
use pingora::proxy::FailToProxy;
use pingora::{Error, ErrorType};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;

/// The gateway's Pingora app.
pub struct GatewayApp {
    state: Arc<AppState>,
}

impl GatewayApp {
    /// An app serving from `state`.
    pub fn new(state: Arc<AppState>) -> GatewayApp {
        GatewayApp { state }
    }
}

/// Per-request context shared by the phases.
pub struct RequestCtx {
    /// When the request's head had been read: Pingora makes the context
    /// ([`ProxyHttp::new_ctx`]) right after it parses the head.
    started: Instant,
    permit: Option<OwnedSemaphorePermit>,
    status: u16,
    error_label: Option<&'static str>,
    body_bytes: usize,
    /// Counts the request as in flight (graceful shutdown waits on it)
    /// from the moment its head was parsed until the context is dropped;
    /// finished in `logging`, so a request dropped before counts as cut off.
    in_flight: InFlight,
    /// The request's span and id.
    obs: RequestObs,
    /// Set for a request proxied through a prefix route.
    proxy: Option<Box<ProxyCtx>>,
    /// The route or model an OpenAI call's body named, for its metric
    /// labels (a V2 call names it in its path).
    named: Option<String>,
}

impl RequestCtx {
    /// Takes a prefix route's start: keeps its proxy state, or notes the
    /// cached answer already sent. Returns `request_filter`'s verdict
    /// (true: answered, false: proxy it).
    fn proxy_started(&mut self, start: Start) -> bool {
        match start {
            Start::Proxy(proxy) => {
                self.proxy = Some(proxy);
                false
            }
            Start::Answered(status) => {
                self.status = status;
                self.permit = None;
                true
            }
            Start::Refused(_) => false,
        }
    }
}

#[async_trait]
impl ProxyHttp for GatewayApp {
    type CTX = RequestCtx;

    /// No downstream modules. Pingora's default adds its response
    /// compression module switched off, which still builds a context and
    /// runs a filter over every response and body chunk; Switchyard never
    /// compresses (prefix routes pass the upstream's encoding through).
    fn init_downstream_modules(&self, _modules: &mut pingora::modules::http::HttpModules) {}

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx {
            started: Instant::now(),
            permit: None,
            status: 0,
            error_label: None,
            body_bytes: 0,
            in_flight: self.state.lifecycle.enter(),
            proxy: None,
            named: None,
            obs: RequestObs::default(),
        }
    }

    /// Runs first, as soon as the request head is parsed: the connection
    /// is now serving a request (its head deadline no longer applies), and
    /// requests pipelined behind this one are kept and answered in order.
    async fn early_request_filter(
        &self,
        session: &mut Session,
        _ctx: &mut RequestCtx,
    ) -> pingora::Result<()> {
        crate::connections::request_started(session);
        session.as_downstream_mut().set_pipelining_enabled(true);
        Ok(())
    }

    /// Runs for every request: answers it in-process and returns
    /// `Ok(true)`, or, for a prefix route, returns `Ok(false)` to proxy it
    /// (the permit is then held until the proxied exchange ends). A client
    /// that leaves while its request is computed cancels the computation
    /// (logged as 499, `client_gone`).
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> pingora::Result<bool> {
        let header = session.req_header();
        ctx.obs = RequestObs::start(&header.method, header.uri.path(), &header.headers);
        let snap = self.state.snapshot.load_full();
        let response = match (check_head(header), self.state.limiter.clone().try_acquire_owned()) {
            (Err(e), _) => Response::Full(Reply::error(&e)),
            (Ok(()), Err(_)) => Response::Full(Reply::error(&GatewayError::TooManyRequests)),
            (Ok(()), Ok(permit)) => {
                ctx.permit = Some(permit);
                // A path with dot-segments is refused before any routing.
                match self.state.prefix_routes.route(session.req_header().uri.path()).map(|r| r.cloned()) {
                    Err(reply) => Response::Full(reply),
                    Ok(None) => match self.answer_while_connected(session, &snap, ctx).await {
                        Some(response) => response,
                        None => {
                            ctx.status = CLIENT_GONE_STATUS;
                            ctx.error_label = Some("client_gone");
                            ctx.permit = None;
                            return Ok(true);
                        }
                    },
                    Ok(Some(route)) => {
                        let limits = &snap.config.server.limits;
                        match crate::proxy::phases::start(session, &route, limits, ctx.started).await {
                            Start::Refused(reply) => Response::Full(reply),
                            started => return Ok(ctx.proxy_started(started)),
                        }
                    }
                }
            }
        };
        let reply = match response {
            Response::Full(reply) => reply,
            Response::Events(events) => {
                // The permit is held until the stream ends.
                let scope = ctx.obs.scope();
                let end = scope.run(std::pin::pin!(respond::respond(session, events))).await?;
                ctx.status = end.status;
                ctx.error_label = end.error_label;
                ctx.permit = None;
                return Ok(true);
            }
        };
        let reply = encode_reply(reply, &session.req_header().headers).await;
        let head_only = session.req_header().method == Method::HEAD;
        ctx.status = reply.status;
        ctx.error_label = reply.error_label;
        write_reply(session, reply, head_only).await?;
        ctx.permit = None;
        Ok(true)
    }

    /// Chooses the upstream address of a proxied request (called again
    /// for each retry) and starts the attempt's span under the request's;
    /// only prefix-route requests get here.
    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> pingora::Result<Box<HttpPeer>> {
        match ctx.proxy.as_mut() {
            Some(proxy) => proxy.peer(ctx.obs.sampled_span()),
            None => Err(Error::explain(ErrorType::InternalError, "request has no upstream")),
        }
    }

    /// Rewrites the path and sets `Host`, `X-Forwarded-*` and, when
    /// traced, the attempt's `traceparent`.
    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> pingora::Result<()> {
        ctx.proxy.as_ref().map_or(Ok(()), |p| p.forward(upstream_request))
    }

    /// Counts streamed request bytes against the route's limit; the end
    /// of the body starts the first-byte deadline.
    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> pingora::Result<()> {
        ctx.proxy.as_mut().map_or(Ok(()), |p| p.request_body(body, end_of_stream))
    }

    /// A connection to the upstream is made or reused: the response-head
    /// deadline starts watching it.
    async fn connected_to_upstream(
        &self,
        _session: &mut Session,
        _reused: bool,
        _peer: &HttpPeer,
        fd: std::os::unix::io::RawFd,
        _digest: Option<&pingora::protocols::Digest>,
        ctx: &mut RequestCtx,
    ) -> pingora::Result<()> {
        if let Some(proxy) = ctx.proxy.as_mut() {
            proxy.connected(fd);
        }
        Ok(())
    }

    /// The upstream's response head: statistics, limits, hop-by-hop fields.
    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> pingora::Result<()> {
        ctx.proxy.as_mut().map_or(Ok(()), |p| p.upstream_response(upstream_response))
    }

    /// Adds `x-cache` to proxied responses of cached routes.
    async fn response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> pingora::Result<()> {
        ctx.proxy.as_ref().map_or(Ok(()), |p| p.response(upstream_response))
    }

    /// Counts streamed response bytes; fills the route's cache.
    fn upstream_response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> pingora::Result<Option<Duration>> {
        ctx.proxy.as_mut().map_or(Ok(None), |p| p.upstream_body(body, end_of_stream).map(|()| None))
    }

    /// A connection failed: retry on another address when one is left.
    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut RequestCtx,
        e: Box<Error>,
    ) -> Box<Error> {
        match ctx.proxy.as_mut() {
            Some(proxy) => proxy.connect_failed(e),
            None => e,
        }
    }

    /// An exchange failed after connecting: retry only when it is safe.
    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut RequestCtx,
        _client_reused: bool,
    ) -> Box<Error> {
        let e = e.more_context(format!("peer {peer}"));
        match ctx.proxy.as_mut() {
            Some(proxy) => proxy.proxy_failed(session, e),
            None => e,
        }
    }

    /// A proxied request failed for good: a JSON error (502/504/413) when
    /// the response has not started, else the connection is closed.
    async fn fail_to_proxy(&self, session: &mut Session, e: &Error, ctx: &mut RequestCtx) -> FailToProxy {
        if let Some(written) = session.response_written() {
            // The client gets a cut response: the log says why.
            let error_code = written.status.as_u16();
            ctx.error_label = Some(crate::proxy::phases::error_label(e));
            // What was written may still sit in the connection's write
            // buffer (a head whose body broke off before its first chunk
            // went out): Pingora drops a connection it cannot reuse without
            // flushing, so shut it down here, which sends what was written
            // and then closes: the client sees the head and a cut body,
            // not a connection closed without a response.
            session.shutdown().await;
            return FailToProxy { error_code, can_reuse_downstream: false };
        }
        let reply = crate::proxy::phases::error_reply(e, ctx.proxy.as_deref());
        ctx.status = reply.status;
        ctx.error_label = reply.error_label;
        let head_only = session.req_header().method == Method::HEAD;
        if let Err(write_error) = write_reply(session, reply, head_only).await {
            tracing::debug!(error = %write_error, "could not send the error response");
        }
        FailToProxy { error_code: ctx.status, can_reuse_downstream: false }
    }

    /// Once per request: request metrics, the span's status, and one
    /// access-log line; the request is finished and its connection idle.
    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut RequestCtx) {
        ctx.in_flight.finish();
        crate::connections::request_finished(session);
        if let Some(proxy) = &ctx.proxy {
            ctx.body_bytes = usize::try_from(proxy.request_bytes).unwrap_or(usize::MAX);
            if let Some(written) = session.response_written() {
                ctx.status = written.status.as_u16();
            }
        }
        let req = session.req_header();
        let took = ctx.started.elapsed();
        let snap = self.state.snapshot.load();
        let labels = match self.state.prefix_routes.route(req.uri.path()).ok().flatten() {
            Some(route) => crate::metrics::RequestLabels::prefix_route(&route.config.name),
            None => {
                let labels = crate::metrics::RequestLabels::classify(&snap.config, req.uri.path());
                match &ctx.named {
                    Some(name) => labels.named(&snap.config, name),
                    None => labels,
                }
            }
        };
        crate::metrics::record_request(labels, ctx.status, took);
        ctx.obs.finish(ctx.status);
        // In the request's scope: the line carries its `request_id`.
        ctx.obs.in_scope(|| {
            crate::telemetry::access_log::log(&AccessLine {
                method: req.method.as_str(),
                path: req.uri.path(),
                status: ctx.status,
                error: ctx.error_label.unwrap_or(""),
                request_bytes: Some(ctx.body_bytes),
                duration_us: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
                trace_id: ctx.obs.trace_id(),
            })
        });
    }
}

/// The status logged for a request whose client left before its answer
/// (nginx's convention; never sent).
pub const CLIENT_GONE_STATUS: u16 = 499;

impl GatewayApp {
    /// [`GatewayApp::answer`], dropped (which cancels its queued work) as
    /// soon as the client closes its connection; `None` then.
    async fn answer_while_connected<'a>(
        &'a self,
        session: &mut Session,
        snap: &'a Snapshot,
        ctx: &mut RequestCtx,
    ) -> Option<Response<'a>> {
        let fd = crate::connections::socket_fd(session);
        let scope = ctx.obs.scope();
        // Pinned in place and wrapped by reference: the (large) handling
        // future is never copied into the wrapper.
        let handling = std::pin::pin!(self.answer(session, snap, ctx));
        let answer = scope.run(handling);
        let Some(fd) = fd else { return Some(answer.await) };
        tokio::select! {
            biased;
            response = answer => Some(response),
            () = client_gone(fd) => None,
        }
    }

    async fn answer<'a>(
        &'a self,
        session: &mut Session,
        snap: &'a Snapshot,
        ctx: &mut RequestCtx,
    ) -> Response<'a> {
        let config = &snap.config;
        let method = session.req_header().method.clone();
        let body = if method == Method::GET || method == Method::HEAD {
            Bytes::new()
        } else {
            let coding = match request_coding(&session.req_header().headers) {
                Ok(coding) => coding,
                Err(err) => {
                    session.set_keepalive(None); // its body is left unread
                    return Reply::error(&err).into();
                }
            };
            match read_decoded_body(session, &config.server.limits, coding).await {
                Ok(body) => body,
                Err(err) => return Reply::error(&err).into(),
            }
        };
        ctx.body_bytes = body.len();
        // Borrowed, not cloned: nothing writes to the session until the reply.
        let header = session.req_header();
        let request = Request {
            method: &method,
            path: header.uri.path(),
            headers: &header.headers,
            body,
            received: ctx.started,
            cert_cn: crate::connections::peer_names::of_session(session),
        };
        if let Some(endpoint) = parse_openai_path(request.path) {
            let (reply, named) = crate::openai::dispatch(&self.state, snap, endpoint, request).await;
            ctx.named = named;
            return reply.into();
        }
        handlers::dispatch(&self.state, snap, request).await
    }
}
