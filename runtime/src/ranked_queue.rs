//! A bounded queue that hands out its entries by [`Rank`] rather than by
//! arrival: what a pool's workers take requests from.
//!
//! - Taking (`recv`, `recv_deadline`, `try_recv`): the entry with the
//!   smallest [`Rank::key`] as of now (class after aging, then deadline,
//!   then arrival; with [`QueueOrder::Fifo`] class after aging, then
//!   arrival; see [`crate::rank`]). A linear scan under one lock: a
//!   pool queue holds at most `queue_capacity` entries, and the key
//!   changes with time (aging), so a heap would need rebuilding anyway.
//! - Offering ([`RankedSender::offer`]) to a full queue: if some waiter is
//!   of a lower class than the arrival (a larger class number), the
//!   youngest waiter of the lowest class queued is taken out and handed
//!   back as displaced (its caller gets the refusal it would have had on
//!   arrival), and the arrival takes its place; otherwise the arrival is
//!   refused (`Full`). Under overload the lowest class is shed first.
//! - Putting back ([`RankedSender::put_back`], [`RankedReceiver::put_back`]):
//!   entries of a preempted batch (see [`crate::preempt`]) go back with
//!   their own rank and queue time, so they take their old place (arrival
//!   is ordered by queue time, the queue's own arrival number breaking
//!   ties); they may take the queue over its capacity, and a put-back
//!   entry is never displaced by an arrival: preemption loses no request.
//! - Taking company for a batch of one class (`try_recv_within`,
//!   `recv_deadline_within`): only an entry of the given class or higher
//!   (after aging) that was not put back, for a pool that preempts,
//!   whose batches hold one class each and whose put-back entries run
//!   alone.
//! - Splitting by class, for a pool that reserves a session for the
//!   first class ([`RankedReceiver::split_first_class`], see
//!   [`crate::reserve`]): one receiver takes only entries whose own class
//!   is 1 (aging does not count: a low-class request that waited long is
//!   not first class here), the others only the other entries; each side
//!   sleeps on a wake-up of its own, which only the arrivals it takes
//!   give.
//! - Closing: dropping the sender closes the queue; receivers drain what
//!   is queued, then get `None`. Offering once every receiver is gone is
//!   refused (`Closed`).

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::rank::{ClassCounts, QueueOrder, Rank, FIRST_CLASS, PRIORITY_LEVELS};

struct Slot<T> {
    rank: Rank,
    enqueued: Instant,
    seq: u64,
    /// Put back after a preemption: never displaced by an arrival.
    pinned: bool,
    item: T,
}

struct State<T> {
    slots: Vec<Slot<T>>,
    capacity: usize,
    order: QueueOrder,
    next_seq: u64,
    closed: bool,
    receivers: usize,
    /// Receivers that take only the first class.
    first_class_receivers: usize,
    counts: Arc<ClassCounts>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Wakes a receiver of every class.
    ready: Condvar,
    /// Wakes a receiver of the first class only.
    ready_first: Condvar,
}

/// The sending side; dropping it closes the queue.
pub struct RankedSender<T> {
    shared: Arc<Shared<T>>,
}

/// A receiving side; clone one per worker.
pub struct RankedReceiver<T> {
    shared: Arc<Shared<T>>,
    takes: Takes,
}

/// Which entries a receiver takes, by the class each asked for (module
/// docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    /// Every entry.
    Every,
    /// Only entries of the first class.
    FirstClass,
    /// Every entry but those of the first class.
    OtherClasses,
}

impl Takes {
    /// Whether a receiver that takes these takes an entry of `class`.
    fn class(self, class: u8) -> bool {
        match self {
            Takes::Every => true,
            Takes::FirstClass => class == FIRST_CLASS,
            Takes::OtherClasses => class != FIRST_CLASS,
        }
    }
}

