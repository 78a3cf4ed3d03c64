//! `ModelStreamInfer`: Triton's decoupled streaming, and the gRPC form of
//! draft-then-final.
//!
//! Each request read from the stream runs as a streamed inference call
//! ([`crate::inference`] with `stream`, the same producer as SSE): a route
//! with a cheap/heavy pair answers with a draft response then a final one,
//! any other target with one final response. Every response carries the
//! request's `id` and the parameters `stage` (`draft`/`final`) and
//! `triton_final_response` (true on the last response of a request, as
//! Triton's decoupled models send it), beside the explain parameters and
//! `x-cache` on the final. A request that fails gets one response whose
//! `error_message` says why (the stream stays open, as in Triton).
//!
//! Requests of one stream run concurrently (each admitted, counted and
//! logged as one `grpc_stream_infer` request); their responses are
//! interleaved as they are ready. When the client half-closes, the
//! requests in flight finish and the stream ends; when it cancels the
//! call, every request in flight is dropped at once, which cancels its
//! queued model runs.
//!
//! What one stream may hold: at most `server.grpc_max_in_flight_per_stream`
//! requests are in flight (running, or answered and waiting for the
//! client to read); at that bound no further request is read, so HTTP/2
//! flow control holds a client that sends without reading. A request
//! holds its admission permits only while its models run, not while its
//! responses wait for the client. A stream with nothing in flight and no
//! request for `server.keepalive_timeout_s` ends with
//! `DEADLINE_EXCEEDED`.

use super::call::{admit, Admission, CallObs, Rpc};
use super::conn::ConnInfo;
use super::encode::encode_model_infer;
use super::infer::{infer_call, CACHE_PARAMETER, FINAL_PARAMETER};
use super::proto::{ModelInferRequest, ModelInferResponse, ModelStreamInferResponse};
use crate::error::GatewayError;
use crate::inference::{self, Outcome};
use crate::state::AppState;
use crate::stream::produce::{Emitted, Stage};
use crate::stream::respond::EventStream;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use http::HeaderMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

/// The response side of a `ModelStreamInfer` call.
pub type ResponseStream = ReceiverStream<Result<ModelStreamInferResponse, Status>>;

/// Responses buffered per stream before the producers wait for the client.
const RESPONSE_BUFFER: usize = 16;

/// Starts serving one stream, on connection `conn`; the returned stream
/// yields its responses.
pub fn start(
    state: Arc<AppState>,
    headers: HeaderMap,
    conn: Option<ConnInfo>,
    requests: Streaming<ModelInferRequest>,
) -> ResponseStream {
    let (tx, rx) = mpsc::channel(RESPONSE_BUFFER);
    tokio::spawn(serve(state, Caller { headers, conn }, requests, tx));
    ReceiverStream::new(rx)
}

type Sender = mpsc::Sender<Result<ModelStreamInferResponse, Status>>;

/// Who sends a stream's requests: the call's headers and its connection.
struct Caller {
    headers: HeaderMap,
    conn: Option<ConnInfo>,
}

/// Reads requests and runs them until the client half-closes (then the
/// ones in flight finish) or goes away (then they are dropped); see the
/// module docs for the bounds.
async fn serve(state: Arc<AppState>, caller: Caller, mut requests: Streaming<ModelInferRequest>, tx: Sender) {
    let server = state.snapshot.load().config.server.clone();
    let (max_in_flight, idle_timeout) =
        (server.grpc.max_in_flight_per_stream, server.connections.keepalive_timeout);
    let mut running = FuturesUnordered::new();
    let mut reading = true;
    let mut ended_by = None;
    let mut idle_since = tokio::time::Instant::now();
    loop {
        if !reading && running.is_empty() {
            if let Some(status) = ended_by {
                let _ = tx.send(Err(status)).await;
            }
            return;
        }
        let idle = reading && running.is_empty();
        tokio::select! {
            () = tx.closed() => return,
            () = tokio::time::sleep_until(idle_since + idle_timeout), if idle => {
                reading = false;
                ended_by = Some(idle_expired(idle_timeout));
            }
            next = requests.message(), if reading && running.len() < max_in_flight => match next {
                Ok(Some(message)) => running.push(one(&state, &caller, message, &tx)),
                Ok(None) => reading = false,
                Err(status) => {
                    // The client sent something unreadable (e.g. a message
                    // over the limit): the stream ends with that status
                    // once the requests in flight have answered.
                    tracing::debug!(%status, "gRPC stream ended with an error");
                    reading = false;
                    ended_by = Some(super::status::tonic_refusal(status));
                }
            },
            Some(()) = running.next(), if !running.is_empty() => {
                if running.is_empty() {
                    idle_since = tokio::time::Instant::now();
                }
            }
        }
    }
}

