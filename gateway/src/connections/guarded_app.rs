//! A listener's application wrapped with its connection table: each new
//! connection is admitted (or refused with a 503) before the HTTP app sees
//! it, and its transport is a [`GuardedStream`] that enforces the idle and
//! head timeouts. The wrapped app serves the connection exactly as before.
//!
//! On a TLS listener the handshake comes first, right after admission, and
//! must be complete within `server.header_timeout_ms` (a client that opens
//! a connection and never finishes its handshake is closed then; counted
//! as a head timeout, its failures as `tls_failed`). The guard then sees
//! the decrypted bytes, so every timeout applies as on cleartext. A
//! connection refused at the limit gets its 503 after the handshake.
//! ALPN `h2` (or, on cleartext with `server.h2c`, the HTTP/2 preface)
//! makes the guard count HTTP/2's framing ([`Framing`]).
//!
//! The wrapped app's `cleanup` (Pingora's HTTP apps drop every connection
//! waiting for a request head when it runs) is never called: at shutdown
//! the connection table decides when an idle connection closes
//! ([`ConnTable::start_draining`]), so that a connection accepted just
//! before the listener closed still has its request served.

use super::read_guard::{Framing, HTTP2_PREFACE_LEN};
use super::stream::GuardedStream;
use super::table::ConnTable;
use pingora::apps::ServerApp;
use pingora::listeners::tls::Acceptor;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::{Stream, ALPN};
use pingora::server::ShutdownWatch;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How long the refusal of a connection may take to write.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_millis(200);

/// `app`, behind a connection table.
pub struct GuardedApp<A> {
    app: Arc<A>,
    table: Arc<ConnTable>,
    /// Cleartext connections may start with the HTTP/2 preface
    /// (`server.h2c`; the app must accept it too).
    h2c: bool,
}

/// Lists `stream`'s verified client certificate name (its CN) in
/// [`super::peer_names`] when it is a TLS connection (one without a
/// name is listed as such, so no earlier connection's entry can linger).
fn peer_registration(stream: &Stream) -> Option<super::peer_names::Registration> {
    let tls = stream.get_ssl()?;
    let name = tls.peer_certificate_der().and_then(crate::tls::peer::common_name);
    let socket = stream.get_socket_digest()?;
    let key = (*socket.local_addr()?.as_inet()?, *socket.peer_addr()?.as_inet()?);
    Some(super::peer_names::register(key, name.as_deref()))
}

impl<A> GuardedApp<A> {
    /// Wraps `app`; `table` admits its connections.
    pub fn new(app: A, table: Arc<ConnTable>) -> GuardedApp<A> {
        GuardedApp { app: Arc::new(app), table, h2c: false }
    }

    /// Lets cleartext connections speak HTTP/2 with prior knowledge.
    pub fn with_h2c(mut self, h2c: bool) -> GuardedApp<A> {
        self.h2c = h2c;
        self
    }
}

impl<A> GuardedApp<A> {
    /// The table that admits the app's connections.
    pub fn table(&self) -> &Arc<ConnTable> {
        &self.table
    }
}

impl<A: ServerApp + Send + Sync + 'static> GuardedApp<A> {
    /// Admits the connection, completes its TLS handshake with `tls` (when
    /// the listener has TLS) and lets the app serve it to the end (every
    /// request on it); refuses it when the table is full.
    pub async fn serve(&self, stream: L4Stream, tls: Option<Acceptor>, shutdown: &ShutdownWatch) {
        let place = self.table.admit();
        let stream = match tls {
            Some(acceptor) => match self.handshake(stream, &acceptor).await {
                Some(stream) => stream,
                None => return,
            },
            None => Box::new(stream),
        };
        let Some(place) = place else {
            refuse(stream, self.table.max_connections()).await;
            return;
        };
        // The verified client certificate's name, for the connection's life.
        let _peer = peer_registration(&stream);
        let framing = match stream.selected_alpn_proto() {
            Some(ALPN::H2) => Framing::Http2 { preface_left: HTTP2_PREFACE_LEN },
            _ if self.h2c && stream.get_ssl_digest().is_none() => Framing::Sniff,
            _ => Framing::Http1,
        };
        let guarded = GuardedStream::new(stream, place, self.table.clone(), framing);
        let mut next: Option<Stream> = Some(Box::new(guarded));
        while let Some(stream) = next {
            next = self.app.process_new(stream, shutdown).await;
        }
    }
}

impl<A> GuardedApp<A> {
    /// The TLS handshake of `stream`, within the head deadline; `None`
    /// (the connection is dropped) when it fails or takes longer.
    async fn handshake(&self, stream: L4Stream, acceptor: &Acceptor) -> Option<Stream> {
        let counters = &self.table.counters;
        match tokio::time::timeout(self.table.limits().header_timeout, acceptor.tls_handshake(stream)).await {
            Ok(Ok(tls)) => Some(Box::new(tls)),
            Ok(Err(e)) => {
                counters.tls_failed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                counters.header_timeouts.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("TLS handshake not complete within server.header_timeout_ms");
                None
            }
        }
    }
}

/// Answers a connection that cannot be admitted with a 503 that names the
/// limit, then closes it.
async fn refuse(mut stream: Stream, max: usize) {
    let body = format!("{{\"error\":\"too many open connections (server.max_connections = {max})\"}}");
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(response.as_bytes()).await?;
        stream.flush().await
    };
    if let Ok(Err(e)) = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, write).await {
        tracing::debug!(error = %e, "could not send the connection refusal");
    }
    if let Err(e) = stream.shutdown().await {
        tracing::debug!(error = %e, "could not close a refused connection cleanly");
    }
}
