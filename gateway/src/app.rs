//! The Pingora application: one `ProxyHttp` whose `request_filter` answers
//! local routes in-process (V2 inference, metadata) and returns `Ok(true)`
//! so no upstream is contacted. Proxied routes (a later stage) will pass
//! through to `upstream_peer`. One app for both keeps one listener, one
//! set of limits and one access log.
//!
//! Phases, in order: admission (concurrency permit, else 429) -> body
//! (size limit 413, read timeout 408) -> dispatch ([`crate::handlers`]) ->
//! write the reply -> `logging` (metrics, access log line). The request's
//! span and id ([`RequestObs`]) cover the phases from admission on.

use crate::config::Config;
use crate::error::GatewayError;
use crate::handlers::{self, Request};
use crate::http_io::{read_body, write_reply};
use crate::reply::Reply;
use crate::state::AppState;
use crate::telemetry::RequestObs;
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
    obs: RequestObs,
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
            obs: RequestObs::default(),
        }
    }

    /// Runs for every request: answers it in-process and returns `Ok(true)`.
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> pingora::Result<bool> {
        ctx.started = Instant::now();
        let header = session.req_header();
        ctx.obs = RequestObs::start(&header.method, header.uri.path(), &header.headers);
        let config = self.state.config.load_full();
        let reply = match self.state.limiter.clone().try_acquire_owned() {
            Err(_) => Reply::error(&GatewayError::TooManyRequests),
            Ok(permit) => {
                ctx.permit = Some(permit);
                let scope = ctx.obs.scope();
                // Pinned in place and wrapped by reference: the (large)
                // handling future is never copied into the wrapper.
                let answer = std::pin::pin!(self.answer(session, &config, ctx));
                scope.run(answer).await
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

    /// Once per request: request metrics, the span's status, and one
    /// access-log line.
    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut RequestCtx) {
        let req = session.req_header();
        let took = ctx.started.elapsed();
        let config = self.state.config.load();
        let labels = crate::metrics::RequestLabels::classify(&config, req.uri.path());
        crate::metrics::record_request(labels, ctx.status, took);
        ctx.obs.finish(ctx.status);
        // In the request's scope: the log formatter adds `request_id`.
        ctx.obs.in_scope(|| {
            tracing::info!(
                target: "switchyard::access",
                method = %req.method,
                path = %req.uri.path(),
                status = ctx.status,
                error = ctx.error_label.unwrap_or(""),
                request_bytes = ctx.body_bytes,
                duration_us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
                trace_id = ctx.obs.trace_id().map(tracing::field::display),
            )
        });
    }
}

impl GatewayApp {
    async fn answer(&self, session: &mut Session, config: &Config, ctx: &mut RequestCtx) -> Reply {
        let method = session.req_header().method.clone();
        let body = if method == Method::GET || method == Method::HEAD {
            Bytes::new()
        } else {
            match read_body(session, &config.server.limits).await {
                Ok(body) => body,
                Err(err) => return Reply::error(&err),
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
        handlers::dispatch(&self.state, config, request).await
    }
}
