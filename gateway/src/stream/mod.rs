//! Draft-then-final answers over server-sent events (SSE).
//!
//! An infer call asks for a stream with `Accept: text/event-stream` or the
//! V2 request parameter `"stream": true`. It is decoded, validated and
//! keyed for the cache exactly like a plain call (`stream` is not part of
//! the key), then answered with a `text/event-stream` body:
//!
//! ```text
//! event: draft
//! data: {V2 response of the cheap model, parameters.stage = "draft"}
//!
//! : keep-alive
//!
//! event: final
//! data: {V2 response that stands, parameters.stage = "final"}
//! ```
//!
//! Each event's `parameters` carry `stage`, `model`, `device`,
//! `confidence` (the top value of the confidence output, or null), and
//! the usual `switchyard_*` fields; a final also says `from_draft` (it
//! repeats the draft), `draft_mode` and `cache`. A failure after the
//! header was sent ends the stream with `event: error` carrying the V2
//! error body (`{"error": ..., "status": ...}`); a failure before anything
//! was sent is a plain error response with its status.
//!
//! Which targets stream a draft: routes with a cheap/heavy pair (their
//! cascade policy, or a `draft` table; see `config::draft_section`).
//! Every other target answers a stream with one `final` event.
//!
//! - [`draft`]: running the pair (parallel or sequential, cancellation).
//! - [`produce`]: cache, orchestration and event encoding.
//! - [`respond`]: the Pingora writer (chunking, heartbeat, disconnects).
//! - [`sse`]: the wire format. [`stats`]: counters for `/admin/stats`.

pub mod draft;
pub mod produce;
pub mod respond;
pub mod sse;
pub mod stats;

use crate::error::GatewayError;
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::v2::{Parameters, V2Error};
use http::header::ACCEPT;
use http::HeaderMap;
use produce::{produce, Job};
use respond::EventStream;
use serde_json::Value;
use stats::StreamCount;

/// What a handler answers: a complete reply, or an event stream to write.
pub enum Response<'a> {
    /// A complete reply.
    Full(Reply),
    /// An SSE stream; its producer borrows the state and config only.
    Events(EventStream<'a>),
}

impl From<Reply> for Response<'_> {
    fn from(reply: Reply) -> Self {
        Response::Full(reply)
    }
}

/// True when the client asks for a stream: `Accept` lists
/// `text/event-stream`, or `parameters.stream` is `true` (any other
/// non-boolean value is a 400).
pub fn wants_stream(headers: &HeaderMap, parameters: &Parameters) -> Result<bool, GatewayError> {
    let asked = match parameters.get("stream") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => {
            return Err(GatewayError::Protocol(V2Error::InvalidField {
                field: "stream",
                context: "the request parameters".into(),
                reason: "must be true or false".into(),
            }))
        }
    };
    Ok(asked || accepts_event_stream(headers))
}

/// True when an `Accept` header lists `text/event-stream` (parameters and
/// case ignored; `q=0` means "not acceptable").
pub fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let refused = parts.any(|p| p.replace(' ', "").eq_ignore_ascii_case("q=0"));
        media.eq_ignore_ascii_case(sse::CONTENT_TYPE) && !refused
    })
}

/// Starts a stream for a decoded request: nothing runs until the writer
/// polls the producer.
pub fn start<'a>(state: &'a AppState, snap: &'a Snapshot, job: Job) -> EventStream<'a> {
    let config = &snap.config;
    state.streams.bump(StreamCount::Started);
    let route = job.target.is_route.then(|| config.route(&job.target.public_name)).flatten();
    let heartbeat = route.map_or(crate::config::draft_section::DEFAULT_HEARTBEAT, |r| r.draft.heartbeat);
    let computing = match job.plan {
        crate::cache::Plan::Lookup(..) => crate::cache::CacheStatus::Miss,
        _ => crate::cache::CacheStatus::Bypass,
    };
    let (tx, events) = tokio::sync::mpsc::unbounded_channel();
    EventStream {
        producer: Box::pin(produce(state, snap, job, tx)),
        events,
        heartbeat,
        computing,
        counters: &state.streams,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn accept(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn accept_header_or_parameter_asks_for_a_stream() {
        let none = Parameters::new();
        assert!(wants_stream(&accept("text/event-stream"), &none).unwrap());
        assert!(wants_stream(&accept("application/json, Text/Event-Stream;q=0.5"), &none).unwrap());
        assert!(!wants_stream(&accept("text/event-stream;q=0"), &none).unwrap());
        assert!(!wants_stream(&accept("application/json"), &none).unwrap());
        assert!(!wants_stream(&HeaderMap::new(), &none).unwrap());
        let mut p = Parameters::new();
        p.insert("stream".into(), true.into());
        assert!(wants_stream(&HeaderMap::new(), &p).unwrap());
        p.insert("stream".into(), "yes".into());
        assert_eq!(wants_stream(&HeaderMap::new(), &p).unwrap_err().status(), 400);
    }
}
