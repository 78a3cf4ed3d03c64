//! An HTTP listener (the V2 one or the admin one): a socket bound when the
//! server starts (so a port in use fails start-up, and port 0 gets a free
//! port whose number is known before serving), run as a Pingora background
//! service that accepts connections and hands each to its [`GuardedApp`].
//!
//! Why not Pingora's own listening service: it binds the socket itself,
//! later, and cannot say which port 0 became; and its graceful shutdown
//! loses requests. When it stops accepting it closes the socket, which
//! resets the connections still in the kernel's accept queue, and it tells
//! its HTTP app to drop every connection waiting for a request head,
//! including ones accepted a moment before whose request is on its way.
//!
//! Closing gracefully, once Pingora's shutdown watch turns:
//! 1. new connections are stopped at the socket: their SYN is dropped
//!    ([`listen_socket::refuse_new_connections`]), so they never complete
//!    a handshake and their clients get "connection refused" once the
//!    socket is closed;
//! 2. the connections already in the accept queue (and handshakes past
//!    their SYN, given [`HANDSHAKE_SETTLE`]) are accepted and served like
//!    any other;
//! 3. the socket closes, and the table starts draining
//!    ([`ConnTable::start_draining`]): each open connection is served to
//!    the end of the request it has (or sends within the drain's idle
//!    wait), with `Connection: close`.
//!
//! [`ListenerStatus`] tells the graceful shutdown when all of it is done.

use super::guarded_app::GuardedApp;
use super::listen_socket;
use super::table::ConnTable;
use crate::tls::TlsSource;
use async_trait::async_trait;
use pingora::apps::ServerApp;
use pingora::protocols::l4::listener::Listener as L4Listener;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// After new connections are stopped, how long the listener keeps
/// accepting so that handshakes already past their SYN complete and are
/// served (a round trip; microseconds on loopback).
pub const HANDSHAKE_SETTLE: Duration = Duration::from_millis(50);

/// The longest the listener spends accepting what is queued once closing
/// began; what is still queued after it is reset (and logged).
const QUEUE_SWEEP_LIMIT: Duration = Duration::from_secs(2);

/// How long the accept loop rests after the process ran out of
/// descriptors (accept fails at once until some are freed).
const OUT_OF_DESCRIPTORS_PAUSE: Duration = Duration::from_secs(1);

/// Whether a listener is closed and how many of its connections are open;
/// the graceful shutdown waits until every listener is drained.
#[derive(Debug)]
pub struct ListenerStatus {
    name: &'static str,
    closed: AtomicBool,
    connections: AtomicUsize,
    table: Arc<ConnTable>,
}

impl ListenerStatus {
    /// True once the socket is closed (and every connection it had queued
    /// was accepted).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Connections accepted and not yet finished (counted from the moment
    /// they are accepted, before their task starts).
    pub fn open_connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Closed, and every connection it accepted is finished.
    pub fn is_drained(&self) -> bool {
        self.is_closed() && self.open_connections() == 0
    }

    /// The connection table of the listener.
    pub fn table(&self) -> &Arc<ConnTable> {
        &self.table
    }

    fn track(self: &Arc<Self>) -> OpenConnection {
        self.connections.fetch_add(1, Ordering::SeqCst);
        OpenConnection(self.clone())
    }
}