/// What [`RankedSender::take_batch`] does with one queued entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Take it.
    Yes,
    /// Leave it queued and look at the next.
    Skip,
    /// Leave it and every later one queued.
    Stop,
}

/// Why [`RankedSender::offer`] refused an entry (it is handed back).
#[derive(Debug)]
pub enum OfferError<T> {
    /// The queue is at capacity and holds nobody of a lower class.
    Full(T),
    /// Every receiver is gone.
    Closed(T),
}

/// A queue of `capacity` entries (at least one) in deadline order,
/// keeping how many of each class it holds in `counts`.
#[cfg(test)]
pub fn ranked<T>(capacity: usize, counts: Arc<ClassCounts>) -> (RankedSender<T>, RankedReceiver<T>) {
    ranked_in(QueueOrder::Deadline, capacity, counts)
}

/// [`ranked`] in `order` (a pool's `queue_order`).
pub fn ranked_in<T>(
    order: QueueOrder,
    capacity: usize,
    counts: Arc<ClassCounts>,
) -> (RankedSender<T>, RankedReceiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            slots: Vec::new(),
            capacity: capacity.max(1),
            order,
            next_seq: 0,
            closed: false,
            receivers: 1,
            first_class_receivers: 0,
            counts,
        }),
        ready: Condvar::new(),
        ready_first: Condvar::new(),
    });
    (RankedSender { shared: Arc::clone(&shared) }, RankedReceiver { shared, takes: Takes::Every })
}

impl<T> RankedSender<T> {
    /// Queues `item` with `rank`, queued at `enqueued`, without blocking.
    /// `Ok(None)`: queued; `Ok(Some(other))`: queued in the place of
    /// `other`, a lower-class waiter displaced from the full queue.
    pub fn offer(&self, item: T, rank: Rank, enqueued: Instant) -> Result<Option<T>, OfferError<T>> {
        self.offer_waking(item, rank, enqueued, true)
    }

    /// [`Self::offer`] without waking a receiver: for a caller that means
    /// to take the entry out itself ([`Self::take_batch`]) and calls
    /// [`Self::wake_one`] if it cannot. A receiver that is not asleep
    /// still finds the entry when it next looks.
    pub fn offer_quietly(&self, item: T, rank: Rank, enqueued: Instant) -> Result<Option<T>, OfferError<T>> {
        self.offer_waking(item, rank, enqueued, false)
    }

    /// Wakes one receiver blocked on an empty queue, if one is (and a
    /// first-class one too: the entry may be of the first class).
    pub fn wake_one(&self) {
        self.shared.ready.notify_one();
        self.shared.ready_first.notify_one();
    }

    /// Takes entries out by rank, as a receiver would, under one lock:
    /// `accept` sees each queued entry in rank order and says whether to
    /// take it, leave it queued, or stop looking. For a caller that runs
    /// a batch itself instead of a worker ([`crate::caller_batch`]).
    pub fn take_batch(&self, mut accept: impl FnMut(&T) -> Take) -> Vec<T> {
        let mut state = self.shared.state.lock();
        let now = Instant::now();
        let queue_order = state.order;
        let mut by_rank: Vec<usize> = (0..state.slots.len()).collect();
        by_rank.sort_by_key(|&i| {
            let s = &state.slots[i];
            s.rank.key(queue_order, s.enqueued, s.seq, now)
        });
        let mut chosen = Vec::new();
        for i in by_rank {
            match accept(&state.slots[i].item) {
                Take::Yes => chosen.push(i),
                Take::Skip => {}
                Take::Stop => break,
            }
        }
        // Remove from the highest index down: `swap_remove` then only ever
        // moves an entry that stays; then restore rank order among the taken.
        let mut by_position = chosen.clone();
        by_position.sort_unstable_by(|a, b| b.cmp(a));
        let mut taken: Vec<(usize, T)> = Vec::with_capacity(chosen.len());
        for i in by_position {
            let slot = state.slots.swap_remove(i);
            state.counts.remove(slot.rank.class);
            taken.push((i, slot.item));
        }
        taken.sort_by_key(|(i, _)| chosen.iter().position(|c| c == i));
        taken.into_iter().map(|(_, item)| item).collect()
    }

