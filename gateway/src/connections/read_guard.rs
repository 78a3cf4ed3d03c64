//! The timeouts of a client connection, enforced on its reads; shared by
//! the HTTP/1 listeners' transport ([`super::stream::GuardedStream`]) and
//! the gRPC listener's (`crate::grpc::conn`).
//!
//! A read waits at most until the deadline of the connection's phase:
//! idle (no request in progress) `keepalive_timeout` from when it became
//! idle, then the read ends as if the client had closed; head
//! `header_timeout` from its start, then the read fails. Reads while a
//! request is in progress (busy) have no deadline. A connection the table
//! asked to close ends its next idle or head read at once. While the
//! table drains (shutdown), an idle connection gets at most
//! [`DRAIN_IDLE_WAIT`] more to send a request, and a request already
//! there when the deadline passes is still read (and served).
//!
//! What moves a connection between phases depends on its protocol
//! ([`Framing`]): on HTTP/1 the first byte after an idle wait starts a
//! request head (the app marks the head parsed); on HTTP/2 the phase
//! starts as head until the client's connection preface has arrived (the
//! handshake deadline), and bytes while idle (pings, settings, window
//! updates) keep it idle: only a call in progress makes it busy.

use super::state::{ConnState, Phase};
use super::table::{Admitted, ConnTable, DRAIN_IDLE_WAIT};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Sleep;

/// The client connection preface of HTTP/2 (RFC 9113, 3.4), before its
/// first SETTINGS frame.
pub const HTTP2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Its length.
pub const HTTP2_PREFACE_LEN: usize = HTTP2_PREFACE.len();

/// How bytes read move a connection between phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// HTTP/1: the first byte while idle starts a request head.
    Http1,
    /// HTTP/2: the preface (this many bytes still to come) is the head;
    /// after it the connection is idle until a call makes it busy.
    Http2 {
        /// Bytes of the preface not read yet.
        preface_left: usize,
    },
    /// Not known yet (a cleartext listener with `server.h2c`): the first
    /// bytes decide, the HTTP/2 preface making it [`Framing::Http2`],
    /// anything else [`Framing::Http1`].
    Sniff,
}

/// A connection's place in its table and the timer of its current
/// deadline.
#[derive(Debug)]
pub struct ReadGuard {
    place: Admitted,
    table: Arc<ConnTable>,
    framing: Framing,
    /// The armed deadline timer and the deadline it is set to (ms on the
    /// table's clock).
    timer: Option<(Pin<Box<Sleep>>, u64)>,
}

impl ReadGuard {
    /// Guards the connection admitted as `place` in `table`. An HTTP/2
    /// connection starts in its head phase (the handshake).
    pub fn new(place: Admitted, table: Arc<ConnTable>, framing: Framing) -> ReadGuard {
        if matches!(framing, Framing::Http2 { .. }) {
            place.state.set_phase(Phase::Head, table.now_ms());
        }
        ReadGuard { place, table, framing, timer: None }
    }

    /// The connection's shared state.
    pub fn state(&self) -> &Arc<ConnState> {
        &self.place.state
    }

    /// The table the connection belongs to.
    pub fn table(&self) -> &Arc<ConnTable> {
        &self.table
    }

