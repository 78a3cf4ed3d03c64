//! Graceful shutdown.
//!
//! `SIGTERM` (or `SIGQUIT`):
//! 1. readiness (`/v2/health/ready`) answers 503 from now on;
//! 2. during `server.shutdown_notice_ms` (default 0) the listeners keep
//!    accepting, so a load balancer polling readiness stops sending first;
//! 3. Pingora closes the listeners and idle keep-alive connections; the
//!    requests already accepted run to completion (their responses carry
//!    `Connection: close`);
//! 4. as soon as none is in flight ([`crate::lifecycle`]), or at the
//!    latest when `server.shutdown_grace_s` ends, the server stops; then
//!    pending L2 cache writes are flushed (see [`crate::serve::run`]).
//!    Requests still running when the grace period ends are cut off: their
//!    clients get no (or a truncated) response. The log says how many, and
//!    claims "every accepted request was answered" only when none was.
//!
//! `SIGINT` stops at once (in-flight requests are cut), also during the
//! notice period.
//!
//! Pingora itself always waits the whole grace period once told to stop;
//! the drain watcher here ends the wait early by telling the serving
//! thread's owner that the drain is complete.

use crate::state::AppState;
use async_trait::async_trait;
use pingora::server::{ShutdownSignal, ShutdownSignalWatch};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};

/// Time after the listeners are told to close before the in-flight count
/// is trusted: requests whose head Pingora already parsed are counted by
/// then (counting starts as the head is parsed, with no await between).
const SETTLE: Duration = Duration::from_millis(100);

/// How often the drain watcher looks at the in-flight count.
const POLL: Duration = Duration::from_millis(5);

/// Why the server stopped serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Every accepted request was answered after a graceful shutdown began
    /// (none was cut off).
    Drained,
    /// Pingora's `run` returned (fast shutdown, or the grace period ended).
    ServerExited,
}

/// Pingora's shutdown signal source, with the readiness notice and the
/// drain watcher described in the module docs.
pub struct SignalWatch {
    state: Arc<AppState>,
    stopped: Sender<Stopped>,
}

impl SignalWatch {
    /// A watch over `state`; reports [`Stopped::Drained`] on `stopped`.
    pub fn new(state: Arc<AppState>, stopped: Sender<Stopped>) -> SignalWatch {
        SignalWatch { state, stopped }
    }
}

#[async_trait]
impl ShutdownSignalWatch for SignalWatch {
    /// Waits for a signal; for a graceful one, runs the notice period and
    /// starts the drain watcher before letting Pingora close the listeners.
    async fn recv(&self) -> ShutdownSignal {
        let (term, quit, int) =
            (signal(SignalKind::terminate()), signal(SignalKind::quit()), signal(SignalKind::interrupt()));
        let (mut term, mut quit, mut int) = match (term, quit, int) {
            (Ok(t), Ok(q), Ok(i)) => (t, q, i),
            (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => {
                tracing::error!(error = %e, "cannot install signal handlers; stop the process with SIGKILL");
                return std::future::pending().await;
            }
        };
        tokio::select! {
            _ = int.recv() => return ShutdownSignal::FastShutdown,
            _ = term.recv() => {}
            _ = quit.recv() => {}
        }
        self.state.lifecycle.start_draining();
        let server = self.state.snapshot.load().config.server.clone();
        tracing::info!(
            notice_ms = server.shutdown_notice.as_millis() as u64,
            grace_s = server.shutdown_grace.as_secs(),
            in_flight = self.state.lifecycle.in_flight(),
            "graceful shutdown: readiness now 503"
        );
        if !server.shutdown_notice.is_zero() {
            tokio::select! {
                _ = int.recv() => return ShutdownSignal::FastShutdown,
                () = tokio::time::sleep(server.shutdown_notice) => {}
            }
        }
        spawn_drain_watcher(self.state.clone(), server.shutdown_grace, self.stopped.clone());
        ShutdownSignal::GracefulTerminate
    }
}

/// Reports [`Stopped::Drained`] once no request is in flight and none was
/// cut off, unless the grace period ends first (Pingora then stops the
/// server itself, cutting off what still runs).
fn spawn_drain_watcher(state: Arc<AppState>, grace: Duration, stopped: Sender<Stopped>) {
    let cut_before = state.lifecycle.cut();
    let spawned = std::thread::Builder::new().name("sy-drain".into()).spawn(move || {
        let deadline = Instant::now() + grace;
        std::thread::sleep(SETTLE);
        loop {
            let in_flight = state.lifecycle.in_flight();
            let cut = state.lifecycle.cut().saturating_sub(cut_before);
            if cut > 0 {
                // The grace period ended and the server dropped what still ran.
                tracing::warn!(cut_off = cut, in_flight, "graceful shutdown: requests were cut off");
                return;
            }
            if in_flight == 0 {
                tracing::info!("graceful shutdown: every accepted request was answered");
                let _ = stopped.send(Stopped::Drained);
                return;
            }
            if Instant::now() >= deadline {
                tracing::warn!(in_flight, "graceful shutdown: grace period over with requests in flight");
                return;
            }
            std::thread::sleep(POLL);
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no drain watcher; the server stops when the grace period ends");
    }
}
