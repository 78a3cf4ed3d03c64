//! The open connections of one listener: admission against
//! `max_connections`, and making room at the limit by closing the
//! connections that wait longest without a request in progress.
//!
//! At the limit, a new connection is admitted when room can be made:
//! 1. connections already asked to close count as gone;
//! 2. otherwise up to [`EVICT_BATCH_SHARE`] of the limit are asked to close,
//!    longest-waiting first, among those idle between requests and those
//!    still sending a request head (a slowloris client never finishes one);
//!    connections with a request in progress are never closed for room;
//! 3. when none can be closed, the new connection is refused (503,
//!    `Connection: close`; counted as `refused`).
//!
//! Draining (the listener closed at shutdown, [`ConnTable::start_draining`]):
//! a connection without a request in progress is closed once it has waited
//! [`DRAIN_IDLE_WAIT`] for one since the drain began (or since its last
//! response, if later), or when its keep-alive timeout ends if sooner. A
//! request that arrives before is served (with `Connection: close`): a
//! client that connected just before the listener closed, or that reuses a
//! connection whose response told it to keep it, gets its answer.

use super::coarse_clock::CoarseClock;
use super::state::{ConnState, Phase};
use crate::config::connections_section::ConnectionLimits;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// At the limit, at most this share of `max_connections` (and at least
/// one) is asked to close in one go, so a burst of new clients does not
/// scan the table for each of them.
pub const EVICT_BATCH_SHARE: usize = 64;

/// While draining, how long a connection without a request in progress
/// may still send one (see the module docs).
pub const DRAIN_IDLE_WAIT: Duration = Duration::from_secs(2);

/// [`ConnTable::draining_since`] before the drain.
const NOT_DRAINING: u64 = u64::MAX;

/// Counters of one listener's connections (metrics, admin stats).
#[derive(Debug, Default)]
pub struct ConnCounters {
    /// Connections admitted.
    pub accepted: AtomicU64,
    /// Connections refused at the limit (503).
    pub refused: AtomicU64,
    /// Connections closed to make room at the limit.
    pub evicted: AtomicU64,
    /// Connections closed after `keepalive_timeout` without a request.
    pub idle_closed: AtomicU64,
    /// Connections closed because a request head (or a TLS handshake)
    /// took longer than `header_timeout`.
    pub header_timeouts: AtomicU64,
    /// TLS connections whose handshake failed (no common protocol, a
    /// client certificate missing or refused, not TLS at all).
    pub tls_failed: AtomicU64,
    /// Connections closed by the drain before they sent a request (none
    /// was ever read on them).
    pub drained_unused: AtomicU64,
    /// Connections closed by the drain while idle after serving requests.
    pub drained_idle: AtomicU64,
    /// Connections closed during the drain because a request head took
    /// longer than `header_timeout` (part of `header_timeouts`).
    pub drained_incomplete_heads: AtomicU64,
}

/// A copy of the counters and the open count, for reporting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnSnapshot {
    /// Connections open now.
    pub open: usize,
    /// The limit.
    pub max: usize,
    /// See [`ConnCounters::accepted`].
    pub accepted: u64,
    /// See [`ConnCounters::refused`].
    pub refused: u64,
    /// See [`ConnCounters::evicted`].
    pub evicted: u64,
    /// See [`ConnCounters::idle_closed`].
    pub idle_closed: u64,
    /// See [`ConnCounters::header_timeouts`].
    pub header_timeouts: u64,
    /// See [`ConnCounters::tls_failed`].
    pub tls_failed: u64,
}

/// The open connections of one listener.
#[derive(Debug)]
pub struct ConnTable {
    limits: ConnectionLimits,
    /// `limits.max_connections`, or less to fit the open-file limit.
    max: AtomicUsize,
    clock: CoarseClock,
    live: Mutex<HashMap<u64, Arc<ConnState>>>,
    /// Live connections already asked to close (they leave shortly).
    closing: AtomicUsize,
    next_id: AtomicU64,
    /// When the drain began (ms on the table's clock), or [`NOT_DRAINING`].
    drain_since_ms: AtomicU64,
    /// The counters.
    pub counters: ConnCounters,
}

