//! A queued request's rank ([`Rank`]): its priority class and its
//! deadline, and the order a pool's queue takes requests in. A leaf: it
//! names no other module.
//!
//! The order, when a worker takes the next request (see
//! [`crate::ranked_queue`]):
//! 1. by effective class, 1 first: the request's class, promoted one class
//!    for every [`AGING_STEP`] it has waited (never above class 1), so a
//!    lower class is delayed but never starved outright;
//! 2. then by deadline, earliest first; a request without a deadline goes
//!    after those with one;
//! 3. then by arrival (first in, first out): the time it was queued, then
//!    the queue's arrival number (so entries of a preempted batch, put
//!    back with their queue time, take their old place).
//!
//! Requests of one class with equal budgets have deadlines in arrival
//! order, so without priorities or budgets of their own the queue stays
//! first in, first out.
//!
//! With [`QueueOrder::Fifo`] (a pool's `queue_order = "fifo"`) step 2 is
//! skipped: within a class (after aging) requests leave by arrival,
//! whatever their deadlines. Classes, aging and shedding the lowest class
//! are unchanged; only the deadline stops counting. It is there to
//! compare deadline order against, and for a pool whose callers' budgets
//! should not reorder them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The number of priority classes: 1 (highest) to `PRIORITY_LEVELS`.
pub const PRIORITY_LEVELS: u8 = 4;

/// The highest class: the one a pool may reserve a session for
/// (`batching.reserve_top_class`).
pub const FIRST_CLASS: u8 = 1;

/// The class of a request that asks for none (V2 `priority` 0 or absent).
pub const DEFAULT_CLASS: u8 = 2;

/// How long a request waits before it is promoted one class.
pub const AGING_STEP: Duration = Duration::from_millis(100);

/// How a pool's queue orders the requests of one class (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueOrder {
    /// Earliest deadline first, then arrival (the default).
    #[default]
    Deadline,
    /// Arrival only: deadlines are ignored.
    Fifo,
}

impl QueueOrder {
    /// The word a config writes (`deadline`, `fifo`).
    pub fn as_str(self) -> &'static str {
        match self {
            QueueOrder::Deadline => "deadline",
            QueueOrder::Fifo => "fifo",
        }
    }
}

/// Where a request stands in its pool's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// 1 (highest) to [`PRIORITY_LEVELS`].
    pub class: u8,
    /// When the caller's budget runs out; `None` for a request without one.
    pub deadline: Option<Instant>,
}

impl Default for Rank {
    fn default() -> Self {
        Rank { class: DEFAULT_CLASS, deadline: None }
    }
}

impl Rank {
    /// A rank of `class` (clamped to 1..=[`PRIORITY_LEVELS`]) and `deadline`.
    pub fn new(class: u8, deadline: Option<Instant>) -> Rank {
        Rank { class: class.clamp(1, PRIORITY_LEVELS), deadline }
    }

    /// The class after aging: one class higher per [`AGING_STEP`] waited
    /// since `enqueued`, as of `now`.
    pub fn effective_class(&self, enqueued: Instant, now: Instant) -> u8 {
        let steps = now.saturating_duration_since(enqueued).as_millis() / AGING_STEP.as_millis().max(1);
        let steps = u8::try_from(steps).unwrap_or(u8::MAX);
        self.class.saturating_sub(steps).max(1)
    }

    /// The sort key as of `now` for an entry queued at `enqueued` with
    /// arrival number `seq`, in a queue of `order`: smaller goes first
    /// (module docs).
    pub fn key(
        &self,
        order: QueueOrder,
        enqueued: Instant,
        seq: u64,
        now: Instant,
    ) -> (u8, bool, Option<Instant>, Instant, u64) {
        let class = self.effective_class(enqueued, now);
        match order {
            QueueOrder::Deadline => (class, self.deadline.is_none(), self.deadline, enqueued, seq),
            QueueOrder::Fifo => (class, false, None, enqueued, seq),
        }
    }
}