/// The status that ends a stream left idle for `timeout`.
fn idle_expired(timeout: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "no request on this stream for {} s (server.keepalive_timeout_s)",
        timeout.as_secs()
    ))
}

/// One request of the stream: its responses, or its error, sent on `tx`.
async fn one(state: &AppState, caller: &Caller, message: ModelInferRequest, tx: &Sender) {
    let received = Instant::now();
    let snap = state.snapshot.load_full();
    let name = message.model_name.clone();
    let id = message.id.clone();
    let headers = &caller.headers;
    let call = CallObs::start(state, Rpc::ModelStreamInfer, headers);
    let scope = call.obs.scope();
    let admitted = admit(state, caller.conn.as_ref());
    let handling = std::pin::pin!(async {
        let admission = admitted?;
        let cert_cn = caller.conn.as_ref().and_then(ConnInfo::cert_cn);
        let tenant = snap.access.authorize_peer(&snap.config, &name, headers, cert_cn)?;
        let infer = infer_call(state, &snap, headers, tenant.as_deref(), message, received, true)?;
        match inference::run(state, &snap, infer).await? {
            Outcome::Events(events) => relay(events, admission, tx).await,
            Outcome::Answered(_) => Err(GatewayError::Internal("a streamed call was answered whole".into())),
        }
    });
    let outcome = scope.run(handling).await;
    if let Err(err) = &outcome {
        let response = ModelStreamInferResponse {
            error_message: err.client_message(),
            infer_response: Some(ModelInferResponse { model_name: name.clone(), id, ..Default::default() }),
        };
        let _ = tx.send(Ok(response)).await;
    }
    call.finish(&snap, Some(&name), outcome.as_ref().map(|_| ()));
}

/// Drives a stream's producer and sends each event as a response; the
/// request's failure is returned (its error response is sent by the caller).
/// The `admission` is given back once the producer is done: waiting for
/// the client to read holds no permit.
async fn relay(events: EventStream<'_>, admission: Admission, tx: &Sender) -> Result<(), GatewayError> {
    let EventStream { mut producer, events: mut emitted, .. } = events;
    let mut admission = Some(admission);
    loop {
        let next = tokio::select! {
            biased;
            () = &mut producer, if admission.is_some() => {
                admission = None;
                continue;
            }
            next = emitted.recv() => next,
        };
        match next {
            None => return Ok(()),
            Some(Emitted::Failed(err)) => return Err(err),
            Some(Emitted::Event { stage, mut parts, cache }) => {
                parts.parameters.insert(FINAL_PARAMETER.into(), (stage == Stage::Final).into());
                if stage == Stage::Final {
                    parts.parameters.insert(CACHE_PARAMETER.into(), cache.as_str().into());
                }
                let response = encode_model_infer(*parts);
                let sent = tx.send(Ok(ModelStreamInferResponse {
                    error_message: String::new(),
                    infer_response: Some(response),
                }));
                if sent.await.is_err() {
                    // The client is gone: dropping the producer cancels the rest.
                    return Ok(());
                }
            }
        }
    }
}
