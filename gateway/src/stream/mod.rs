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
//! Routing runs the pair (parallel or sequential, cancellation), decides,
//! shadows and counts: [`crate::routing::execute`] with
//! [`crate::routing::Strategy::DraftThenFinal`] ([`crate::routing::draft`]).
//! This module only turns what it hands back into events:
//! - [`produce`]: the cache, then the events and their encoding.
//! - [`respond`]: the Pingora writer (chunking, heartbeat, disconnects).
//! - [`sse`]: the wire format. Its counters are [`crate::metrics::streams`].

pub mod produce;
pub mod respond;
pub mod sse;

use crate::metrics::streams::StreamCount;
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use produce::{produce, Job};
use respond::EventStream;

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

/// Starts a stream for a decoded request: nothing runs until the writer
/// polls the producer.
pub fn start<'a>(state: &'a AppState, snap: &'a Snapshot, job: Job) -> EventStream<'a> {
    let config = &snap.config;
    state.streams.bump(StreamCount::Started);
    let route = job.target.is_route.then(|| config.route(&job.target.public_name)).flatten();
    let heartbeat = route.map_or(crate::config::draft_section::DEFAULT_HEARTBEAT, |r| r.draft.heartbeat);
    let computing = match job.plan {
        crate::cache::CachePlan::Lookup(..) => crate::cache::CacheStatus::Miss,
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
