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

use super::call::{CallObs, Rpc};
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
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

/// The response side of a `ModelStreamInfer` call.
pub type ResponseStream = ReceiverStream<Result<ModelStreamInferResponse, Status>>;

/// Responses buffered per stream before the producers wait for the client.
const RESPONSE_BUFFER: usize = 16;

/// Starts serving one stream; the returned stream yields its responses.
pub fn start(
    state: Arc<AppState>,
    headers: HeaderMap,
    requests: Streaming<ModelInferRequest>,
) -> ResponseStream {
    let (tx, rx) = mpsc::channel(RESPONSE_BUFFER);
    tokio::spawn(serve(state, headers, requests, tx));
    ReceiverStream::new(rx)
}

type Sender = mpsc::Sender<Result<ModelStreamInferResponse, Status>>;

/// Reads requests and runs them until the client half-closes (then the
/// ones in flight finish) or goes away (then they are dropped).
async fn serve(
    state: Arc<AppState>,
    headers: HeaderMap,
    mut requests: Streaming<ModelInferRequest>,
    tx: Sender,
) {
    let mut running = FuturesUnordered::new();
    let mut reading = true;
    let mut ended_by = None;
    loop {
        if !reading && running.is_empty() {
            if let Some(status) = ended_by {
                let _ = tx.send(Err(status)).await;
            }
            return;
        }
        tokio::select! {
            () = tx.closed() => return,
            next = requests.message(), if reading => match next {
                Ok(Some(message)) => running.push(one(&state, &headers, message, &tx)),
                Ok(None) => reading = false,
                Err(status) => {
                    // The client sent something unreadable (e.g. a message
                    // over the limit): the stream ends with that status
                    // once the requests in flight have answered.
                    tracing::debug!(%status, "gRPC stream ended with an error");
                    reading = false;
                    ended_by = Some(super::status::oversized_as_exhausted(status));
                }
            },
            Some(()) = running.next(), if !running.is_empty() => {}
        }
    }
}

/// One request of the stream: its responses, or its error, sent on `tx`.
async fn one(state: &AppState, headers: &HeaderMap, message: ModelInferRequest, tx: &Sender) {
    let received = Instant::now();
    let snap = state.snapshot.load_full();
    let name = message.model_name.clone();
    let id = message.id.clone();
    let mut call = CallObs::start(state, Rpc::ModelStreamInfer, headers);
    let scope = call.obs.scope();
    let admitted = call.admit(state);
    let handling = std::pin::pin!(async {
        admitted?;
        let tenant = snap.access.authorize(&snap.config, &name, headers)?;
        let infer = infer_call(state, &snap, headers, tenant.as_deref(), message, received, true)?;
        match inference::run(state, &snap, infer).await? {
            Outcome::Events(events) => relay(events, tx).await,
            Outcome::Answered(_) => Err(GatewayError::Internal("a streamed call was answered whole".into())),
        }
    });
    let outcome = scope.run(handling).await;
    if let Err(err) = &outcome {
        let response = ModelStreamInferResponse {
            error_message: err.to_string(),
            infer_response: Some(ModelInferResponse { model_name: name.clone(), id, ..Default::default() }),
        };
        let _ = tx.send(Ok(response)).await;
    }
    call.finish(&snap, Some(&name), outcome.as_ref().map(|_| ()));
}

/// Drives a stream's producer and sends each event as a response; the
/// request's failure is returned (its error response is sent by the caller).
async fn relay(events: EventStream<'_>, tx: &Sender) -> Result<(), GatewayError> {
    let EventStream { mut producer, events: mut emitted, .. } = events;
    let mut producing = true;
    loop {
        let next = tokio::select! {
            biased;
            () = &mut producer, if producing => {
                producing = false;
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
