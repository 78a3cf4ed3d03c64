//! Writing an event stream on a Pingora session.
//!
//! One loop drives the producer future (the models run in it) and waits,
//! whichever comes first, for:
//! - an emitted event: the first one writes the response header (so that
//!   a request failing before anything was sent still gets its proper
//!   status, e.g. 429 with `Retry-After`), then each event is one chunk;
//! - silence for the heartbeat interval: a `: keep-alive` comment (the
//!   header goes out first if it has not yet);
//! - the client going away: Pingora's `read_body_or_idle` returns once the
//!   connection is closed (or misused) after the request body. The loop
//!   then returns and the producer future is dropped with everything it
//!   awaits: a heavy run still queued is skipped by the runtime.
//!
//! Pingora writes a response without `Content-Length` close-delimited even
//! on a keep-alive connection, so the header says `transfer-encoding:
//! chunked` itself; each chunk is flushed as it is written. The body ends
//! with the terminating chunk after the last event.

use super::produce::{Emitted, Stage};
use super::sse;
use crate::cache::CacheStatus;
use crate::error::GatewayError;
use crate::http_io::write_reply;
use crate::metrics::streams::{StreamCount, StreamCounters};
use crate::reply::Reply;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::Session;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// An event stream ready to be written: the producer and its events.
pub struct EventStream<'a> {
    /// Runs the models and emits events; polled by [`respond`].
    pub producer: Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
    /// What the producer emits.
    pub events: UnboundedReceiver<Emitted>,
    /// Silence after which a heartbeat comment is written.
    pub heartbeat: Duration,
    /// `x-cache` when the header must go out before any event.
    pub computing: CacheStatus,
    /// Where outcomes are counted.
    pub counters: &'a StreamCounters,
}

/// How a stream ended, for the access log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamEnd {
    /// The status sent (499 when the client left before any was sent).
    pub status: u16,
    /// Error label: the failure's, or `client_gone`.
    pub error_label: Option<&'static str>,
}

/// Label of a stream whose client went away.
pub const CLIENT_GONE: &str = "client_gone";

enum Step {
    Produced,
    Emitted(Option<Emitted>),
    Heartbeat,
    ClientGone,
}

/// Writes `stream` to the client (see the module docs).
pub async fn respond(session: &mut Session, stream: EventStream<'_>) -> pingora::Result<StreamEnd> {
    let EventStream { mut producer, mut events, heartbeat, computing, counters } = stream;
    let mut producing = true;
    let mut header_sent = false;
    let mut failure = None;
    loop {
        let step = tokio::select! {
            biased;
            () = &mut producer, if producing => Step::Produced,
            emitted = events.recv() => Step::Emitted(emitted),
            () = tokio::time::sleep(heartbeat) => Step::Heartbeat,
            _ = session.read_body_or_idle(true) => Step::ClientGone,
        };
        let written = match step {
            Step::Produced => {
                producing = false;
                Ok(())
            }
            Step::Emitted(None) => break,
            Step::Emitted(Some(Emitted::Event { parts, cache, stage })) => {
                if stage == Stage::Final {
                    tracing::debug!(cache = cache.as_str(), "final event");
                }
                let bytes =
                    sse::event(stage.as_str(), &switchyard_protocol::v2::encode_infer_response(&parts).body);
                send(session, &mut header_sent, cache, bytes).await
            }
            Step::Emitted(Some(Emitted::Failed(err))) => {
                counters.bump(StreamCount::Error);
                failure = Some(err.label());
                if !header_sent {
                    write_reply(session, Reply::error(&err), false).await?;
                    return Ok(StreamEnd { status: err.status(), error_label: failure });
                }
                send(session, &mut header_sent, computing, error_event(&err)).await
            }
            Step::Heartbeat => {
                send(session, &mut header_sent, computing, Bytes::from_static(sse::HEARTBEAT)).await
            }
            Step::ClientGone => Err(()),
        };
        if written.is_err() {
            counters.bump(StreamCount::ClientGone);
            session.set_keepalive(None);
            let status = if header_sent { 200 } else { 499 };
            return Ok(StreamEnd { status, error_label: Some(CLIENT_GONE) });
        }
    }
    let ended = async {
        if !header_sent {
            write_header(session, computing).await?;
        }
        session.write_response_body(None, true).await
    };
    if ended.await.is_err() {
        counters.bump(StreamCount::ClientGone);
        return Ok(StreamEnd { status: 200, error_label: Some(CLIENT_GONE) });
    }
    Ok(StreamEnd { status: 200, error_label: failure })
}

/// Writes `chunk`, after the response header if it is not out yet; an
/// error means the client is gone.
async fn send(
    session: &mut Session,
    header_sent: &mut bool,
    cache: CacheStatus,
    chunk: Bytes,
) -> Result<(), ()> {
    if !*header_sent {
        write_header(session, cache).await.map_err(|_| ())?;
        *header_sent = true;
    }
    session.write_response_body(Some(chunk), false).await.map_err(|_| ())
}

/// The `200 text/event-stream` header, chunked.
async fn write_header(session: &mut Session, cache: CacheStatus) -> pingora::Result<()> {
    let mut header = ResponseHeader::build(200, Some(6))?;
    header.insert_header("content-type", sse::CONTENT_TYPE)?;
    header.insert_header("cache-control", "no-cache")?;
    header.insert_header("transfer-encoding", "chunked")?;
    header.insert_header("x-accel-buffering", "no")?;
    header.insert_header("x-cache", cache.as_str())?;
    session.write_response_header(Box::new(header), false).await
}

/// The `error` event: the V2 error body, plus the status the request
/// would have had.
fn error_event(err: &GatewayError) -> Bytes {
    let body = serde_json::json!({ "error": err.to_string(), "status": err.status() });
    sse::event("error", &serde_json::to_vec(&body).unwrap_or_default())
}
