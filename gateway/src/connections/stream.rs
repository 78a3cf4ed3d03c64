//! An HTTP/1 client connection's transport (Pingora's), wrapped so that
//! reads enforce the connection's timeouts ([`ReadGuard`]): while no
//! request is in progress a read waits at most `keepalive_timeout` (then
//! the connection ends as if the client had closed it), and once a
//! request's first byte arrived its head must be complete within
//! `header_timeout`, however slowly it trickles in (then the read fails
//! and the connection is closed). Reads during a request (its body) pass
//! straight through. While the table drains (shutdown), a connection
//! without a request gets at most [`super::table::DRAIN_IDLE_WAIT`] more
//! to send one. Everything but reads is the inner transport's.
//!
//! Reads and writes are buffered as Pingora buffers the connections it
//! accepts itself (a 64 KiB read buffer; writes coalesced up to one
//! segment, so a small response head and body leave in one write).

use super::h2_calls;
use super::read_guard::{Framing, ReadGuard};
use super::state::ConnState;
use super::table::{Admitted, ConnTable};
use async_trait::async_trait;
use pingora::protocols::l4::stream::{DEFAULT_L4_READ_BUFFER_SIZE, DEFAULT_L4_WRITE_BUFFER_SIZE};
use pingora::protocols::raw_connect::ProxyDigest;
use pingora::protocols::tls::{SslDigest, TlsRef};
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufStream};

/// A client connection admitted by a [`ConnTable`].
#[derive(Debug)]
pub struct GuardedStream {
    inner: BufStream<Stream>,
    guard: ReadGuard,
    /// Its entry among the HTTP/2 connections, when it may be one.
    _h2: Option<h2_calls::Registration>,
}

impl GuardedStream {
    /// Wraps `inner`, holding its `place` in `table`; `framing` says what
    /// it speaks ([`Framing::Http1`]; [`Framing::Http2`] after ALPN `h2`;
    /// [`Framing::Sniff`] with h2c).
    pub fn new(inner: Stream, place: Admitted, table: Arc<ConnTable>, framing: Framing) -> GuardedStream {
        let h2 = (framing != Framing::Http1)
            .then(|| conn_key(&inner))
            .flatten()
            .map(|key| h2_calls::register(key, place.state.clone(), table.clone()));
        let inner =
            BufStream::with_capacity(DEFAULT_L4_READ_BUFFER_SIZE, DEFAULT_L4_WRITE_BUFFER_SIZE, inner);
        GuardedStream { inner, guard: ReadGuard::new(place, table, framing), _h2: h2 }
    }

    /// The connection's shared state.
    pub fn state(&self) -> &Arc<ConnState> {
        self.guard.state()
    }

    /// The table the connection belongs to.
    pub fn table(&self) -> &Arc<ConnTable> {
        self.guard.table()
    }
}

super::read_guard::guarded_transport!(GuardedStream);

/// The (local, peer) addresses of `stream`'s socket.
fn conn_key(stream: &Stream) -> Option<h2_calls::ConnKey> {
    let socket = stream.get_socket_digest()?;
    Some((*socket.local_addr()?.as_inet()?, *socket.peer_addr()?.as_inet()?))
}

#[async_trait]
impl Shutdown for GuardedStream {
    /// Writes what is buffered, then shuts the transport down.
    async fn shutdown(&mut self) {
        if let Err(e) = AsyncWriteExt::shutdown(&mut self.inner).await {
            tracing::debug!(error = %e, "could not shut a client connection down cleanly");
        }
    }
}

impl UniqueID for GuardedStream {
    fn id(&self) -> UniqueIDType {
        self.inner.get_ref().id()
    }
}

impl Ssl for GuardedStream {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.inner.get_ref().get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.inner.get_ref().get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner.get_ref().selected_alpn_proto()
    }
}

impl GetTimingDigest for GuardedStream {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner.get_ref().get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_ref().get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_ref().get_write_pending_time()
    }
}

impl GetProxyDigest for GuardedStream {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.inner.get_ref().get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: ProxyDigest) {
        self.inner.get_mut().set_proxy_digest(digest);
    }
}

impl GetSocketDigest for GuardedStream {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner.get_ref().get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: SocketDigest) {
        self.inner.get_mut().set_socket_digest(digest);
    }
}

#[async_trait]
impl Peek for GuardedStream {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        self.inner.get_mut().try_peek(buf).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::connections_section::ConnectionLimits;
    use crate::connections::state::Phase;
    use pingora::protocols::l4::stream::Stream as L4Stream;
    use std::sync::atomic::Ordering;
    use tokio::io::AsyncReadExt;

    async fn guarded_pair(table: &Arc<ConnTable>) -> (tokio::net::TcpStream, GuardedStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let place = table.admit().unwrap();
        (client, GuardedStream::new(Box::new(L4Stream::from(server)), place, table.clone(), Framing::Http1))
    }

    #[tokio::test]
    async fn a_draining_connection_reads_its_request_then_closes_when_idle() {
        let table = ConnTable::new(ConnectionLimits {
            max_connections: 4,
            keepalive_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
        });
        let (mut client, mut stream) = guarded_pair(&table).await;
        table.start_draining();
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "a request sent while draining is read");
        // Served and done: the connection is idle again, with nothing coming.
        stream.state().set_phase(Phase::Busy, table.now_ms());
        stream.state().set_phase(Phase::Idle, table.now_ms());
        let n = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buf)).await.unwrap().unwrap();
        assert_eq!(n, 0, "closed after the drain's idle wait, long before the keep-alive timeout");
        assert_eq!(table.counters.drained_idle.load(Ordering::Relaxed), 1);
        assert_eq!(table.counters.idle_closed.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn a_connection_waiting_when_the_drain_starts_is_woken_and_closed_unused() {
        let table = ConnTable::new(ConnectionLimits {
            max_connections: 4,
            keepalive_timeout: Duration::from_secs(600),
            header_timeout: Duration::from_secs(10),
        });
        let (_client, mut stream) = guarded_pair(&table).await;
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 16];
            stream.read(&mut buf).await
        });
        tokio::task::yield_now().await;
        table.start_draining();
        let n = tokio::time::timeout(Duration::from_secs(60), reader).await.unwrap().unwrap().unwrap();
        assert_eq!(n, 0, "a connection that never sent a request is closed by the drain");
        assert_eq!(table.counters.drained_unused.load(Ordering::Relaxed), 1);
    }
}
