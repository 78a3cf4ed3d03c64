//! One request's observability: its span (the root of its trace, a child
//! of the caller's when the request has a `traceparent`) and its request
//! id, for the access log and log lines inside the request.
//!
//! The request id is, in order: the V2 body's `id` (set by the infer
//! handler through [`adopt_request_id`]), the `x-request-id` header, the
//! trace id when the request is traced, else a generated one. Ids are
//! limited to 128 printable ASCII characters; anything else is replaced,
//! so a client cannot break log lines.

use super::propagation::remote_parent;
use opentelemetry::trace::{Status, TraceContextExt};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use tracing::field::Empty;
use tracing::{Instrument, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Longest request id kept, in bytes.
const MAX_ID_LEN: usize = 128;

tokio::task_local! {
    static CURRENT: Arc<IdSlot>;
}

/// The request's span, and where the handler leaves the V2 `id`.
#[derive(Debug)]
struct IdSlot {
    id: OnceLock<String>,
    span: Span,
}

/// A request's span and id; lives in the app's per-request context.
#[derive(Debug)]
pub struct RequestObs {
    slot: Arc<IdSlot>,
    fallback_id: Option<String>,
    trace_id: Option<String>,
}

impl Default for RequestObs {
    /// Before the request starts: no span, no id.
    fn default() -> Self {
        RequestObs {
            slot: Arc::new(IdSlot { id: OnceLock::new(), span: Span::none() }),
            fallback_id: None,
            trace_id: None,
        }
    }
}

impl RequestObs {
    /// Starts the request's span (named `request`). Headers: `traceparent`
    /// (when tracing is on) and `x-request-id`.
    pub fn start(method: &http::Method, path: &str, headers: &http::HeaderMap) -> RequestObs {
        let header_id = headers.get("x-request-id").and_then(|v| v.to_str().ok()).map(clean_id);
        let span = if super::enabled() {
            let span = tracing::info_span!("request", otel.kind = "server", request_id = Empty);
            if let Some(parent) = remote_parent(headers) {
                let _ = span.set_parent(parent);
            }
            span.set_attribute("http.request.method", method.to_string());
            span.set_attribute("url.path", path.to_string());
            span
        } else {
            tracing::info_span!("request", request_id = Empty)
        };
        let trace_id = super::enabled().then(|| trace_id_of(&span)).flatten();
        let fallback_id = header_id.or_else(|| trace_id.clone());
        RequestObs { slot: Arc::new(IdSlot { id: OnceLock::new(), span }), fallback_id, trace_id }
    }

    /// A handle that runs the request's handling in its span (see
    /// [`RequestScope::run`]); owned, so the caller may keep borrowing the
    /// context that holds `self`.
    pub fn scope(&self) -> RequestScope {
        RequestScope(self.slot.clone())
    }

    /// The request id (see the module docs); fixed on first call, and
    /// recorded on the request's span then.
    pub fn request_id(&self) -> &str {
        if self.slot.id.get().is_none() {
            let id = self.fallback_id.clone().unwrap_or_else(generated_id);
            self.slot.span.record("request_id", id.as_str());
            let _ = self.slot.id.set(id);
        }
        self.slot.id.get().map_or("", String::as_str)
    }

    /// The request's span: the parent of spans created outside the
    /// request's handling, e.g. [`super::spans::upstream_call`].
    pub fn span(&self) -> &Span {
        &self.slot.span
    }

    /// The request's trace id (32 hex digits) when it is traced.
    pub fn trace_id(&self) -> Option<&str> {
        self.trace_id.as_deref()
    }

    /// Records the response status on the span (an error status for 5xx).
    pub fn finish(&self, status: u16) {
        if !super::enabled() {
            return;
        }
        let span = &self.slot.span;
        span.set_attribute("http.response.status_code", i64::from(status));
        if status >= 500 {
            span.set_status(Status::error(format!("HTTP {status}")));
        }
    }
}

/// See [`RequestObs::scope`].
pub struct RequestScope(Arc<IdSlot>);

impl RequestScope {
    /// Runs `fut` inside the request's span, with [`adopt_request_id`]
    /// available to the handlers it calls.
    pub fn run<F: Future>(self, fut: F) -> impl Future<Output = F::Output> {
        let span = self.0.span.clone();
        CURRENT.scope(self.0, fut.instrument(span))
    }
}

/// Makes the V2 request's `id` the request id (the first call wins) and
/// records it on the request's span. Outside a request scope, a no-op.
pub fn adopt_request_id(id: &str) {
    let _ = CURRENT.try_with(|slot| {
        if slot.id.set(clean_id(id)).is_ok() {
            if let Some(id) = slot.id.get() {
                slot.span.record("request_id", id.as_str());
            }
        }
    });
}

fn trace_id_of(span: &Span) -> Option<String> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| sc.trace_id().to_string())
}

/// At most [`MAX_ID_LEN`] bytes of printable ASCII; other characters
/// become `_`.
fn clean_id(raw: &str) -> String {
    raw.chars().take(MAX_ID_LEN).map(|c| if c.is_ascii_graphic() { c } else { '_' }).collect()
}

/// A process-unique id: a random prefix chosen at start-up and a counter,
/// 16 hex digits.
fn generated_id() -> String {
    use std::hash::BuildHasher;
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u64));
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:08x}{:08x}", (prefix >> 32) as u32, n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_cleaned_and_bounded() {
        assert_eq!(clean_id("abc-123"), "abc-123");
        assert_eq!(clean_id("a b\nc\"d"), "a_b_c\"d");
        assert_eq!(clean_id(&"x".repeat(500)).len(), MAX_ID_LEN);
        assert_eq!(clean_id("é"), "_");
    }

    #[test]
    fn generated_ids_differ() {
        let (a, b) = (generated_id(), generated_id());
        assert_eq!(a.len(), 16);
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn v2_id_wins_over_header_and_generated() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-request-id", http::HeaderValue::from_static("from-header"));
        let obs = RequestObs::start(&http::Method::POST, "/v2/models/m/infer", &headers);
        obs.scope().run(async { adopt_request_id("from-body\n") }).await;
        assert_eq!(obs.request_id(), "from-body_");

        let obs = RequestObs::start(&http::Method::GET, "/v2", &headers);
        obs.scope().run(async {}).await;
        assert_eq!(obs.request_id(), "from-header");
        assert_eq!(obs.request_id(), "from-header", "fixed once chosen");

        let obs = RequestObs::start(&http::Method::GET, "/v2", &http::HeaderMap::new());
        assert_eq!(obs.request_id().len(), 16);
        assert!(obs.trace_id().is_none(), "tracing is off in unit tests");
        adopt_request_id("outside-any-request"); // no scope: ignored, no panic
    }
}
