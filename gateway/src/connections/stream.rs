//! A client connection's transport, wrapped so that reads enforce the
//! connection's timeouts: while no request is in progress a read waits at
//! most `keepalive_timeout` (then the connection ends as if the client had
//! closed it), and once a request's first byte arrived its head must be
//! complete within `header_timeout`, however slowly it trickles in (then
//! the read fails and the connection is closed). Reads during a request
//! (its body) pass straight through. Everything but reads is the inner
//! transport's.

use super::state::{ConnState, Phase};
use super::table::{Admitted, ConnTable};
use async_trait::async_trait;
use pingora::protocols::raw_connect::ProxyDigest;
use pingora::protocols::tls::{SslDigest, TlsRef};
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A client connection admitted by a [`ConnTable`].
#[derive(Debug)]
pub struct GuardedStream {
    inner: Stream,
    place: Admitted,
    table: Arc<ConnTable>,
    /// The armed deadline timer and the deadline it is set to (ms on the
    /// table's clock).
    timer: Option<(Pin<Box<Sleep>>, u64)>,
}

impl GuardedStream {
    /// Wraps `inner`, holding its `place` in `table`.
    pub fn new(inner: Stream, place: Admitted, table: Arc<ConnTable>) -> GuardedStream {
        GuardedStream { inner, place, table, timer: None }
    }

    /// The connection's shared state.
    pub fn state(&self) -> &Arc<ConnState> {
        &self.place.state
    }

    /// The table the connection belongs to.
    pub fn table(&self) -> &Arc<ConnTable> {
        &self.table
    }

    /// The deadline of a read in `phase` begun at `since` (ms).
    fn deadline_ms(&self, phase: Phase, since: u64) -> u64 {
        let limits = self.table.limits();
        let allowed = if phase == Phase::Head { limits.header_timeout } else { limits.keepalive_timeout };
        since.saturating_add(u64::try_from(allowed.as_millis()).unwrap_or(u64::MAX))
    }

    /// Polls the timer for `deadline` (arming it first when needed).
    fn poll_deadline(&mut self, deadline: u64, cx: &mut Context<'_>) -> Poll<()> {
        let at = tokio::time::Instant::from_std(self.table.instant_at(deadline));
        match &mut self.timer {
            Some((sleep, armed)) if *armed == deadline => sleep.as_mut().poll(cx),
            Some((sleep, armed)) => {
                sleep.as_mut().reset(at);
                *armed = deadline;
                sleep.as_mut().poll(cx)
            }
            None => {
                let mut sleep = Box::pin(tokio::time::sleep_until(at));
                let polled = sleep.as_mut().poll(cx);
                self.timer = Some((sleep, deadline));
                polled
            }
        }
    }

    /// Ends a read whose phase ran out of time (or was evicted): an idle
    /// connection reads end-of-stream, a head in progress an error.
    fn expire(&self, phase: Phase) -> Poll<io::Result<()>> {
        let counters = &self.table.counters;
        if phase != Phase::Head {
            if !self.state().is_evicted() {
                counters.idle_closed.fetch_add(1, Ordering::Relaxed);
            }
            return Poll::Ready(Ok(()));
        }
        if self.state().is_evicted() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room: server.max_connections reached while this request head was incomplete",
            )));
        }
        counters.header_timeouts.fetch_add(1, Ordering::Relaxed);
        let limit = self.table.limits().header_timeout;
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("request head not complete within server.header_timeout_ms ({} ms)", limit.as_millis()),
        )))
    }
}

impl AsyncRead for GuardedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let (phase, since) = this.state().phase();
        if phase == Phase::Busy {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let deadline = this.deadline_ms(phase, since);
        if this.state().is_evicted() || this.table.now_ms() >= deadline {
            return this.expire(phase);
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if phase == Phase::Idle && buf.filled().len() > before {
                    this.state().set_phase(Phase::Head, this.table.now_ms());
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                if this.poll_deadline(deadline, cx).is_ready() {
                    return this.expire(phase);
                }
                this.state().park(cx.waker());
                // An eviction between the check above and parking found no waker.
                if this.state().is_evicted() {
                    return this.expire(phase);
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait]
impl Shutdown for GuardedStream {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await;
    }
}

impl UniqueID for GuardedStream {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for GuardedStream {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner.selected_alpn_proto()
    }
}

impl GetTimingDigest for GuardedStream {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for GuardedStream {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.inner.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: ProxyDigest) {
        self.inner.set_proxy_digest(digest);
    }
}

impl GetSocketDigest for GuardedStream {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: SocketDigest) {
        self.inner.set_socket_digest(digest);
    }
}

#[async_trait]
impl Peek for GuardedStream {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        self.inner.try_peek(buf).await
    }
}
