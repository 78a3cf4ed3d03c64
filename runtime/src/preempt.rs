//! Preempting a running batch of a lower class: what lets a high-class
//! request into a busy CPU pool run next instead of waiting out the
//! low-class batch that holds the pool's only session.
//!
//! Why: a pool's queue hands out requests by class, but a batch that runs
//! cannot be overtaken; with one worker a high-class request that arrives
//! while a low-class batch of `max_batch_size` rows executes waits for all
//! of it, then for its own run. Under overload that doubled the high
//! class's tail latency (issue 41, `benchmarks/NOTES.md`).
//!
//! How (a pool's `batching.preempt`):
//! 1. Every session of the pool has a [`RunSlot`]: the ONNX Runtime run
//!    options its batches run with, and what it runs now.
//! 2. A batch about to run registers in its session's slot with its
//!    highest class (after aging, as of its start) when it may be
//!    preempted: the pool preempts and none of its entries has been
//!    preempted [`MAX_PREEMPTIONS`] times.
//! 3. A request queued with a class strictly higher than that ([`preempt_for`]),
//!    when every session of the pool runs a batch, sets the terminate
//!    flag of the lowest-class preemptible batch's run options. ONNX
//!    Runtime checks the flag between the graph's nodes and fails the run;
//!    a run that ends before it looks answers as usual.
//! 4. The batch's run failed after the flag was set: nothing is recorded
//!    or answered; its entries, each counted one preemption more, go back
//!    into the queue at their own place (rank and queue time kept, never
//!    shed: [`crate::ranked_queue`]) and the pool counts one preemption.
//!    The worker then takes the next batch by rank: the high-class
//!    request. A pool that preempts gathers one class per batch
//!    ([`crate::queue`]), so the preempted rows do not ride with it, and
//!    runs a request that was put back alone: its batch may not be
//!    preempted again, so it is kept as short as it can be (a high-class
//!    request arriving meanwhile waits for one request's rows, not for a
//!    full batch).
//!
//! Guards: an entry is preempted at most [`MAX_PREEMPTIONS`] times (its
//! batch then runs to the end), and aging ([`crate::rank`]) raises a
//! waiting low-class entry to the first class within a few aging steps,
//! after which no arrival is strictly higher: no livelock, no starvation.
//! Cost: the work of a preempted batch up to the flag is lost (the rows
//! run again), so a pool that preempts serves fewer rows under a mixed
//! overload; the low class absorbs it.

use std::sync::Arc;
use std::time::Instant;

use ort::session::RunOptions;
use parking_lot::Mutex;

use crate::queue::QueueEntry;

/// How many times one queued request may be preempted; a batch holding a
/// request preempted that often runs to the end.
pub const MAX_PREEMPTIONS: u8 = 1;

/// One session's run options and the batch it runs now (module docs,
/// step 1).
pub struct RunSlot {
    options: RunOptions,
    /// The pool preempts: its batches may register as preemptible.
    enabled: bool,
    /// Runs go on a thread of lowered OS priority: the session is one of
    /// the other workers' of a pool that reserves one for the first class
    /// ([`crate::reserve`]).
    lowered: bool,
    state: Mutex<SlotState>,
}

impl std::fmt::Debug for RunSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSlot").field("state", &*self.state.lock()).finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct SlotState {
    /// A batch runs on the session now.
    busy: bool,
    /// The highest class (smallest number) among the running batch's
    /// entries, when it may be preempted.
    preemptible_class: Option<u8>,
    /// The running batch was told to stop.
    terminated: bool,
}

impl RunSlot {
    /// A slot with fresh run options, for a pool that preempts when
    /// `enabled`; its runs go on a thread of lowered priority when
    /// `lowered`.
    pub fn new(enabled: bool, lowered: bool) -> Result<RunSlot, String> {
        let options = RunOptions::new().map_err(|e| format!("cannot create run options: {e}"))?;
        Ok(RunSlot { options, enabled, lowered, state: Mutex::new(SlotState::default()) })
    }

    /// Whether this session's runs go on a thread of lowered priority.
    pub fn lowered(&self) -> bool {
        self.lowered
    }

    /// Step 2: the class `batch` registers with when it may be
    /// preempted: its highest class after aging as of `now`, unless the
    /// pool does not preempt or an entry was preempted
    /// [`MAX_PREEMPTIONS`] times.
    pub fn preemptible_class(&self, batch: &[QueueEntry], now: Instant) -> Option<u8> {
        if !self.enabled || batch.iter().any(|e| e.preempted >= MAX_PREEMPTIONS) {
            return None;
        }
        batch.iter().map(|e| e.rank.effective_class(e.enqueued, now)).min()
    }

    /// The run options a batch in this slot runs with.
    pub fn options(&self) -> &RunOptions {
        &self.options
    }

    /// Step 2: a batch starts on the session; `preemptible_class` is its
    /// highest class when it may be preempted.
    pub fn begin(&self, preemptible_class: Option<u8>) {
        let mut state = self.state.lock();
        *state = SlotState { busy: true, preemptible_class, terminated: false };
    }

    /// The batch ended: true when it was told to stop (step 3). The flag
    /// is cleared for the next run.
    pub fn end(&self) -> bool {
        let mut state = self.state.lock();
        let terminated = state.terminated;
        if terminated {
            if let Err(e) = self.options.unterminate() {
                tracing::warn!(error = %e, "cannot clear the terminate flag of a run");
            }
        }
        *state = SlotState::default();
        terminated
    }
}

/// Step 3 for a request of `class` just queued on a pool with `slots`:
/// when every slot runs a batch and some run a preemptible batch whose
/// highest class is strictly lower than `class`, tells the lowest of them
/// to stop. True when one was told.
pub fn preempt_for(slots: &[Arc<RunSlot>], class: u8) -> bool {
    // Locked in slot order; a worker locks only its own slot, and never
    // while holding another.
    if !slots.first().is_some_and(|s| s.enabled) {
        return false;
    }
    let mut states: Vec<_> = slots.iter().map(|s| s.state.lock()).collect();
    if states.iter().any(|s| !s.busy) {
        return false; // a free session takes the request next
    }
    let victim = states
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.preemptible_class?)))
        .filter(|&(_, running)| running > class)
        .max_by_key(|&(_, running)| running)
        .map(|(i, _)| i);
    let Some((i, slot)) = victim.and_then(|i| Some((i, slots.get(i)?))) else {
        return false;
    };
    if let Err(e) = slot.options.terminate() {
        tracing::warn!(error = %e, "cannot set the terminate flag of a run");
        return false;
    }
    if let Some(state) = states.get_mut(i) {
        state.preemptible_class = None;
        state.terminated = true;
    }
    true
}
