//! One request's observability: its request id (on every log line written
//! while serving it, see [`super::log_format`]) and, when tracing is on,
//! its span (the root of its trace, a child of the caller's when the
//! request has a `traceparent`).
//!
//! The request id is, in order: the V2 body's `id` (set by the infer
//! handler through [`adopt_request_id`]), the `x-request-id` header, the
//! trace id when tracing is on, else a generated one. It is fixed
//! the first time it is needed: a line logged before the body is parsed
//! fixes it to one of the later choices. Ids are limited to 128 printable
//! ASCII characters; anything else is replaced, so a client cannot break
//! log lines.
//!
//! With tracing off there is no span: the id lives in a task-local
//! ([`RequestScope`]) that the log formatter reads, so a request that logs
//! nothing pays only for a small allocation.

use super::propagation::remote_parent;
use opentelemetry::trace::{Status, TraceContextExt, TraceId};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use tracing::{Instrument, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Longest request id kept, in bytes.
const MAX_ID_LEN: usize = 128;

tokio::task_local! {
    static CURRENT: Arc<IdSlot>;
}

/// The request's id (fixed once) and its span.
#[derive(Debug)]
struct IdSlot {
    id: OnceLock<String>,
    /// The `x-request-id` header's id, used when no V2 `id` is adopted.
    header_id: Option<String>,
    /// The trace id, next in line (formatted only if used).
    trace_id: Option<TraceId>,
    span: Span,
    /// True when the request's trace is sampled (exported).
    sampled: bool,
}

impl IdSlot {
    fn id(&self) -> &str {
        self.id.get_or_init(|| match (&self.header_id, self.trace_id) {
            (Some(id), _) => id.clone(),
            (None, Some(trace)) => trace.to_string(),
            (None, None) => generated_id(),
        })
    }
}

/// A request's id and span; lives in the app's per-request context.
#[derive(Debug)]
pub struct RequestObs {
    slot: Arc<IdSlot>,
}

impl Default for RequestObs {
    /// Before the request starts: no span; a generated id if asked.
    fn default() -> Self {
        let slot = IdSlot {
            id: OnceLock::new(),
            header_id: None,
            trace_id: None,
            span: Span::none(),
            sampled: false,
        };
        RequestObs { slot: Arc::new(slot) }
    }
}

impl RequestObs {
    /// Starts observing a request. Headers: `x-request-id`, and
    /// `traceparent` when tracing is on (the span named `request` is then
    /// created as the caller's child).
    pub fn start(method: &http::Method, path: &str, headers: &http::HeaderMap) -> RequestObs {
        let header_id = headers.get("x-request-id").and_then(|v| v.to_str().ok()).map(clean_id);
        let (span, trace_id, sampled) = if super::enabled() {
            let span = tracing::info_span!("request", otel.kind = "server");
            if let Some(parent) = remote_parent(headers) {
                let _ = span.set_parent(parent);
            }
            let sc = span.context().span().span_context().clone();
            if sc.is_sampled() {
                span.set_attribute("http.request.method", method.to_string());
                span.set_attribute("url.path", path.to_string());
            }
            (span, sc.is_valid().then(|| sc.trace_id()), sc.is_sampled())
        } else {
            (Span::none(), None, false)
        };
        let slot = IdSlot { id: OnceLock::new(), header_id, trace_id, span, sampled };
        RequestObs { slot: Arc::new(slot) }
    }

    /// A handle that runs the request's handling in its scope (see
    /// [`RequestScope::run`]); owned, so the caller may keep borrowing the
    /// context that holds `self`.
    pub fn scope(&self) -> RequestScope {
        RequestScope(self.slot.clone())
    }

    /// Runs `f` (e.g. writing the access-log line) in the request's scope,
    /// so its log lines carry the request id.
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        CURRENT.sync_scope(self.slot.clone(), f)
    }

    /// The request id (see the module docs), fixed on first use.
    pub fn request_id(&self) -> &str {
        self.slot.id()
    }

    /// The request's span: disabled when tracing is off.
    #[cfg(test)]
    pub fn span(&self) -> &Span {
        &self.slot.span
    }

    /// The request's span when its trace is sampled, else `None`: the
    /// parent to give spans created outside the request's scope, e.g. a
    /// proxied request's [`super::spans::upstream_call`] (Pingora's proxy
    /// phases run outside it).
    pub fn sampled_span(&self) -> Option<&Span> {
        self.slot.sampled.then_some(&self.slot.span)
    }

    /// The request's trace id (displayed as 32 hex digits) when tracing
    /// is on.
    pub fn trace_id(&self) -> Option<TraceId> {
        self.slot.trace_id
    }

    /// Records the request id and response status on the span (an error
    /// status for 5xx). Nothing to do when the request is not traced.
    pub fn finish(&self, status: u16) {
        if !self.slot.sampled {
            return;
        }
        let span = &self.slot.span;
        span.set_attribute("request_id", self.request_id().to_string());
        span.set_attribute("http.response.status_code", i64::from(status));
        if status >= 500 {
            span.set_status(Status::error(format!("HTTP {status}")));
        }
    }
}