/// One accepted connection, counted until it is dropped.
struct OpenConnection(Arc<ListenerStatus>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A bound HTTP listener waiting for its runtime; see the module docs.
pub struct Listener<A> {
    socket: parking_lot::Mutex<Option<std::net::TcpListener>>,
    addr: SocketAddr,
    app: Arc<GuardedApp<A>>,
    status: Arc<ListenerStatus>,
    /// Where new connections take their TLS settings; `None`: cleartext.
    tls: Option<TlsSource>,
}

impl<A> Listener<A> {
    /// Binds `addr` now (port 0: a free port, see [`Listener::local_addr`]);
    /// `app` serves its connections once the service starts.
    pub fn bind(name: &'static str, addr: SocketAddr, app: GuardedApp<A>) -> io::Result<Listener<A>> {
        let socket = std::net::TcpListener::bind(addr)?;
        listen_socket::deepen_backlog(&socket)?;
        socket.set_nonblocking(true)?;
        let addr = socket.local_addr()?;
        let status = Arc::new(ListenerStatus {
            name,
            closed: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            table: app.table().clone(),
        });
        Ok(Listener {
            socket: parking_lot::Mutex::new(Some(socket)),
            addr,
            app: Arc::new(app),
            status,
            tls: None,
        })
    }

    /// Serves TLS, with the settings `tls` has when each connection
    /// arrives (so a rotated certificate applies to new connections).
    pub fn with_tls(mut self, tls: Option<TlsSource>) -> Listener<A> {
        self.tls = tls;
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the graceful shutdown watches.
    pub fn status(&self) -> Arc<ListenerStatus> {
        self.status.clone()
    }
}

impl<A: ServerApp + Send + Sync + 'static> Listener<A> {
    /// Serves one accepted connection on its own task, counted as open
    /// until the task ends.
    fn spawn_connection(&self, mut stream: L4Stream, shutdown: &ShutdownWatch) {
        if let Err(e) = stream.set_nodelay() {
            tracing::debug!(error = %e, "could not set TCP_NODELAY on a client connection");
        }
        let open = self.status.track();
        let app = self.app.clone();
        let shutdown = shutdown.clone();
        let tls = self.tls.as_ref().map(TlsSource::acceptor);
        tokio::spawn(async move {
            let Some(tls) = tls.map_or(Some(None), |acceptor| acceptor.map(Some)) else {
                tracing::error!("a TLS listener has no TLS settings in force; connection closed");
                drop(open);
                return;
            };
            app.serve(stream, tls, &shutdown).await;
            drop(open);
        });
    }

    /// Handles what `accept` returned.
    async fn accepted(&self, accepted: io::Result<L4Stream>, shutdown: &ShutdownWatch) {
        match accepted {
            Ok(stream) => self.spawn_connection(stream, shutdown),
            Err(e) => {
                tracing::warn!(error = %e, listener = self.status.name, "accept failed");
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    tokio::time::sleep(OUT_OF_DESCRIPTORS_PAUSE).await;
                }
            }
        }
    }

    /// Steps 1-3 of the module docs.
    async fn close(&self, listener: L4Listener, fd: RawFd, shutdown: &ShutdownWatch) {
        let name = self.status.name;
        if let Err(e) = listen_socket::refuse_new_connections(fd) {
            tracing::warn!(error = %e, listener = name, "cannot stop new connections before closing; \
                 connections that arrive while it closes are reset");
        }
        let began = Instant::now();
        let (settled, give_up) = (began + HANDSHAKE_SETTLE, began + QUEUE_SWEEP_LIMIT);
        loop {
            let now = Instant::now();
            let queued = listen_socket::queued_connections(fd).unwrap_or(0);
            if (queued == 0 && now >= settled) || now >= give_up {
                break;
            }
            let until = if queued > 0 { give_up } else { settled };
            if let Ok(accepted) = tokio::time::timeout_at(until, listener.accept()).await {
                self.accepted(accepted, shutdown).await;
            }
        }
        let left = listen_socket::queued_connections(fd).unwrap_or(0);
        drop(listener);
        if left > 0 {
            tracing::warn!(listener = name, reset = left, "listener closed with connections still queued");
        }
        self.status.table.start_draining();
        self.status.closed.store(true, Ordering::SeqCst);
        tracing::info!(listener = name, open = self.status.open_connections(), "listener closed");
    }
}

#[async_trait]
impl<A: ServerApp + Send + Sync + 'static> BackgroundService for Listener<A> {
    /// Accepts until the shutdown watch turns, then closes gracefully.
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Some(socket) = self.socket.lock().take() else { return };
        let fd = socket.as_raw_fd();
        let listener = match tokio::net::TcpListener::from_std(socket) {
            Ok(l) => L4Listener::from(l),
            Err(e) => {
                tracing::error!(error = %e, addr = %self.addr, "the listener could not start");
                self.status.closed.store(true, Ordering::SeqCst);
                return;
            }
        };
        while !*shutdown.borrow() {
            tokio::select! {
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                accepted = listener.accept() => self.accepted(accepted, &shutdown).await,
            }
        }
        self.close(listener, fd, &shutdown).await;
    }
}
