//! The child spans of a request, one function each so every call site
//! names them the same way. The trace of a cached request:
//!
//! ```text
//! request                      (INFO, root; child of the caller's traceparent)
//! ├── parse                    decode the V2 body (JSON or binary)
//! ├── cache_lookup  tier=l1    and tier=l2 on an L1 miss, when Redis is configured
//! ├── decide                   the route's policy (twice for a cascade)
//! ├── queue_wait               time in the pool's queue (from the runtime)
//! ├── inference                the batch's execution (from the runtime)
//! └── cache_fill               store the fresh answer (L1, queue for L2)
//! ```
//!
//! A model on a V2 upstream has one `upstream_call` per attempt instead of
//! `queue_wait` and `inference`; a proxied request has only its
//! `upstream_call` spans.
//! These spans are DEBUG-level: with tracing off they are disabled at the
//! call site and cost nothing. `queue_wait` and `inference` happen on a
//! runtime worker thread, so they are built afterwards from the durations
//! the runtime reports ([`record_execution`]), with their real start and
//! end times.

use super::otlp;
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry::KeyValue;
use std::net::SocketAddr;
use std::time::SystemTime;
use switchyard_runtime::InferenceResponse;
use tracing::field::Empty;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// `make()` inside a sampled request, else a disabled span: unsampled
/// requests skip building child spans that would not be exported.
fn child(make: impl FnOnce() -> Span) -> Span {
    if super::enabled() && super::request::current_is_sampled() {
        make()
    } else {
        Span::none()
    }
}

/// Decoding and checking the request body.
pub fn parse() -> Span {
    child(|| tracing::debug_span!("parse"))
}

/// One cache tier's lookup (`l1` or `l2`); record `cache.hit` when known.
pub fn cache_lookup(tier: &'static str) -> Span {
    child(|| tracing::debug_span!("cache_lookup", cache.tier = tier, cache.hit = Empty))
}

/// The routing policy's decision.
pub fn decide() -> Span {
    child(|| tracing::debug_span!("decide"))
}

/// Storing a fresh answer in the cache.
pub fn cache_fill() -> Span {
    child(|| tracing::debug_span!("cache_fill"))
}

/// What an `upstream_call` span is about (its attributes).
#[derive(Debug, Clone, Copy)]
pub struct UpstreamCall<'a> {
    /// The upstream's configured name.
    pub upstream: &'a str,
    /// The address tried.
    pub addr: SocketAddr,
    /// `v2` (a route member's V2 call) or `proxy` (a prefix route).
    pub via: &'static str,
    /// The prefix route, for proxied requests.
    pub route: Option<&'a str>,
    /// The model's configured name, for V2 calls.
    pub model: Option<&'a str>,
}

/// The current span when the code runs inside a sampled request's scope
/// (V2 upstream calls do): the parent to give [`upstream_call`]. `None`
/// when tracing is off or the request is not sampled, at the cost of a
/// flag and a task-local read.
pub fn current_parent() -> Option<Span> {
    (super::enabled() && super::request::current_is_sampled()).then(Span::current)
}

/// One attempt on an upstream address (kind client), a child of `parent`:
/// the current span for V2 calls ([`current_parent`]), the request's span
/// for proxied requests ([`super::RequestObs::sampled_span`]: Pingora's
/// proxy phases run outside it). `None` (tracing off, not sampled) gives a
/// disabled span and costs nothing. Pass the span to
/// [`super::propagation::trace_headers`] for the attempt's `traceparent`,
/// end it with [`upstream_call_ended`] (through
/// [`crate::upstream::observe::attempt_finished`]), and keep it until the
/// upstream's response has ended: dropping it ends the span.
pub fn upstream_call(parent: Option<&Span>, call: &UpstreamCall<'_>) -> Span {
    let Some(parent) = parent else { return Span::none() };
    tracing::debug_span!(
        parent: parent,
        "upstream_call",
        otel.kind = "client",
        switchyard.upstream = call.upstream,
        switchyard.via = call.via,
        switchyard.route = call.route,
        switchyard.model = call.model,
        server.address = %call.addr.ip(),
        server.port = i64::from(call.addr.port()),
        http.response.status_code = Empty,
        switchyard.outcome = Empty,
    )
}

/// Records how an attempt ended on its [`upstream_call`] span: the
/// response status when one arrived, the outcome label, and an error
/// status unless the outcome is `ok` (client spans count 4xx as errors).
pub fn upstream_call_ended(span: &Span, status: Option<u16>, outcome: &'static str) {
    if span.is_disabled() {
        return;
    }
    if let Some(status) = status {
        span.record("http.response.status_code", i64::from(status));
    }
    span.record("switchyard.outcome", outcome);
    if outcome != "ok" {
        span.set_status(Status::error(outcome));
    }
}

/// Adds the `queue_wait` and `inference` spans of a finished runtime
/// call under the current span: the batch ended about now, ran for
/// `exec_time` after waiting `queue_time`. Does nothing when tracing is
/// off or the request is not sampled.
pub fn record_execution(response: &InferenceResponse) {
    if !super::enabled() || !super::request::current_is_sampled() {
        return;
    }
    let Some(tracer) = otlp::tracer() else { return };
    let parent = Span::current().context();
    let end = SystemTime::now();
    let exec_start = end.checked_sub(response.exec_time).unwrap_or(end);
    let queued = exec_start.checked_sub(response.queue_time).unwrap_or(exec_start);
    let attributes = vec![
        KeyValue::new("switchyard.model", response.model.clone()),
        KeyValue::new("switchyard.pool", response.pool.clone()),
        KeyValue::new("switchyard.device", response.device.to_string()),
    ];
    let mut wait = tracer
        .span_builder("queue_wait")
        .with_kind(SpanKind::Internal)
        .with_start_time(queued)
        .with_attributes(attributes.clone())
        .start_with_context(tracer, &parent);
    wait.end_with_timestamp(exec_start);
    let mut run_attributes = attributes;
    run_attributes.push(KeyValue::new("switchyard.batch_size", response.batch_size as i64));
    let mut run = tracer
        .span_builder("inference")
        .with_kind(SpanKind::Internal)
        .with_start_time(exec_start)
        .with_attributes(run_attributes)
        .start_with_context(tracer, &parent);
    run.end_with_timestamp(end);
}
