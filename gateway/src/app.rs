//! The Pingora application: one `ProxyHttp` whose `request_filter` answers
//! local routes in-process (V2 inference, metadata) and returns `Ok(true)`
//! so no upstream is contacted. Proxied routes (a later stage) will pass
//! through to `upstream_peer`. One app for both keeps one listener, one
//! set of limits and one access log.
//!
//! Phases, in order: admission (concurrency permit, else 429) -> body
//! (size limit 413, read timeout 408) -> dispatch ([`crate::handlers`]) ->
//! write the reply, or the event stream of a streamed infer call
//! ([`crate::stream::respond`]) -> `logging` (access log line).

use crate::error::GatewayError;
use crate::handlers::{self, Request};
use crate::http_io::{read_body, write_reply};
use crate::lifecycle::InFlight;
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::stream::{respond, Response};
use async_trait::async_trait;
use bytes::Bytes;
use http::Method;
use pingora::prelude::{HttpPeer, ProxyHttp, Session};
use pingora::{Error, ErrorType};
use std::sync::Arc;
use std::time::Instant;
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
    started: Instant,
    permit: Option<OwnedSemaphorePermit>,
    status: u16,
    error_label: Option<&'static str>,
    body_bytes: usize,
    /// Counts the request as in flight (graceful shutdown waits on it)
    /// from the moment its head was parsed until the context is dropped.
    _in_flight: InFlight,
}

#[async_trait]
impl ProxyHttp for GatewayApp {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx {
            started: Instant::now(),
            permit: None,
            status: 0,
            error_label: None,
            body_bytes: 0,
            _in_flight: self.state.lifecycle.enter(),
        }
    }

    /// Runs for every request: answers it in-process and returns `Ok(true)`.
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> pingora::Result<bool> {
        ctx.started = Instant::now();
        let snap = self.state.snapshot.load_full();
        let response = match self.state.limiter.clone().try_acquire_owned() {
            Err(_) => Response::Full(Reply::error(&GatewayError::TooManyRequests)),
            Ok(permit) => {
                ctx.permit = Some(permit);
                self.answer(session, &snap, ctx).await
            }
        };
        let reply = match response {
            Response::Full(reply) => reply,
            Response::Events(events) => {
                // The permit is held until the stream ends.
                let end = respond::respond(session, events).await?;
                ctx.status = end.status;
                ctx.error_label = end.error_label;
                ctx.permit = None;
                return Ok(true);
            }
        };
        let head_only = session.req_header().method == Method::HEAD;
        ctx.status = reply.status;
        ctx.error_label = reply.error_label;
        write_reply(session, reply, head_only).await?;
        ctx.permit = None;
        Ok(true)
    }

    /// Not reached yet: every request is answered in `request_filter`.
    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut RequestCtx,
    ) -> pingora::Result<Box<HttpPeer>> {
        Err(Error::explain(ErrorType::InternalError, "no upstream routes are configured"))
    }

    /// One access-log line per request.
    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut RequestCtx) {
        let req = session.req_header();
        tracing::info!(
            target: "switchyard::access",
            method = %req.method,
            path = %req.uri.path(),
            status = ctx.status,
            error = ctx.error_label.unwrap_or(""),
            request_bytes = ctx.body_bytes,
            duration_us = u64::try_from(ctx.started.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
    }
}

impl GatewayApp {
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
            match read_body(session, &config.server.limits).await {
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
        };
        handlers::dispatch(&self.state, snap, request).await
    }
}