/// A connection's place in the table; leaving it (drop) frees the place.
#[derive(Debug)]
pub struct Admitted {
    table: Arc<ConnTable>,
    id: u64,
    /// The connection's shared state.
    pub state: Arc<ConnState>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let removed = self.table.live.lock().remove(&self.id);
        if removed.is_some_and(|s| s.is_evicted()) {
            self.table.closing.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl ConnTable {
    /// An empty table under `limits`.
    pub fn new(limits: ConnectionLimits) -> Arc<ConnTable> {
        Arc::new(ConnTable {
            max: AtomicUsize::new(limits.max_connections),
            limits,
            clock: CoarseClock::new(),
            live: Mutex::new(HashMap::new()),
            closing: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            drain_since_ms: AtomicU64::new(NOT_DRAINING),
            counters: ConnCounters::default(),
        })
    }

    /// The timeouts this table enforces (and the configured limit; see
    /// [`ConnTable::max_connections`] for the one in force).
    pub fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    /// Most connections admitted at once.
    pub fn max_connections(&self) -> usize {
        self.max.load(Ordering::Relaxed)
    }

    /// Lowers (or raises) the limit, e.g. to fit the open-file limit;
    /// call before the listener starts.
    pub fn set_max_connections(&self, max: usize) {
        self.max.store(max.max(1), Ordering::Relaxed);
    }

    /// Milliseconds since the table was made: the clock of
    /// [`ConnState`]'s phase starts (a coarse one: see
    /// [`super::coarse_clock`]).
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The instant `ms` on the table's clock stands for.
    pub fn instant_at(&self, ms: u64) -> Instant {
        self.clock.instant_at(ms)
    }

    /// Starts the drain (the listener closed; see the module docs) and
    /// wakes every connection waiting for a request, so that each one
    /// looks at its shortened deadline.
    pub fn start_draining(&self) {
        let now = self.now_ms().min(NOT_DRAINING - 1);
        if self
            .drain_since_ms
            .compare_exchange(NOT_DRAINING, now, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return;
        }
        let live: Vec<Arc<ConnState>> = self.live.lock().values().cloned().collect();
        for state in live {
            state.wake();
        }
    }

    /// When the drain began (ms on the table's clock), if it did.
    pub fn draining_since(&self) -> Option<u64> {
        match self.drain_since_ms.load(Ordering::SeqCst) {
            NOT_DRAINING => None,
            since => Some(since),
        }
    }

    /// Admits a new connection (making room as the module docs say), or
    /// `None` when it must be refused.
    pub fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut live = self.live.lock();
        let staying = live.len().saturating_sub(self.closing.load(Ordering::Relaxed));
        if staying >= self.max_connections() && self.make_room(&live) == 0 {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState::new(self.now_ms()));
        live.insert(id, state.clone());
        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
        Some(Admitted { table: self.clone(), id, state })
    }

    /// Asks the longest-waiting connections without a request in
    /// progress to close; returns how many were asked.
    fn make_room(&self, live: &HashMap<u64, Arc<ConnState>>) -> usize {
        let batch = (self.max_connections() / EVICT_BATCH_SHARE).max(1);
        let mut waiting: Vec<(u64, &Arc<ConnState>)> = live
            .values()
            .filter(|s| !s.is_evicted())
            .filter_map(|s| match s.phase() {
                (Phase::Idle | Phase::Head, since) => Some((since, s)),
                (Phase::Busy, _) => None,
            })
            .collect();
        if waiting.len() > batch {
            waiting.select_nth_unstable_by_key(batch - 1, |(since, _)| *since);
            waiting.truncate(batch);
        }
        for (_, state) in &waiting {
            if state.evict() {
                self.closing.fetch_add(1, Ordering::Relaxed);
                self.counters.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        waiting.len()
    }

    /// The open count and counters.
    pub fn snapshot(&self) -> ConnSnapshot {
        let c = &self.counters;
        ConnSnapshot {
            open: self.live.lock().len(),
            max: self.max_connections(),
            accepted: c.accepted.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            evicted: c.evicted.load(Ordering::Relaxed),
            idle_closed: c.idle_closed.load(Ordering::Relaxed),
            header_timeouts: c.header_timeouts.load(Ordering::Relaxed),
            tls_failed: c.tls_failed.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn table(max: usize) -> Arc<ConnTable> {
        ConnTable::new(ConnectionLimits {
            max_connections: max,
            keepalive_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
        })
    }

    #[test]
    fn busy_connections_are_never_closed_for_room() {
        let t = table(2);
        let a = t.admit().unwrap();
        let b = t.admit().unwrap();
        a.state.set_phase(Phase::Busy, t.now_ms());
        b.state.set_phase(Phase::Busy, t.now_ms());
        assert!(t.admit().is_none(), "no room can be made");
        assert_eq!(t.snapshot().refused, 1);
        drop(a);
        assert!(t.admit().is_some(), "a place was freed");
    }

    #[test]
    fn draining_starts_once_and_wakes_waiting_connections() {
        struct Flag(std::sync::atomic::AtomicBool);
        impl futures::task::ArcWake for Flag {
            fn wake_by_ref(flag: &Arc<Self>) {
                flag.0.store(true, Ordering::SeqCst);
            }
        }
        let t = table(4);
        let waiting = t.admit().unwrap();
        let flag = Arc::new(Flag(std::sync::atomic::AtomicBool::new(false)));
        waiting.state.park(&futures::task::waker(flag.clone()));
        assert_eq!(t.draining_since(), None);
        t.start_draining();
        let since = t.draining_since().unwrap();
        assert!(flag.0.load(Ordering::SeqCst), "the parked reader looks at its deadline again");
        assert!(!waiting.state.is_evicted(), "draining is not eviction");
        t.start_draining();
        assert_eq!(t.draining_since(), Some(since), "the drain began once");
    }

    #[test]
    fn the_longest_waiting_connection_makes_room() {
        let t = table(2);
        let older = t.admit().unwrap();
        let newer = t.admit().unwrap();
        older.state.set_phase(Phase::Head, 1);
        newer.state.set_phase(Phase::Idle, 5);
        let third = t.admit();
        assert!(third.is_some());
        assert!(older.state.is_evicted() && !newer.state.is_evicted());
        assert_eq!(t.snapshot().evicted, 1);
        // The evicted one counts as gone: no second eviction until it leaves.
        drop(third);
        assert!(t.admit().is_some());
        assert!(!newer.state.is_evicted());
        drop(older);
        assert_eq!(t.snapshot().open, 1);
    }
}