/// See [`RequestObs::scope`].
pub struct RequestScope(Arc<IdSlot>);

impl RequestScope {
    /// Runs `fut` in the request's scope (and span, when traced): log lines
    /// carry the request id, and [`adopt_request_id`] reaches the request.
    /// `fut` is moved into the returned future: for a large future pass
    /// `std::pin::pin!(fut)` (a pointer) rather than the future itself.
    pub fn run<F: Future>(self, fut: F) -> impl Future<Output = F::Output> {
        let span = self.0.span.clone();
        CURRENT.scope(self.0, fut.instrument(span))
    }
}

/// Makes the V2 request's `id` the request id, unless the id was already
/// fixed. Outside a request scope, a no-op.
pub fn adopt_request_id(id: &str) {
    let _ = CURRENT.try_with(|slot| slot.id.set(clean_id(id)));
}

/// Calls `f` with the current request's id; `None` outside a request.
pub fn with_current_request_id<R>(f: impl FnOnce(&str) -> R) -> Option<R> {
    CURRENT.try_with(|slot| f(slot.id())).ok()
}

/// True inside a request whose trace is sampled: its child spans are
/// worth creating. A task-local read, much cheaper than a span.
pub fn current_is_sampled() -> bool {
    CURRENT.try_with(|slot| slot.sampled).unwrap_or(false)
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
    // Written by hand: `format!` took 0.6% of a busy server's time here.
    let value = (prefix & 0xffff_ffff_0000_0000) | (n & 0xffff_ffff);
    let mut hex = [0u8; 16];
    for (i, digit) in hex.iter_mut().enumerate() {
        let nibble = (value >> (60 - 4 * i)) & 0xf;
        *digit = b"0123456789abcdef"[nibble as usize];
    }
    hex.iter().map(|&b| char::from(b)).collect()
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
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{a}");
        let (high, low) = (u64::from_str_radix(&a, 16).unwrap(), u64::from_str_radix(&b, 16).unwrap());
        assert_eq!(high >> 32, low >> 32, "one prefix per process");
        let step = (low & 0xffff_ffff).wrapping_sub(high & 0xffff_ffff) & 0xffff_ffff;
        assert!((1..1_000_000).contains(&step), "then a counter (other tests draw ids too): {step}");
    }

    #[tokio::test]
    async fn v2_id_wins_over_header_and_generated() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-request-id", http::HeaderValue::from_static("from-header"));
        let obs = RequestObs::start(&http::Method::POST, "/v2/models/m/infer", &headers);
        let seen = obs
            .scope()
            .run(async {
                adopt_request_id("from-body\n");
                with_current_request_id(str::to_owned)
            })
            .await;
        assert_eq!(seen.as_deref(), Some("from-body_"));
        assert_eq!(obs.request_id(), "from-body_");
        assert_eq!(obs.in_scope(|| with_current_request_id(str::to_owned)).as_deref(), Some("from-body_"));

        let obs = RequestObs::start(&http::Method::GET, "/v2", &headers);
        obs.scope().run(async {}).await;
        assert_eq!(obs.request_id(), "from-header");

        let obs = RequestObs::start(&http::Method::POST, "/v2/models/m/infer", &http::HeaderMap::new());
        let first = obs.request_id().to_string();
        assert_eq!(first.len(), 16);
        obs.scope().run(async { adopt_request_id("too-late") }).await;
        assert_eq!(obs.request_id(), first, "fixed once chosen");
        assert!(obs.trace_id().is_none(), "tracing is off in unit tests");
        assert!(obs.span().is_disabled());
        adopt_request_id("outside-any-request"); // no scope: ignored, no panic
        assert!(with_current_request_id(str::to_owned).is_none());
    }
}
