//! The gRPC listener: a tonic server for [`GrpcFront`] on
//! `server.grpc_listen`, run as a Pingora background service (its own
//! multi-threaded runtime with `server.threads` workers) so it starts and
//! stops with the HTTP listeners.
//!
//! The address is bound when the server starts ([`GrpcListener::bind`]), so
//! a port in use fails start-up with a message as the HTTP listeners do.
//! Messages are bounded by `server.max_body_bytes` as bodies are (a
//! larger message is refused from its length prefix, before it is read,
//! with `RESOURCE_EXHAUSTED` as gRPC's own servers answer it; that bound
//! is read at start-up, like the listener's address). On shutdown the
//! listener stops accepting and calls in flight finish.

use super::proto::grpc_inference_service_server::GrpcInferenceServiceServer;
use super::service::GrpcFront;
use super::status::TONIC_OVERSIZED;
use crate::state::AppState;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::net::SocketAddr;
use std::sync::Arc;
use tonic::transport::server::TcpIncoming;

/// The gRPC listener, bound, waiting for its runtime.
pub struct GrpcListener {
    state: Arc<AppState>,
    listener: parking_lot::Mutex<Option<std::net::TcpListener>>,
    addr: SocketAddr,
}

impl GrpcListener {
    /// Binds `addr` now (so that start-up fails when it cannot).
    pub fn bind(state: Arc<AppState>, addr: SocketAddr) -> std::io::Result<GrpcListener> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        Ok(GrpcListener { state, listener: parking_lot::Mutex::new(Some(listener)), addr })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

#[async_trait]
impl BackgroundService for GrpcListener {
    /// Serves until shutdown.
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Some(std_listener) = self.listener.lock().take() else { return };
        let listener = match tokio::net::TcpListener::from_std(std_listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, addr = %self.addr, "the gRPC listener could not start");
                return;
            }
        };
        let max_message = self.state.snapshot.load().config.server.limits.max_body_bytes;
        let service = GrpcInferenceServiceServer::new(GrpcFront::new(self.state.clone()))
            .max_decoding_message_size(max_message)
            .max_encoding_message_size(usize::MAX);
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let stop = async move {
            let _ = shutdown.changed().await;
        };
        let served = tonic::transport::Server::builder()
            .layer(tower::util::MapResponseLayer::new(oversized_is_resource_exhausted))
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, stop)
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the gRPC listener stopped");
        }
    }
}

/// tonic refuses a message over the size limit with `OUT_OF_RANGE`; gRPC's
/// reference servers (and Triton) answer `RESOURCE_EXHAUSTED`, which
/// clients treat as "too big / too much", so the status is rewritten.
/// tonic answers such a unary call trailers-only: the status is in the
/// response head, its message percent-encoded (spaces as `%20`).
fn oversized_is_resource_exhausted<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    let oversized = headers.get("grpc-status").is_some_and(|s| s.as_bytes() == b"11")
        && headers
            .get("grpc-message")
            .is_some_and(|m| m.as_bytes().starts_with(TONIC_OVERSIZED.replace(' ', "%20").as_bytes()));
    if oversized {
        headers.insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    response
}