    /// Puts entries of a preempted batch back (module docs): each with its
    /// rank and the time it was first queued; wakes a receiver.
    pub fn put_back(&self, items: Vec<(T, Rank, Instant)>) {
        put_back(&self.shared, items);
    }

    fn offer_waking(
        &self,
        item: T,
        rank: Rank,
        enqueued: Instant,
        wake: bool,
    ) -> Result<Option<T>, OfferError<T>> {
        let mut state = self.shared.state.lock();
        if state.receivers == 0 {
            return Err(OfferError::Closed(item));
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        let slot = Slot { rank, enqueued, seq, pinned: false, item };
        if state.slots.len() < state.capacity {
            state.counts.add(rank.class);
            state.slots.push(slot);
            let first = state.first_class_receivers > 0 && rank.class == FIRST_CLASS;
            drop(state);
            if wake {
                self.shared.ready_for(first).notify_one();
            }
            return Ok(None);
        }
        let victim = state
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.rank.class > rank.class && !s.pinned)
            .max_by_key(|(_, s)| (s.rank.class, s.seq))
            .map(|(i, _)| i);
        match victim {
            Some(i) => {
                let shed = std::mem::replace(&mut state.slots[i], slot);
                state.counts.remove(shed.rank.class);
                state.counts.add(rank.class);
                let first = state.first_class_receivers > 0 && rank.class == FIRST_CLASS;
                drop(state);
                // A full queue keeps the receivers of every class busy, but
                // the first-class side may sleep beside it: wake it.
                if wake && first {
                    self.shared.ready_first.notify_one();
                }
                Ok(Some(shed.item))
            }
            None => Err(OfferError::Full(slot.item)),
        }
    }

    /// Entries queued now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shared.state.lock().slots.len()
    }
}

impl<T> Drop for RankedSender<T> {
    fn drop(&mut self) {
        self.shared.state.lock().closed = true;
        self.shared.ready.notify_all();
        self.shared.ready_first.notify_all();
    }
}

impl<T> Shared<T> {
    /// The wake-up a receiver of the first class (`first`) or of every
    /// class sleeps on.
    fn ready_for(&self, first: bool) -> &Condvar {
        if first {
            &self.ready_first
        } else {
            &self.ready
        }
    }
}

impl<T> Clone for RankedReceiver<T> {
    fn clone(&self) -> Self {
        RankedReceiver::taking(&self.shared, self.takes)
    }
}

impl<T> Drop for RankedReceiver<T> {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.receivers = state.receivers.saturating_sub(1);
        if self.takes == Takes::FirstClass {
            state.first_class_receivers = state.first_class_receivers.saturating_sub(1);
        }
    }
}

/// Queues `items` pinned, over capacity if need be, and wakes a receiver.
fn put_back<T>(shared: &Shared<T>, items: Vec<(T, Rank, Instant)>) {
    if items.is_empty() {
        return;
    }
    let mut state = shared.state.lock();
    let mut first = false;
    for (item, rank, enqueued) in items {
        let seq = state.next_seq;
        state.next_seq += 1;
        state.counts.add(rank.class);
        first |= rank.class == FIRST_CLASS;
        state.slots.push(Slot { rank, enqueued, seq, pinned: true, item });
    }
    let first = first && state.first_class_receivers > 0;
    drop(state);
    shared.ready.notify_one();
    if first {
        shared.ready_first.notify_one();
    }
}

/// Takes the first entry by rank as of now that a receiver of `takes`
/// takes, if any.
fn take<T>(state: &mut State<T>, takes: Takes) -> Option<T> {
    take_where(state, PRIORITY_LEVELS, true, takes)
}

