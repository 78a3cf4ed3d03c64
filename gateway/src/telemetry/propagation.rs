//! W3C Trace Context (`traceparent`, `tracestate`) in and out of HTTP
//! headers: an incoming request's headers give its span a remote parent,
//! and an outgoing upstream request carries the current span's context.
//!
//! With tracing off, nothing is extracted or injected: a proxied request's
//! own `traceparent` passes through unchanged with its other headers.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `traceparent` header.
pub const TRACEPARENT: &str = "traceparent";
/// The `tracestate` header.
pub const TRACESTATE: &str = "tracestate";

struct HeaderReader<'a>(&'a http::HeaderMap);

impl Extractor for HeaderReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Collects what the propagator writes, as (name, value) pairs.
#[derive(Default)]
struct Collected(Vec<(&'static str, String)>);

impl Injector for Collected {
    fn set(&mut self, key: &str, value: String) {
        let name = match key {
            TRACEPARENT => TRACEPARENT,
            TRACESTATE if !value.is_empty() => TRACESTATE,
            _ => return,
        };
        self.0.push((name, value));
    }
}

/// The remote parent named by the request's `traceparent`, if it holds a
/// valid one (a malformed header is ignored, as the W3C spec asks).
pub fn remote_parent(headers: &http::HeaderMap) -> Option<Context> {
    headers.get(TRACEPARENT)?;
    let cx = TraceContextPropagator::new().extract(&HeaderReader(headers));
    cx.span().span_context().is_valid().then_some(cx)
}

/// The `traceparent` (and `tracestate`, when not empty) headers that make
/// an outgoing request a child of `span`; empty when tracing is off or the
/// span is not traced. For upstream calls: call with the attempt's span
/// ([`super::spans::upstream_call`]) and add the pairs to the upstream
/// request's headers (for a proxied request, replacing the client's).
pub fn trace_headers(span: &Span) -> Vec<(&'static str, String)> {
    if span.is_disabled() {
        return Vec::new();
    }
    // Without the OpenTelemetry layer the context is empty (invalid).
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut out = Collected::default();
    TraceContextPropagator::new().inject_context(&cx, &mut out);
    out.0
}

/// Sets `span`'s trace headers on `headers` (see [`trace_headers`]);
/// leaves `headers` alone when there is nothing to propagate.
#[cfg(test)]
pub fn inject(span: &Span, headers: &mut http::HeaderMap) {
    for (name, value) in trace_headers(span) {
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

    fn headers(traceparent: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(TRACEPARENT, http::HeaderValue::from_str(traceparent).unwrap());
        h
    }

    #[test]
    fn valid_traceparent_is_the_remote_parent() {
        let h = headers("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        let cx = remote_parent(&h).unwrap();
        let sc = cx.span().span_context().clone();
        assert_eq!(sc.trace_id(), TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap());
        assert_eq!(sc.span_id(), SpanId::from_hex("b7ad6b7169203331").unwrap());
        assert!(sc.is_sampled() && sc.is_remote());
    }

    #[test]
    fn missing_or_malformed_traceparent_is_ignored() {
        assert!(remote_parent(&http::HeaderMap::new()).is_none());
        assert!(remote_parent(&headers("garbage")).is_none());
        assert!(remote_parent(&headers("00-00000000000000000000000000000000-b7ad6b7169203331-01")).is_none());
    }

    #[test]
    fn injection_writes_w3c_headers() {
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        let cx = Context::new().with_remote_span_context(sc);
        let mut out = Collected::default();
        TraceContextPropagator::new().inject_context(&cx, &mut out);
        assert_eq!(
            out.0,
            vec![(TRACEPARENT, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string())]
        );
    }

    #[test]
    fn nothing_is_injected_when_tracing_is_off() {
        // No OpenTelemetry layer in this subscriber: tracing is off.
        let subscriber = tracing_subscriber::registry();
        tracing::subscriber::with_default(subscriber, || {
            let mut h = headers("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
            inject(&tracing::info_span!("x"), &mut h);
            assert_eq!(h.len(), 1, "the client's traceparent is left as it was");
            assert_eq!(h[TRACEPARENT], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
            assert!(trace_headers(&Span::none()).is_empty());
        });
    }

    #[test]
    fn a_traced_span_propagates_its_own_context_in_the_callers_trace() {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt;
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let incoming = headers("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
            let request = tracing::info_span!("request");
            request.set_parent(remote_parent(&incoming).unwrap()).unwrap();
            // Created outside the request's scope, as Pingora's proxy phases are.
            let call = super::super::spans::UpstreamCall {
                upstream: "app",
                addr: "127.0.0.1:8100".parse().unwrap(),
                via: "proxy",
                route: Some("app"),
                model: None,
            };
            let upstream = super::super::spans::upstream_call(Some(&request), &call);
            let mut out = http::HeaderMap::new();
            inject(&upstream, &mut out);
            let value = out[TRACEPARENT].to_str().unwrap().to_string();
            let parts: Vec<&str> = value.split('-').collect();
            assert_eq!(parts.len(), 4, "{value}");
            assert_eq!(parts[0], "00");
            assert_eq!(parts[1], "0af7651916cd43dd8448eb211c80319c", "same trace as the caller");
            let upstream_id = upstream.context().span().span_context().span_id().to_string();
            assert_eq!(parts[2], upstream_id, "the upstream's parent is the upstream-call span");
            assert_ne!(parts[2], "b7ad6b7169203331");
            assert_eq!(parts[3], "01", "sampled, as the caller asked");
        });
    }
}
