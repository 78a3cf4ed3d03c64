//! What every call on the gRPC listener gets before and after the
//! service, as a tower layer:
//! 1. its connection is busy for the call's life (until its response body
//!    is done), so the connection's idle deadline does not run and the
//!    connection is never closed for room ([`super::conn`]);
//! 2. its request body is under a deadline per message and the
//!    listener's receive budget ([`super::incoming`]);
//! 3. a response tonic made before the service was reached (a message
//!    over the size limit, not protobuf, over the wire bounds, or too
//!    late) is counted and logged as a request like any other, with the
//!    HTTP status of its gRPC code, and tonic's `OUT_OF_RANGE` for an
//!    oversized message becomes the `RESOURCE_EXHAUSTED` gRPC servers
//!    answer, its `INTERNAL` for a corrupt compressed message
//!    `INVALID_ARGUMENT`.
//!
//! The service marks a call it reached with [`mark_reached`].

use super::call::{CallObs, Rpc};
use super::conn::{CallOnConn, ConnInfo};
use super::incoming::{IncomingBody, IncomingLimits};
use super::status::{TONIC_OVERSIZED, TONIC_UNDECOMPRESSABLE};
use crate::state::AppState;
use futures::future::BoxFuture;
use http_body::{Body, Frame};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tonic::Status;

/// The layer (module docs).
#[derive(Clone)]
pub struct EdgeLayer {
    state: Arc<AppState>,
    incoming: IncomingLimits,
}

impl EdgeLayer {
    /// The layer over `state`, request bodies under `incoming`.
    pub fn new(state: Arc<AppState>, incoming: IncomingLimits) -> EdgeLayer {
        EdgeLayer { state, incoming }
    }
}

impl<S> tower::Layer<S> for EdgeLayer {
    type Service = Edge<S>;

    fn layer(&self, inner: S) -> Edge<S> {
        Edge { inner, layer: self.clone() }
    }
}

/// The service of [`EdgeLayer`].
#[derive(Clone)]
pub struct Edge<S> {
    inner: S,
    layer: EdgeLayer,
}

/// Set by the service on a call it reached (in the call's extensions).
#[derive(Clone, Default)]
pub struct Reached(Arc<AtomicBool>);

/// Marks the call whose extensions these are as reached by the service.
pub fn mark_reached(extensions: &http::Extensions) {
    if let Some(reached) = extensions.get::<Reached>() {
        reached.0.store(true, Ordering::Relaxed);
    }
}

type GrpcRequest = http::Request<tonic::body::Body>;
type GrpcResponse = http::Response<tonic::body::Body>;

impl<S> tower::Service<GrpcRequest> for Edge<S>
where
    S: tower::Service<GrpcRequest, Response = GrpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = GrpcResponse;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<GrpcResponse, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: GrpcRequest) -> Self::Future {
        let on_conn = request.extensions().get::<ConnInfo>().map(ConnInfo::call);
        let rpc = Rpc::from_path(request.uri().path());
        let reached = Reached::default();
        request.extensions_mut().insert(reached.clone());
        let unary = rpc != Some(Rpc::ModelStreamInfer);
        let limits = self.layer.incoming.clone();
        let request = request.map(|body| tonic::body::Body::new(IncomingBody::new(body, limits, unary)));
        // The clone is ready for the next call; this one takes the service
        // that was polled ready.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let state = self.layer.state.clone();
        Box::pin(async move {
            let started = Instant::now();
            let response = refusals_get_their_codes(inner.call(request).await?);
            // A call the service reached counts itself.
            if let Some(rpc) = rpc.filter(|_| !reached.0.load(Ordering::Relaxed)) {
                let (status, error) = http_status_of(response.headers());
                let call = CallObs::start_at(&state, rpc, &http::HeaderMap::new(), started);
                call.finish_as(&state.snapshot.load(), None, status, error);
            }
            Ok(response.map(|body| tonic::body::Body::new(HoldsCall { body, _call: on_conn })))
        })
    }
}

/// The HTTP status and error label of a response refused before the
/// service, from its `grpc-status` (`crate::grpc::status` in reverse).
fn http_status_of(headers: &http::HeaderMap) -> (u16, &'static str) {
    let code = headers.get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i32>().ok());
    match code.map(tonic::Code::from) {
        Some(tonic::Code::Ok) => (200, ""),
        Some(tonic::Code::InvalidArgument) => (400, "bad_request"),
        Some(tonic::Code::ResourceExhausted) => (413, "body_too_large"),
        Some(tonic::Code::DeadlineExceeded) => (408, "body_timeout"),
        Some(tonic::Code::Unimplemented) => (501, "unimplemented"),
        _ => (500, "internal"),
    }
}

/// tonic refuses a message over the size limit with `OUT_OF_RANGE`; gRPC's
/// reference servers (and Triton) answer `RESOURCE_EXHAUSTED`, which
/// clients treat as "too big / too much", so the status is rewritten; a
/// compressed message that does not inflate is its `INTERNAL`, rewritten
/// as `INVALID_ARGUMENT` (the client's fault). tonic answers such a unary
/// call trailers-only: the status is in the response head, its message
/// percent-encoded (spaces as `%20`).
fn refusals_get_their_codes<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    let says = |start: &str| {
        headers
            .get("grpc-message")
            .is_some_and(|m| m.as_bytes().starts_with(start.replace(' ', "%20").as_bytes()))
    };
    let code = match headers.get("grpc-status").map(http::HeaderValue::as_bytes) {
        Some(b"11") if says(TONIC_OVERSIZED) => "8",
        Some(b"13") if says(TONIC_UNDECOMPRESSABLE) => "3",
        _ => return response,
    };
    headers.insert("grpc-status", http::HeaderValue::from_static(code));
    response
}

/// A response body that keeps its call's connection busy until it is
/// done.
struct HoldsCall {
    body: tonic::body::Body,
    _call: Option<CallOnConn>,
}

impl Body for HoldsCall {
    type Data = bytes::Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, Status>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_calls_get_the_http_status_of_their_code() {
        let mut headers = http::HeaderMap::new();
        headers.insert("grpc-status", http::HeaderValue::from_static("3"));
        assert_eq!(http_status_of(&headers), (400, "bad_request"));
        headers.insert("grpc-status", http::HeaderValue::from_static("8"));
        assert_eq!(http_status_of(&headers), (413, "body_too_large"));
        headers.insert("grpc-status", http::HeaderValue::from_static("4"));
        assert_eq!(http_status_of(&headers), (408, "body_timeout"));
        assert_eq!(http_status_of(&http::HeaderMap::new()), (500, "internal"));
    }

    #[test]
    fn an_oversized_message_is_resource_exhausted() {
        let response = http::Response::builder()
            .header("grpc-status", "11")
            .header("grpc-message", "Error,%20decoded%20message%20length%20too%20large:%20found%205")
            .body(())
            .unwrap();
        let response = refusals_get_their_codes(response);
        assert_eq!(response.headers()["grpc-status"], "8");
        let corrupt = http::Response::builder()
            .header("grpc-status", "13")
            .header("grpc-message", "Error%20decompressing:%20invalid%20gzip%20header")
            .body(())
            .unwrap();
        assert_eq!(refusals_get_their_codes(corrupt).headers()["grpc-status"], "3");
        let other = http::Response::builder().header("grpc-status", "13").body(()).unwrap();
        assert_eq!(refusals_get_their_codes(other).headers()["grpc-status"], "13");
    }
}