    /// Reads from `inner` under the connection's deadline (module docs).
    pub fn poll_read<R: AsyncRead + Unpin>(
        &mut self,
        inner: &mut R,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let (phase, since) = self.state().phase();
        if phase == Phase::Busy {
            if matches!(self.framing, Framing::Http2 { .. }) {
                // A call's end makes the connection idle outside any read:
                // the pending read must be woken to arm the idle deadline.
                self.state().park(cx.waker());
            }
            return Pin::new(inner).poll_read(cx, buf);
        }
        let deadline = self.deadline_ms(phase, since);
        let over = self.state().is_evicted() || self.table.now_ms() >= deadline;
        // A draining connection's request that is already here is served.
        let look_first = phase == Phase::Idle && self.table.draining_since().is_some();
        if over && !look_first {
            return self.expire(phase);
        }
        let before = buf.filled().len();
        match Pin::new(inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                self.read(phase, buf.filled().get(before..).unwrap_or_default());
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                if over || self.poll_deadline(deadline, cx).is_ready() {
                    return self.expire(phase);
                }
                self.state().park(cx.waker());
                // An eviction between the check above and parking found no waker.
                if self.state().is_evicted() {
                    return self.expire(phase);
                }
                Poll::Pending
            }
        }
    }

    /// `bytes` were read in `phase`: the phase they lead to.
    fn read(&mut self, phase: Phase, bytes: &[u8]) {
        let n = bytes.len();
        if n == 0 {
            return;
        }
        if self.framing == Framing::Sniff {
            let seen = n.min(HTTP2_PREFACE_LEN);
            if bytes.get(..seen) == HTTP2_PREFACE.get(..seen) {
                self.framing = Framing::Http2 { preface_left: HTTP2_PREFACE_LEN };
                self.place.state.set_phase(Phase::Head, self.table.now_ms());
                return self.read(Phase::Head, bytes);
            }
            self.framing = Framing::Http1;
        }
        match &mut self.framing {
            Framing::Http1 if phase == Phase::Idle => {
                self.state().set_phase(Phase::Head, self.table.now_ms())
            }
            Framing::Http1 => {}
            Framing::Http2 { preface_left } if phase == Phase::Head => {
                *preface_left = preface_left.saturating_sub(n);
                if *preface_left == 0 {
                    self.place.state.set_phase(Phase::Idle, self.table.now_ms());
                }
            }
            Framing::Http2 { .. } | Framing::Sniff => {}
        }
    }

    /// The deadline of a read in `phase` begun at `since` (ms).
    fn deadline_ms(&self, phase: Phase, since: u64) -> u64 {
        let limits = self.table.limits();
        let allowed = if phase == Phase::Head { limits.header_timeout } else { limits.keepalive_timeout };
        let deadline = since.saturating_add(millis(allowed));
        match self.table.draining_since() {
            Some(drain) if phase == Phase::Idle => {
                deadline.min(since.max(drain).saturating_add(millis(DRAIN_IDLE_WAIT)))
            }
            _ => deadline,
        }
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
        let draining = self.table.draining_since().is_some();
        if phase != Phase::Head {
            let counter = match (draining, self.state().has_served()) {
                _ if self.state().is_evicted() => None,
                (true, false) => Some(&counters.drained_unused),
                (true, true) => Some(&counters.drained_idle),
                (false, _) => Some(&counters.idle_closed),
            };
            if let Some(counter) = counter {
                counter.fetch_add(1, Ordering::Relaxed);
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
        if draining {
            counters.drained_incomplete_heads.fetch_add(1, Ordering::Relaxed);
        }
        let limit = self.table.limits().header_timeout;
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("request head not complete within server.header_timeout_ms ({} ms)", limit.as_millis()),
        )))
    }
}

/// Implements `AsyncRead` (through the type's `guard: ReadGuard`) and
/// `AsyncWrite` (straight to its `inner` transport) for a guarded client
/// connection.
macro_rules! guarded_transport {
    ($ty:ty) => {
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let this = self.get_mut();
                this.guard.poll_read(&mut this.inner, cx, buf)
            }
        }

        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.inner.is_write_vectored()
            }
        }
    };
}
pub(crate) use guarded_transport;

/// `d` in whole milliseconds (saturating).
fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::connections_section::ConnectionLimits;
    use std::time::Duration;

    fn table() -> Arc<ConnTable> {
        ConnTable::new(ConnectionLimits {
            max_connections: 4,
            keepalive_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
        })
    }

    /// Reads `bytes` through a guard that starts as `Framing::Sniff`; the
    /// phase it leaves the connection in, and the framing it settled on.
    async fn sniffed(bytes: &'static [u8]) -> (Phase, Framing) {
        let table = table();
        let place = table.admit().unwrap();
        let mut guard = ReadGuard::new(place, table, Framing::Sniff);
        assert_eq!(guard.state().phase().0, Phase::Idle, "a sniffing connection starts idle");
        let mut inner = bytes;
        let mut buf = [0u8; 64];
        let mut read = ReadBuf::new(&mut buf);
        std::future::poll_fn(|cx| guard.poll_read(&mut inner, cx, &mut read)).await.unwrap();
        (guard.state().phase().0, guard.framing)
    }

    #[tokio::test]
    async fn the_http2_preface_makes_a_sniffed_connection_http2_and_idle() {
        let (phase, framing) = sniffed(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00").await;
        assert_eq!(framing, Framing::Http2 { preface_left: 0 });
        assert_eq!(phase, Phase::Idle, "past the preface, an HTTP/2 connection waits for calls");
    }

    #[tokio::test]
    async fn part_of_the_preface_is_a_head_in_progress() {
        let (phase, framing) = sniffed(b"PRI * HTTP").await;
        assert_eq!(framing, Framing::Http2 { preface_left: HTTP2_PREFACE_LEN - 10 });
        assert_eq!(phase, Phase::Head);
    }

    #[tokio::test]
    async fn anything_else_is_an_http1_request_head() {
        let (phase, framing) = sniffed(b"GET /v2 HTTP/1.1\r\n").await;
        assert_eq!(framing, Framing::Http1);
        assert_eq!(phase, Phase::Head);
    }
}
