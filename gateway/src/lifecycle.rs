//! The server's life cycle as requests see it: how many are in flight,
//! whether the server is draining (SIGTERM received: readiness says 503
//! and the listeners are about to close), and how many requests were cut
//! off: dropped before their response was done (at the end of a graceful
//! shutdown's grace period, or by a fast shutdown). The graceful shutdown
//! ([`crate::shutdown`]) waits on the in-flight count and reports the cut
//! ones.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Counters shared by the apps and the shutdown.
#[derive(Debug, Default)]
pub struct Lifecycle {
    draining: AtomicBool,
    in_flight: AtomicUsize,
    cut: AtomicUsize,
    entered: AtomicU64,
}

impl Lifecycle {
    /// Counts a request as in flight until the guard is dropped. The V2 app
    /// calls it when Pingora creates the request's context, i.e. as soon
    /// as the request head is parsed, and drops the guard after the
    /// response is completely written.
    pub fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.entered.fetch_add(1, Ordering::Relaxed);
        InFlight { life: Arc::clone(self), finished: false }
    }

    /// Requests accepted since start (to tell an idle server from a busy
    /// one, see [`crate::memory`]).
    pub fn entered(&self) -> u64 {
        self.entered.load(Ordering::Relaxed)
    }

    /// Requests accepted and not yet completely answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Marks the server as draining (readiness answers 503 from now on).
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// True once shutdown began.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Requests dropped before they finished (see [`InFlight::finish`]).
    pub fn cut(&self) -> usize {
        self.cut.load(Ordering::SeqCst)
    }
}

/// One request in flight; see [`Lifecycle::enter`]. Dropped without
/// [`InFlight::finish`], the request counts as cut off.
#[derive(Debug)]
pub struct InFlight {
    life: Arc<Lifecycle>,
    finished: bool,
}

impl InFlight {
    /// Marks the request as having run to its end (its response written,
    /// or its failure handled and logged). Call in the request's last
    /// phase; a request whose task is dropped before (the server stopped
    /// under it) is counted as cut off.
    pub fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.finished {
            self.life.cut.fetch_add(1, Ordering::SeqCst);
        }
        self.life.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_count_requests_in_flight() {
        let life = Arc::new(Lifecycle::default());
        let mut a = life.enter();
        let b = life.enter();
        assert_eq!(life.in_flight(), 2);
        a.finish();
        drop(a);
        assert_eq!(life.in_flight(), 1);
        assert_eq!(life.cut(), 0, "a finished request is not cut");
        drop(b);
        assert_eq!(life.in_flight(), 0);
        assert_eq!(life.cut(), 1, "dropped unfinished: cut off");
        assert!(!life.is_draining());
        life.start_draining();
        assert!(life.is_draining());
    }
}
