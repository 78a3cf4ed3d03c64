//! What one connection is doing, shared between its stream (which enforces
//! the timeouts on reads), the app (which says when a request's head was
//! read and when its response is done) and the table (which may ask it to
//! close to make room).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::task::Waker;

/// Where a connection is between and within requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No request in progress: waiting for the next one's first byte
    /// (bounded by `keepalive_timeout`).
    Idle,
    /// A request's head is arriving (bounded by `header_timeout` from its
    /// first byte).
    Head,
    /// A request is being served: its body and response are bounded by
    /// the request's own limits, not the connection's.
    Busy,
}

impl Phase {
    fn code(self) -> u8 {
        match self {
            Phase::Idle => 0,
            Phase::Head => 1,
            Phase::Busy => 2,
        }
    }

    fn from_code(code: u8) -> Phase {
        match code {
            0 => Phase::Idle,
            1 => Phase::Head,
            _ => Phase::Busy,
        }
    }
}

/// One connection's shared state.
#[derive(Debug)]
pub struct ConnState {
    phase: AtomicU8,
    /// When the phase began, in ms on the table's clock.
    since_ms: AtomicU64,
    evicted: AtomicBool,
    /// True once a request was served on the connection.
    served: AtomicBool,
    /// The reading task, parked while idle or reading a head, so that an
    /// eviction wakes it at once.
    parked: Mutex<Option<Waker>>,
}

impl ConnState {
    /// A new connection, idle since `now_ms`.
    pub fn new(now_ms: u64) -> ConnState {
        ConnState {
            phase: AtomicU8::new(Phase::Idle.code()),
            since_ms: AtomicU64::new(now_ms),
            evicted: AtomicBool::new(false),
            served: AtomicBool::new(false),
            parked: Mutex::new(None),
        }
    }

    /// The phase and when it began.
    pub fn phase(&self) -> (Phase, u64) {
        (Phase::from_code(self.phase.load(Ordering::Acquire)), self.since_ms.load(Ordering::Acquire))
    }

    /// Enters `phase` at `now_ms`.
    pub fn set_phase(&self, phase: Phase, now_ms: u64) {
        if phase == Phase::Busy {
            self.served.store(true, Ordering::Release);
        }
        self.since_ms.store(now_ms, Ordering::Release);
        self.phase.store(phase.code(), Ordering::Release);
    }

    /// True once the table asked the connection to close.
    pub fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }

    /// Asks the connection to close and wakes its reader; false when it
    /// was already asked.
    pub fn evict(&self) -> bool {
        if self.evicted.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.wake();
        true
    }

    /// Wakes the parked reader so that it looks at its deadline again: its
    /// phase changed outside a read, or the table started draining.
    pub fn wake(&self) {
        if let Some(waker) = self.parked.lock().take() {
            waker.wake();
        }
    }

    /// True once a request was served (or is being served) on the
    /// connection.
    pub fn has_served(&self) -> bool {
        self.served.load(Ordering::Acquire)
    }

    /// Keeps the reader's waker for [`ConnState::evict`].
    pub fn park(&self, waker: &Waker) {
        let mut parked = self.parked.lock();
        match parked.as_ref() {
            Some(w) if w.will_wake(waker) => {}
            _ => *parked = Some(waker.clone()),
        }
    }
}
