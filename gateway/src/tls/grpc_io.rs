//! The gRPC listener's TLS: a connection's transport that completes its
//! TLS handshake on first use (inside tonic's per-connection task, so a
//! slow handshake never holds up accepting), then reads and writes the
//! decrypted stream. The connection's read guard sits above it
//! ([`crate::grpc::conn`]), so the handshake counts against the HTTP/2
//! preface deadline (`server.header_timeout_ms`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::Accept;

/// What a failed handshake calls (counts it).
pub type OnFailure = Box<dyn FnOnce() + Send + Sync>;

/// Where a completed handshake leaves the verified client certificate's
/// subject CN ([`super::peer`]), for the connection's calls to read.
pub type PeerName = std::sync::Arc<std::sync::OnceLock<std::sync::Arc<str>>>;

/// A gRPC connection's transport: cleartext, or TLS.
pub enum ServerIo {
    /// Cleartext.
    Plain(TcpStream),
    /// TLS, handshake in progress; the callback runs if it fails, the
    /// client certificate's name is left in the slot if it succeeds.
    Handshaking(Box<Accept<TcpStream>>, Option<OnFailure>, PeerName),
    /// TLS, established.
    Tls(Box<TlsStream<TcpStream>>),
    /// The handshake failed; every later use fails too.
    Failed,
}

impl ServerIo {
    /// Drives the handshake; `Ready(Ok)` once the stream is usable.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let ServerIo::Handshaking(accept, on_failure, peer) = self {
            match Pin::new(accept.as_mut()).poll(cx) {
                Poll::Ready(Ok(tls)) => {
                    let leaf = tls.get_ref().1.peer_certificates().and_then(|certs| certs.first());
                    if let Some(name) = leaf.and_then(|der| super::peer::common_name(der)) {
                        let _ = peer.set(std::sync::Arc::from(name));
                    }
                    *self = ServerIo::Tls(Box::new(tls));
                }
                Poll::Ready(Err(e)) => {
                    if let Some(count) = on_failure.take() {
                        count();
                    }
                    *self = ServerIo::Failed;
                    tracing::debug!(error = %e, "gRPC TLS handshake failed");
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        match self {
            ServerIo::Failed => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::NotConnected, "TLS handshake failed")))
            }
            _ => Poll::Ready(Ok(())),
        }
    }
}

/// Runs `op` on the usable stream once the handshake is done.
macro_rules! ready_then {
    ($self:ident, $cx:ident, |$io:ident| $op:expr) => {{
        let this = $self.get_mut();
        match this.poll_ready($cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        match this {
            ServerIo::Plain($io) => $op,
            ServerIo::Tls(tls) => {
                let $io = tls.as_mut();
                $op
            }
            _ => Poll::Ready(Err(io::Error::new(io::ErrorKind::NotConnected, "TLS handshake failed"))),
        }
    }};
}

impl AsyncRead for ServerIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        ready_then!(self, cx, |io| Pin::new(io).poll_read(cx, buf))
    }
}

impl AsyncWrite for ServerIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        ready_then!(self, cx, |io| Pin::new(io).poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready_then!(self, cx, |io| Pin::new(io).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready_then!(self, cx, |io| Pin::new(io).poll_shutdown(cx))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready_then!(self, cx, |io| Pin::new(io).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ServerIo::Plain(io) => io.is_write_vectored(),
            ServerIo::Tls(tls) => tls.is_write_vectored(),
            _ => false,
        }
    }
}
