//! Graceful shutdown.
//!
//! `SIGTERM` (or `SIGQUIT`):
//! 1. readiness (`/v2/health/ready`) answers 503 from now on;
//! 2. during `server.shutdown_notice_ms` (default 0) the listeners keep
//!    accepting, so a load balancer polling readiness stops sending first;
//! 3. the listeners stop new connections, accept and serve every
//!    connection the kernel had already completed, and close
//!    ([`crate::connections::listener`]); each open connection is served to
//!    the end of its request, and one that has none gets a short wait for it
//!    ([`crate::connections::table::DRAIN_IDLE_WAIT`]); responses to
//!    requests read from now on carry `Connection: close`;
//! 4. as soon as every connection is closed and no request (REST or gRPC)
//!    is in flight ([`crate::lifecycle`]), or at the latest when
//!    `server.shutdown_grace_s` ends, the server stops; then pending L2
//!    cache writes are flushed (see [`crate::serve::run`]). Requests still
//!    running when the grace period ends are cut off: their clients get no
//!    (or a truncated) response. The log says how many, and claims "every
//!    accepted request was answered" only when none was and no connection
//!    was closed with part of a request head read; it also counts the
//!    connections closed without a request.
//!
//! `SIGINT` stops at once (in-flight requests are cut), also during the
//! notice period.
//!
//! Pingora itself always waits the whole grace period once told to stop;
//! the drain watcher here ends the wait early by telling the serving
//! thread's owner that the drain is complete.

use crate::connections::ListenerStatus;
use crate::state::AppState;
use async_trait::async_trait;
use pingora::server::{ShutdownSignal, ShutdownSignalWatch};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};

/// How often the drain watcher looks at the listeners and the in-flight
/// count.
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
    listeners: Vec<Arc<ListenerStatus>>,
    stopped: Sender<Stopped>,
}

impl SignalWatch {
    /// A watch over `state` and the HTTP `listeners`; reports
    /// [`Stopped::Drained`] on `stopped`.
    pub fn new(
        state: Arc<AppState>,
        listeners: Vec<Arc<ListenerStatus>>,
        stopped: Sender<Stopped>,
    ) -> SignalWatch {
        SignalWatch { state, listeners, stopped }
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
        spawn_drain_watcher(
            self.state.clone(),
            self.listeners.clone(),
            server.shutdown_grace,
            self.stopped.clone(),
        );
        ShutdownSignal::GracefulTerminate
    }
}

/// Reports [`Stopped::Drained`] once every listener is closed with all
/// its connections finished, no request is in flight and none was cut
/// off, unless the grace period ends first (Pingora then stops the server
/// itself, cutting off what still runs).
fn spawn_drain_watcher(
    state: Arc<AppState>,
    listeners: Vec<Arc<ListenerStatus>>,
    grace: Duration,
    stopped: Sender<Stopped>,
) {
    let cut_before = state.lifecycle.cut();
    let spawned = std::thread::Builder::new().name("sy-drain".into()).spawn(move || {
        let deadline = Instant::now() + grace;
        loop {
            let in_flight = state.lifecycle.in_flight();
            let cut = state.lifecycle.cut().saturating_sub(cut_before);
            if cut > 0 {
                // The grace period ended and the server dropped what still ran.
                tracing::warn!(cut_off = cut, in_flight, "graceful shutdown: requests were cut off");
                return;
            }
            if in_flight == 0 && listeners.iter().all(|l| l.is_drained()) {
                report_drained(&listeners);
                let _ = stopped.send(Stopped::Drained);
                return;
            }
            if Instant::now() >= deadline {
                let open: usize = listeners.iter().map(|l| l.open_connections()).sum();
                tracing::warn!(
                    in_flight,
                    open_connections = open,
                    "graceful shutdown: grace period over with requests in flight"
                );
                return;
            }
            std::thread::sleep(POLL);
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no drain watcher; the server stops when the grace period ends");
    }
}

/// The drain's last log line: what was answered, and the connections
/// closed without a (complete) request.
fn report_drained(listeners: &[Arc<ListenerStatus>]) {
    let sum = |pick: fn(&crate::connections::table::ConnCounters) -> u64| -> u64 {
        listeners.iter().map(|l| pick(&l.table().counters)).sum()
    };
    let unused = sum(|c| c.drained_unused.load(Ordering::Relaxed));
    let idle = sum(|c| c.drained_idle.load(Ordering::Relaxed));
    let incomplete = sum(|c| c.drained_incomplete_heads.load(Ordering::Relaxed));
    if incomplete == 0 {
        tracing::info!(
            closed_before_a_request = unused,
            closed_idle_after_requests = idle,
            "graceful shutdown: every accepted request was answered"
        );
    } else {
        tracing::warn!(
            incomplete_heads = incomplete,
            closed_before_a_request = unused,
            closed_idle_after_requests = idle,
            "graceful shutdown: every request read was answered; connections whose request head was \
             still incomplete at server.header_timeout_ms were closed"
        );
    }
}
