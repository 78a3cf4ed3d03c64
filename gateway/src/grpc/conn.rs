//! The gRPC listener's client connections, under the same kind of
//! connection table as the HTTP listeners ([`crate::connections`]): at
//! `server.max_connections` the connections waiting longest without a call
//! in progress are closed to make room (a new one is closed at once when
//! none can be); a connection must send the HTTP/2 preface within
//! `server.header_timeout_ms` of connecting, and one without a call in
//! progress is closed after `server.keepalive_timeout_s`.
//!
//! Each call reaches the service with the connection's [`ConnInfo`] in
//! its extensions (tonic's `Connected`): the edge layer marks the
//! connection busy for the call's life ([`ConnInfo::call`]), and
//! admission takes a permit of the connection's share
//! (`server.grpc_max_requests_per_connection`) before a global one.

use crate::connections::read_guard::{Framing, ReadGuard, HTTP2_PREFACE_LEN};
use crate::connections::state::{ConnState, Phase};
use crate::connections::ConnTable;
use crate::tls::grpc_io::{PeerName, ServerIo};
use crate::tls::TlsSource;
use futures::Stream;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tonic::transport::server::Connected;

/// How long accepting pauses after an error (e.g. out of descriptors), so
/// that a failing `accept` is not retried in a busy loop.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// An admitted client connection.
pub struct GrpcConn {
    inner: ServerIo,
    guard: ReadGuard,
    info: ConnInfo,
}

/// What every call of one connection shares.
#[derive(Clone)]
pub struct ConnInfo {
    shared: Arc<Shared>,
}

struct Shared {
    state: Arc<ConnState>,
    table: Arc<ConnTable>,
    /// Calls in progress.
    calls: AtomicUsize,
    /// The connection's share of the admission permits.
    share: Arc<Semaphore>,
    /// Its size.
    share_size: usize,
    /// The verified client certificate's CN, once the handshake is done.
    peer: PeerName,
}

/// A call in progress on a connection: the connection is busy (no idle
/// deadline, never closed for room) until the last one is dropped.
pub struct CallOnConn {
    shared: Arc<Shared>,
}

impl ConnInfo {
    /// Marks a call started; it ends when the returned value is dropped.
    pub fn call(&self) -> CallOnConn {
        if self.shared.calls.fetch_add(1, Ordering::AcqRel) == 0 {
            self.shared.state.set_phase(Phase::Busy, self.shared.table.now_ms());
        }
        CallOnConn { shared: self.shared.clone() }
    }

    /// The subject CN of the client certificate the connection's TLS
    /// handshake verified (`client_ca`), if any.
    pub fn cert_cn(&self) -> Option<&str> {
        self.shared.peer.get().map(|n| &**n)
    }

    /// The connection's share of the admission permits.
    pub fn share(&self) -> &Arc<Semaphore> {
        &self.shared.share
    }

    /// The size of [`ConnInfo::share`]
    /// (`server.grpc_max_requests_per_connection`).
    pub fn share_size(&self) -> usize {
        self.shared.share_size
    }
}

impl Drop for CallOnConn {
    fn drop(&mut self) {
        let shared = &self.shared;
        if shared.calls.fetch_sub(1, Ordering::AcqRel) == 1 {
            shared.state.set_phase(Phase::Idle, shared.table.now_ms());
            shared.state.wake();
        }
    }
}

/// The listener's accepted connections: those the table admits, as
/// [`GrpcConn`]s; the others are closed at once. Accept errors are
/// yielded (tonic logs them) after a short pause.
/// With `tls`, each connection is TLS with the settings in force when it
/// arrives (its handshake runs on first use, see [`ServerIo`]).
pub fn incoming(
    listener: TcpListener,
    table: Arc<ConnTable>,
    share_size: usize,
    tls: Option<TlsSource>,
) -> impl Stream<Item = io::Result<GrpcConn>> {
    futures::stream::unfold((listener, table), move |(listener, table)| {
        let tls = tls.clone();
        async move {
            loop {
                let accepted = match listener.accept().await {
                    Ok((tcp, _peer)) => admit(tcp, &table, share_size, tls.as_ref()),
                    Err(e) => {
                        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                        Some(Err(e))
                    }
                };
                if let Some(next) = accepted {
                    return Some((next, (listener, table)));
                }
            }
        }
    })
}

/// The connection as admitted, or `None` (closed) when the table is full.
fn admit(
    tcp: TcpStream,
    table: &Arc<ConnTable>,
    share_size: usize,
    tls: Option<&TlsSource>,
) -> Option<io::Result<GrpcConn>> {
    let place = table.admit()?;
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "could not set TCP_NODELAY on a gRPC connection");
    }
    let peer = PeerName::default();
    let inner = match tls {
        None => ServerIo::Plain(tcp),
        Some(source) => match source.rustls_acceptor() {
            Some(acceptor) => {
                let counted = table.clone();
                let on_failure = move || {
                    counted.counters.tls_failed.fetch_add(1, Ordering::Relaxed);
                };
                ServerIo::Handshaking(
                    Box::new(acceptor.accept(tcp)),
                    Some(Box::new(on_failure)),
                    peer.clone(),
                )
            }
            None => {
                tracing::error!("the gRPC listener has no TLS settings in force; connection closed");
                return None;
            }
        },
    };
    let shared = Arc::new(Shared {
        state: place.state.clone(),
        table: table.clone(),
        calls: AtomicUsize::new(0),
        share: Arc::new(Semaphore::new(share_size)),
        share_size,
        peer,
    });
    let guard = ReadGuard::new(place, table.clone(), Framing::Http2 { preface_left: HTTP2_PREFACE_LEN });
    Some(Ok(GrpcConn { inner, guard, info: ConnInfo { shared } }))
}

impl Connected for GrpcConn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        self.info.clone()
    }
}

crate::connections::read_guard::guarded_transport!(GrpcConn);