/// Takes the first entry by rank as of now that a receiver of `takes`
/// takes and that was not put back, if any and if its class (after
/// aging) is `max_class` or higher (a number no larger): company for a
/// batch of a pool that preempts.
fn take_within<T>(state: &mut State<T>, max_class: u8, takes: Takes) -> Option<T> {
    take_where(state, max_class, false, takes)
}

/// [`take_within`]; `put_back_too` also considers entries put back.
fn take_where<T>(state: &mut State<T>, max_class: u8, put_back_too: bool, takes: Takes) -> Option<T> {
    let (now, order) = (Instant::now(), state.order);
    let (first, key) = state
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| put_back_too || !s.pinned)
        .filter(|(_, s)| takes.class(s.rank.class))
        .map(|(i, s)| (i, s.rank.key(order, s.enqueued, s.seq, now)))
        .min_by_key(|(_, key)| *key)?;
    if key.0 > max_class {
        return None;
    }
    let slot = state.slots.swap_remove(first);
    state.counts.remove(slot.rank.class);
    Some(slot.item)
}

impl<T> RankedReceiver<T> {
    /// Blocks for the first entry by rank; `None` once the queue is closed
    /// and drained.
    pub fn recv(&self) -> Option<T> {
        let mut state = self.shared.state.lock();
        loop {
            if let Some(item) = take(&mut state, self.takes) {
                return Some(item);
            }
            if state.closed {
                return None;
            }
            self.ready().wait(&mut state);
        }
    }

    /// Two receivers of the same queue (module docs): one that takes
    /// only entries whose own class is the first (a pool's reserved
    /// session), and one (clone it per worker) that takes the others.
    pub fn split_first_class(&self) -> (RankedReceiver<T>, RankedReceiver<T>) {
        (
            RankedReceiver::taking(&self.shared, Takes::FirstClass),
            RankedReceiver::taking(&self.shared, Takes::OtherClasses),
        )
    }

    /// A new receiver of `shared` that takes `takes`.
    fn taking(shared: &Arc<Shared<T>>, takes: Takes) -> RankedReceiver<T> {
        let mut state = shared.state.lock();
        state.receivers += 1;
        if takes == Takes::FirstClass {
            state.first_class_receivers += 1;
        }
        RankedReceiver { shared: Arc::clone(shared), takes }
    }

    /// The wake-up this receiver sleeps on.
    fn ready(&self) -> &Condvar {
        self.shared.ready_for(self.takes == Takes::FirstClass)
    }

    /// [`Self::recv`], giving up (`None`) at `deadline`.
    #[cfg(test)]
    pub fn recv_deadline(&self, deadline: Instant) -> Option<T> {
        let mut state = self.shared.state.lock();
        loop {
            if let Some(item) = take(&mut state, self.takes) {
                return Some(item);
            }
            if state.closed || self.ready().wait_until(&mut state, deadline).timed_out() {
                return take(&mut state, self.takes);
            }
        }
    }

    /// The first entry by rank, if one is queued now.
    #[cfg(test)]
    pub fn try_recv(&self) -> Option<T> {
        take(&mut self.shared.state.lock(), self.takes)
    }

    /// [`Self::try_recv`] for a batch whose first entry is of `max_class`:
    /// only an entry of that class or higher (after aging) is taken; a
    /// lower one stays queued for a batch of its own, and so does an
    /// entry put back (it runs alone).
    pub fn try_recv_within(&self, max_class: u8) -> Option<T> {
        take_within(&mut self.shared.state.lock(), max_class, self.takes)
    }

    /// [`Self::recv_deadline`] for a batch whose first entry is of
    /// `max_class`: waits (until `deadline`) only while the queue is
    /// empty; `None` at once when what is queued is of a lower class or
    /// was put back.
    pub fn recv_deadline_within(&self, deadline: Instant, max_class: u8) -> Option<T> {
        let mut state = self.shared.state.lock();
        loop {
            if let Some(item) = take_within(&mut state, max_class, self.takes) {
                return Some(item);
            }
            if !state.slots.is_empty() || state.closed {
                return None;
            }
            if self.ready().wait_until(&mut state, deadline).timed_out() {
                return take_within(&mut state, max_class, self.takes);
            }
        }
    }

