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
//! A proxied request has `upstream_call` instead of the model steps.
//! These spans are DEBUG-level: with tracing off they are disabled at the
//! call site and cost nothing. `queue_wait` and `inference` happen on a
//! runtime worker thread, so they are built afterwards from the durations
//! the runtime reports ([`record_execution`]), with their real start and
//! end times.

use super::otlp;
use opentelemetry::trace::{Span as _, SpanKind, Tracer as _};
use opentelemetry::KeyValue;
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

/// One call to an upstream server of a proxied route (`route` and
/// `upstream` from the config), a child of `request` (the request's span,
/// [`super::RequestObs::span`]: Pingora's proxy phases run outside it).
/// Record `http.response.status_code` when the response arrives; pass the
/// span to [`super::propagation::trace_headers`] for the upstream
/// request's `traceparent`. Keep it (e.g. in the request context) until
/// the upstream response has ended: dropping it ends the span.
pub fn upstream_call(request: &Span, route: &str, upstream: &str) -> Span {
    tracing::debug_span!(
        parent: request,
        "upstream_call",
        otel.kind = "client",
        switchyard.route = route,
        server.address = upstream,
        http.response.status_code = Empty,
    )
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
