//! A pool's pause gate ([`PauseGate`]): the test and maintenance hook
//! that holds its workers between batches, and that callers waiting for a
//! queued answer watch. A leaf: it names no other module.

use parking_lot::{Condvar, Mutex};

/// Holds a pool's workers between batches while closed; a test and
/// maintenance hook (see [`crate::ModelRepository::set_paused`]). Workers
/// block on it; callers waiting for a queued request watch it
/// asynchronously ([`Self::watch`]), so a request can give up at its
/// deadline while the pool is paused.
#[derive(Debug)]
pub struct PauseGate {
    paused: Mutex<bool>,
    changed: Condvar,
    watch: tokio::sync::watch::Sender<bool>,
}

impl Default for PauseGate {
    fn default() -> Self {
        PauseGate {
            paused: Mutex::new(false),
            changed: Condvar::new(),
            watch: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl PauseGate {
    /// Closes (`true`) or opens the gate.
    pub fn set(&self, paused: bool) {
        *self.paused.lock() = paused;
        self.changed.notify_all();
        self.watch.send_replace(paused);
    }

    /// True while the gate is closed.
    pub fn is_paused(&self) -> bool {
        *self.paused.lock()
    }

    /// A receiver that sees every change of the gate.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<bool> {
        self.watch.subscribe()
    }

    /// Blocks while the gate is closed.
    pub fn wait_open(&self) {
        let mut paused = self.paused.lock();
        while *paused {
            self.changed.wait(&mut paused);
        }
    }
}