    /// [`RankedSender::put_back`], from a worker.
    pub fn put_back(&self, items: Vec<(T, Rank, Instant)>) {
        put_back(&self.shared, items);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::rank::AGING_STEP;

    fn drain(rx: &RankedReceiver<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| rx.try_recv()).collect()
    }

    #[test]
    fn without_ranks_of_their_own_entries_leave_first_in_first_out() {
        let (tx, rx) = ranked(8, Default::default());
        let now = Instant::now();
        for name in ["a", "b", "c"] {
            tx.offer(name, Rank::default(), now).unwrap();
        }
        assert_eq!(drain(&rx), ["a", "b", "c"]);
    }

    /// The order five entries of three classes, with and without
    /// deadlines, leave a queue in `order`.
    fn mixed_entries_leave(order: QueueOrder) -> Vec<&'static str> {
        let (tx, rx) = ranked_in(order, 8, Default::default());
        let now = Instant::now();
        let at = |ms| Some(now + Duration::from_secs(60) + Duration::from_millis(ms));
        tx.offer("low", Rank::new(3, at(1)), now).unwrap();
        tx.offer("default-late", Rank::new(2, at(500)), now).unwrap();
        tx.offer("default-soon", Rank::new(2, at(5)), now).unwrap();
        tx.offer("default-none", Rank::new(2, None), now).unwrap();
        tx.offer("high", Rank::new(1, at(900)), now).unwrap();
        drain(&rx)
    }

    #[test]
    fn a_higher_class_leaves_first_then_earliest_deadline_first() {
        assert_eq!(
            mixed_entries_leave(QueueOrder::Deadline),
            ["high", "default-soon", "default-late", "default-none", "low"]
        );
    }

    #[test]
    fn a_fifo_queue_takes_a_class_by_arrival_whatever_the_deadlines() {
        assert_eq!(
            mixed_entries_leave(QueueOrder::Fifo),
            ["high", "default-late", "default-soon", "default-none", "low"]
        );
    }

    #[test]
    fn a_low_class_that_waited_long_enough_is_promoted_past_younger_higher_ones() {
        let (tx, rx) = ranked(8, Default::default());
        let now = Instant::now();
        // Queued three aging steps ago in class 4: now effectively class 1.
        let old = now.checked_sub(AGING_STEP * 3).unwrap_or(now);
        tx.offer("young-2", Rank::new(2, None), now).unwrap();
        tx.offer("old-4", Rank::new(4, None), old).unwrap();
        assert_eq!(drain(&rx), ["old-4", "young-2"]);
    }

    #[test]
    fn a_full_queue_sheds_its_youngest_lowest_class_waiter_for_a_higher_class() {
        let (tx, rx) = ranked(3, Default::default());
        let now = Instant::now();
        tx.offer("low-old", Rank::new(4, None), now).unwrap();
        tx.offer("low-young", Rank::new(4, None), now).unwrap();
        tx.offer("mid", Rank::new(3, None), now).unwrap();
        let displaced = tx.offer("high", Rank::new(1, None), now).unwrap();
        assert_eq!(displaced, Some("low-young"));
        // Same class as the lowest waiter: nobody to displace.
        let Err(OfferError::Full(back)) = tx.offer("another-low", Rank::new(4, None), now) else {
            panic!("a class-4 arrival into a queue of class 4 and above is refused")
        };
        assert_eq!(back, "another-low");
        assert_eq!(tx.len(), 3);
        assert_eq!(tx.shared.state.lock().counts.lowest(), Some(4));
        assert_eq!(drain(&rx), ["high", "mid", "low-old"]);
        assert_eq!(tx.shared.state.lock().counts.lowest(), None);
    }

    #[test]
    fn closing_drains_then_ends_and_a_queue_without_receivers_refuses() {
        let (tx, rx) = ranked(2, Default::default());
        tx.offer("a", Rank::default(), Instant::now()).unwrap();
        let rx2 = rx.clone();
        drop(tx);
        assert_eq!(rx.recv(), Some("a"));
        assert_eq!(rx2.recv(), None);
        assert_eq!(rx.recv_deadline(Instant::now() + Duration::from_secs(30)), None);
        let (tx, rx) = ranked(2, Default::default());
        drop(rx);
        assert!(matches!(tx.offer("b", Rank::default(), Instant::now()), Err(OfferError::Closed("b"))));
    }

    #[test]
    fn take_batch_takes_by_rank_skips_and_stops_as_told() {
        let (tx, rx) = ranked(8, Default::default());
        let now = Instant::now();
        for (name, class) in [("a", 3), ("b", 2), ("skip-me", 2), ("c", 1), ("d", 4), ("e", 4)] {
            tx.offer_quietly(name, Rank::new(class, None), now).unwrap();
        }
        let mut seen = 0;
        let taken = tx.take_batch(|&name| {
            seen += 1;
            match name {
                "skip-me" => Take::Skip,
                "e" => Take::Stop,
                _ => Take::Yes,
            }
        });
        assert_eq!(taken, ["c", "b", "a", "d"], "rank order, the skipped one left");
        assert_eq!(seen, 6, "stopped at the last one");
        assert_eq!(tx.shared.state.lock().counts.lowest(), Some(4), "class counts follow what left");
        assert_eq!(drain(&rx), ["skip-me", "e"]);
    }

    #[test]
    fn a_batch_of_a_class_takes_nothing_of_a_lower_one_and_does_not_wait_behind_it() {
        let (tx, rx) = ranked(8, Default::default());
        let now = Instant::now();
        tx.offer("high", Rank::new(1, None), now).unwrap();
        tx.offer("low", Rank::new(4, None), now).unwrap();
        assert_eq!(rx.try_recv_within(1), Some("high"));
        assert_eq!(rx.try_recv_within(1), None, "the low one stays");
        let far = Instant::now() + Duration::from_secs(30);
        assert_eq!(rx.recv_deadline_within(far, 1), None, "no wait while a lower class is queued");
        assert_eq!(rx.try_recv_within(4), Some("low"));
        rx.put_back(vec![("back", Rank::new(1, None), now)]);
        assert_eq!(rx.try_recv_within(4), None, "a put-back entry is no company");
        assert_eq!(rx.try_recv(), Some("back"), "but is taken first on its own");
        // A low waiter aged into the first class counts as one.
        let old = now.checked_sub(AGING_STEP * 3).unwrap_or(now);
        tx.offer("old-low", Rank::new(4, None), old).unwrap();
        assert_eq!(rx.try_recv_within(1), Some("old-low"));
    }

    #[test]
    fn entries_put_back_take_their_old_place_over_capacity_and_are_never_shed() {
        let (tx, rx) = ranked(2, Default::default());
        let t0 = Instant::now();
        let later = t0 + Duration::from_millis(1);
        tx.offer("young-low", Rank::new(4, None), later).unwrap();
        tx.offer("high", Rank::new(1, None), later).unwrap();
        // Two entries queued before the others, preempted, come back into a full queue.
        rx.put_back(vec![("old-low-a", Rank::new(4, None), t0), ("old-low-b", Rank::new(4, None), t0)]);
        assert_eq!(tx.len(), 4, "over capacity");
        // A high arrival sheds the youngest low waiter that was not put back.
        let displaced = tx.offer("high-2", Rank::new(1, None), later).unwrap();
        assert_eq!(displaced, Some("young-low"));
        let Err(OfferError::Full(back)) = tx.offer("high-3", Rank::new(1, None), later) else {
            panic!("only put-back low waiters are left: nobody to displace")
        };
        assert_eq!(back, "high-3");
        assert_eq!(drain(&rx), ["high", "high-2", "old-low-a", "old-low-b"]);
    }

    #[test]
    fn a_quiet_offer_is_still_found_by_a_receiver_that_looks() {
        let (tx, rx) = ranked(2, Default::default());
        tx.offer_quietly("a", Rank::default(), Instant::now()).unwrap();
        tx.wake_one();
        assert_eq!(rx.recv_deadline(Instant::now() + Duration::from_secs(30)), Some("a"));
    }

    #[test]
    fn split_by_class_the_first_class_as_asked_goes_one_way_the_rest_the_other() {
        let (tx, rx) = ranked(8, Default::default());
        let (first, others) = rx.split_first_class();
        let now = Instant::now();
        let old = now.checked_sub(AGING_STEP * 5).unwrap_or(now);
        tx.offer("old-low", Rank::new(4, None), old).unwrap();
        tx.offer("default", Rank::new(2, None), now).unwrap();
        tx.offer("high", Rank::new(1, None), now).unwrap();
        tx.offer("high-2", Rank::new(1, None), now).unwrap();
        assert_eq!(others.try_recv(), Some("old-low"), "aged into the first class, but not asked for it");
        assert_eq!(first.try_recv(), Some("high"), "the first class, in the queue's order");
        assert_eq!(first.try_recv_within(1), Some("high-2"));
        assert_eq!(first.try_recv(), None, "nothing else for the first-class side");
        let far = Instant::now() + Duration::from_secs(30);
        assert_eq!(first.recv_deadline_within(far, 1), None, "no wait while other classes are queued");
        tx.offer("high-3", Rank::new(1, None), now).unwrap();
        assert_eq!(others.try_recv(), Some("default"));
        assert_eq!(others.try_recv(), None, "the other side leaves the first class alone");
        assert_eq!(drain(&rx), ["high-3"], "an unsplit receiver takes every class");
    }

    #[test]
    fn an_arrival_wakes_a_receiver_that_takes_it() {
        let (tx, rx) = ranked::<&'static str>(8, Default::default());
        let (first, others) = rx.split_first_class();
        drop(rx);
        let (done, results) = std::sync::mpsc::channel();
        let sleepers: Vec<_> = [("others", others), ("first", first)]
            .into_iter()
            .map(|(name, r)| {
                let done = done.clone();
                std::thread::spawn(move || {
                    let got = r.recv();
                    done.send((name, got)).unwrap();
                })
            })
            .collect();
        // Both are asleep (or about to be): each arrival must wake the
        // side that takes it, else that side would sleep on (the guard
        // only ends a hung test).
        let hang_guard = Duration::from_secs(60);
        tx.offer("low", Rank::new(4, None), Instant::now()).unwrap();
        assert_eq!(results.recv_timeout(hang_guard).unwrap(), ("others", Some("low")));
        // A full queue of lower classes: the first-class arrival displaces
        // one of them and must still wake its side.
        for _ in 0..8 {
            tx.offer("low", Rank::new(4, None), Instant::now()).unwrap();
        }
        let displaced = tx.offer("high", Rank::new(1, None), Instant::now()).unwrap();
        assert_eq!(displaced, Some("low"));
        assert_eq!(results.recv_timeout(hang_guard).unwrap(), ("first", Some("high")));
        for s in sleepers {
            s.join().unwrap();
        }
        let state = tx.shared.state.lock();
        assert_eq!(
            (state.receivers, state.first_class_receivers),
            (0, 0),
            "dropped receivers are not counted"
        );
    }

    #[test]
    fn recv_deadline_gives_up_when_nothing_arrives() {
        let (_tx, rx) = ranked::<&str>(2, Default::default());
        assert_eq!(rx.recv_deadline(Instant::now() + Duration::from_millis(10)), None);
    }
}