/// How many entries of each class a queue holds: kept by the queue,
/// read by statistics (which class a full queue would shed first).
#[derive(Debug, Default)]
pub struct ClassCounts {
    counts: [AtomicUsize; PRIORITY_LEVELS as usize],
}

impl ClassCounts {
    fn slot(&self, class: u8) -> Option<&AtomicUsize> {
        self.counts.get(usize::from(class.clamp(1, PRIORITY_LEVELS) - 1))
    }

    /// One more entry of `class`.
    pub fn add(&self, class: u8) {
        if let Some(c) = self.slot(class) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One entry of `class` fewer.
    pub fn remove(&self, class: u8) {
        if let Some(c) = self.slot(class) {
            // Never below zero, whatever the interleaving.
            let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }

    /// The lowest class (largest number) with an entry; `None` when empty.
    pub fn lowest(&self) -> Option<u8> {
        (1..=PRIORITY_LEVELS)
            .rev()
            .find(|&class| self.slot(class).is_some_and(|c| c.load(Ordering::Relaxed) > 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_counts_name_the_lowest_class_queued() {
        let counts = ClassCounts::default();
        assert_eq!(counts.lowest(), None);
        counts.add(1);
        counts.add(3);
        assert_eq!(counts.lowest(), Some(3));
        counts.remove(3);
        counts.remove(3);
        assert_eq!(counts.lowest(), Some(1));
    }

    #[test]
    fn classes_are_clamped_to_the_levels() {
        assert_eq!(Rank::new(0, None).class, 1);
        assert_eq!(Rank::new(9, None).class, PRIORITY_LEVELS);
    }

    #[test]
    fn waiting_promotes_one_class_per_step_up_to_the_first() {
        let t0 = Instant::now();
        let r = Rank::new(4, None);
        assert_eq!(r.effective_class(t0, t0), 4);
        assert_eq!(r.effective_class(t0, t0 + AGING_STEP), 3);
        assert_eq!(r.effective_class(t0, t0 + AGING_STEP * 2 + AGING_STEP / 2), 2);
        assert_eq!(r.effective_class(t0, t0 + AGING_STEP * 100), 1);
    }

    #[test]
    fn a_deadline_goes_before_none_and_earlier_before_later() {
        let t0 = Instant::now();
        let soon = Rank::new(2, Some(t0 + Duration::from_millis(5)));
        let late = Rank::new(2, Some(t0 + Duration::from_millis(500)));
        let none = Rank::new(2, None);
        let order = QueueOrder::Deadline;
        assert!(soon.key(order, t0, 3, t0) < late.key(order, t0, 1, t0));
        assert!(late.key(order, t0, 2, t0) < none.key(order, t0, 0, t0));
    }

    #[test]
    fn fifo_order_ignores_deadlines_but_keeps_class_and_aging() {
        let t0 = Instant::now();
        let fifo = QueueOrder::Fifo;
        let soon = Rank::new(2, Some(t0 + Duration::from_millis(5)));
        let late = Rank::new(2, Some(t0 + Duration::from_millis(500)));
        let none = Rank::new(2, None);
        // Arrival decides: the one with 500 ms left arrived first.
        assert!(late.key(fifo, t0, 1, t0) < soon.key(fifo, t0, 3, t0));
        assert!(none.key(fifo, t0, 0, t0) < late.key(fifo, t0, 1, t0));
        // The class still goes first, and aging still promotes.
        let high = Rank::new(1, None);
        assert!(high.key(fifo, t0, 9, t0) < none.key(fifo, t0, 0, t0));
        let low = Rank::new(3, None);
        assert!(
            low.key(fifo, t0, 0, t0 + AGING_STEP * 2)
                < high.key(fifo, t0 + AGING_STEP * 2, 9, t0 + AGING_STEP * 2)
        );
    }
}
