//! The gRPC listener: a tonic server for [`GrpcFront`] on
//! `server.grpc_listen`, run as a Pingora background service (its own
//! multi-threaded runtime with `server.threads` workers) so it starts and
//! stops with the HTTP listeners.
//!
//! The address is bound when the server starts ([`GrpcListener::bind`]), so
//! a port in use fails start-up with a message as the HTTP listeners do.
//! Messages are bounded by `server.max_body_bytes` as bodies are (a
//! larger message is refused from its length prefix, before it is read,
//! with `RESOURCE_EXHAUSTED` as gRPC's own servers answer it) and must
//! arrive within `server.body_read_timeout_ms`; large messages being
//! received at once share `server.grpc_max_receiving_bytes`
//! ([`super::incoming`]).
//! Messages may come gzip- or deflate-compressed (`grpc-encoding`); tonic
//! inflates each one into a buffer bounded by the same
//! `server.max_body_bytes` (a compressed bomb is `RESOURCE_EXHAUSTED`
//! once its output reaches it) before the codec's wire check sees the
//! decompressed bytes, and the receive budget counts the bytes sent.
//! Answers are compressed when the client's `grpc-accept-encoding` asks.
//! Connections are admitted and timed out by a connection table
//! ([`super::conn`]); each may open `server.grpc_max_streams` streams at
//! once (advertised in its HTTP/2 settings), send at most
//! [`MAX_HEADER_LIST_BYTES`] of metadata per call, and is pinged when
//! quiet so that a vanished peer is noticed. These settings are read at
//! start-up, like the listener's address. On shutdown the listener stops
//! accepting and calls in flight finish.

use super::edge::EdgeLayer;
use super::incoming::IncomingLimits;
use super::proto::grpc_inference_service_server::GrpcInferenceServiceServer;
use super::service::GrpcFront;
use crate::state::AppState;
use crate::tls::TlsSource;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tonic::codec::CompressionEncoding;

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

/// How often an idle connection is pinged, and how long the answer may
/// take before the connection is closed (a peer that vanished).
const KEEPALIVE_PING: Duration = Duration::from_secs(30);
const KEEPALIVE_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// Most header-list bytes one call may send (metadata: keys, request ids,
/// trace context); beyond it the stream is refused.
pub const MAX_HEADER_LIST_BYTES: u32 = 16 << 10;

/// Flow-control windows: how much a client may send ahead on one stream
/// and on one connection before the server has read it.
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 4 << 20;

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
        let server = self.state.snapshot.load().config.server.clone();
        super::bounds::set_max_elements(server.limits.max_request_elements);
        let service = GrpcInferenceServiceServer::new(GrpcFront::new(self.state.clone()))
            .max_decoding_message_size(server.limits.max_body_bytes)
            .max_encoding_message_size(usize::MAX)
            .accept_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Deflate)
            .send_compressed(CompressionEncoding::Gzip)
            .send_compressed(CompressionEncoding::Deflate);
        let incoming_limits = IncomingLimits {
            message_timeout: server.limits.body_read_timeout,
            budget: Arc::new(Semaphore::new(server.grpc.max_receiving_bytes)),
            budget_bytes: server.grpc.max_receiving_bytes,
        };
        let table = self.state.grpc_connections.clone();
        let tls = server.tls.grpc.is_some().then(|| {
            let state = self.state.clone();
            TlsSource::new(move || {
                state.snapshot.load().config.server.tls.grpc.as_ref().map(|t| t.material.clone())
            })
        });
        let incoming = super::conn::incoming(listener, table, server.grpc.max_requests_per_connection, tls);
        let stop = async move {
            let _ = shutdown.changed().await;
        };
        let served = tonic::transport::Server::builder()
            .max_concurrent_streams(server.grpc.max_streams)
            .http2_max_header_list_size(MAX_HEADER_LIST_BYTES)
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .http2_keepalive_interval(Some(KEEPALIVE_PING))
            .http2_keepalive_timeout(Some(KEEPALIVE_PING_TIMEOUT))
            .layer(EdgeLayer::new(self.state.clone(), incoming_limits))
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, stop)
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the gRPC listener stopped");
        }
    }
}
