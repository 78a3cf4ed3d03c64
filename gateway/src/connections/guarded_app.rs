//! A listener's application wrapped with its connection table: each new
//! connection is admitted (or refused with a 503) before the HTTP app sees
//! it, and its transport is a [`GuardedStream`] that enforces the idle and
//! head timeouts. The wrapped app serves the connection exactly as before.
//!
//! The wrapped app's `cleanup` (Pingora's HTTP apps drop every connection
//! waiting for a request head when it runs) is never called: at shutdown
//! the connection table decides when an idle connection closes
//! ([`ConnTable::start_draining`]), so that a connection accepted just
//! before the listener closed still has its request served.

use super::stream::GuardedStream;
use super::table::ConnTable;
use pingora::apps::ServerApp;
use pingora::protocols::Stream;
use pingora::server::ShutdownWatch;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How long the refusal of a connection may take to write.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_millis(200);

/// `app`, behind a connection table.
pub struct GuardedApp<A> {
    app: Arc<A>,
    table: Arc<ConnTable>,
}

impl<A> GuardedApp<A> {
    /// Wraps `app`; `table` admits its connections.
    pub fn new(app: A, table: Arc<ConnTable>) -> GuardedApp<A> {
        GuardedApp { app: Arc::new(app), table }
    }
}

impl<A> GuardedApp<A> {
    /// The table that admits the app's connections.
    pub fn table(&self) -> &Arc<ConnTable> {
        &self.table
    }
}

impl<A: ServerApp + Send + Sync + 'static> GuardedApp<A> {
    /// Admits the connection and lets the app serve it to the end (every
    /// request on it); refuses it when the table is full.
    pub async fn serve(&self, stream: Stream, shutdown: &ShutdownWatch) {
        let Some(place) = self.table.admit() else {
            refuse(stream, self.table.max_connections()).await;
            return;
        };
        let mut next: Option<Stream> = Some(Box::new(GuardedStream::new(stream, place, self.table.clone())));
        while let Some(stream) = next {
            next = self.app.process_new(stream, shutdown).await;
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
