//! A pool's request queue and the batch collector its workers run.
//!
//! The queue is a bounded [`crate::ranked_queue`] shared by the pool's
//! workers: entries leave it by priority class, then deadline, then
//! arrival (see [`crate::rank`]), so a batch is filled in that order.
//! A worker blocks for a first entry, then gathers more until the batch
//! holds `max_batch_size` rows or `max_queue_delay` has passed since the
//! first entry was queued. With `idle_dispatch`, it also stops when the
//! queue is empty and the batch already holds as many requests as usually
//! share the pool: each entry records how many of the pool's requests were
//! queued or executing when it arrived, and the collector keeps a moving
//! average of that count. One client at a time (average 0) never waits, four
//! clients gather about four, forty gather until the delay as without the
//! option (a wait that cannot be joined only adds latency; a wait that will
//! be joined saves an execution).
//! In a pool that preempts (`batching.preempt`, see [`crate::preempt`])
//! a batch holds one priority class (after aging): its first entry's,
//! the highest queued; a lower class is never gathered into it but waits
//! for a batch of its own, so that a high-class request that preempted a
//! batch does not carry the preempted rows along. A request put back
//! after a preemption runs alone: its batch may not be preempted again,
//! so it is kept as short as it can be (a high-class arrival waits for
//! it, not for a full batch).

//! A pool whose callers run their own batches ([`crate::caller_batch`])
//! never waits for company: its callers gather it themselves and queue it
//! without waking a worker, so a waiting worker would only hold the
//! entries it has while later ones run.
//! Entries whose caller has gone away (the oneshot receiver was dropped)
//! are counted as cancelled and never executed.
//! Entries whose non-batch dimensions differ from the batch's are set aside
//! for a later batch rather than failed; an entry is never split.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::error::RuntimeError;
use crate::pool_shared::PoolShared;
use crate::rank::{Rank, PRIORITY_LEVELS};
use crate::ranked_queue::RankedReceiver;
use crate::request::InferenceResponse;
use crate::row_limit::RowLimit;
use crate::spec::BatchingSpec;
use crate::stats::add;
use crate::tensor::Tensor;

/// One queued request, validated against the model's signature.
#[derive(Debug)]
pub struct QueueEntry {
    /// Inputs in graph order.
    pub inputs: Vec<Tensor>,
    /// Rows along the batch dimension.
    pub rows: usize,
    /// Indices of the outputs to return.
    pub outputs: Vec<usize>,
    /// Non-batch dimensions; only equal groups share a batch.
    pub group: Vec<Vec<usize>>,
    /// When it was queued.
    pub enqueued: Instant,
    /// Its priority class and deadline: its place in the queue.
    pub rank: Rank,
    /// How many of the pool's requests were queued or executing when this
    /// one was queued: the load it arrived into, which tells the collector
    /// how large a batch to expect (`idle_dispatch`).
    pub ahead: usize,
    /// How many times a batch holding it was preempted (see
    /// [`crate::preempt`]).
    pub preempted: u8,
    /// Where the result goes; closed when the caller gave up.
    pub reply: oneshot::Sender<Result<InferenceResponse, RuntimeError>>,
}

/// If the entry's caller is gone, counts it as cancelled in `shared`,
/// takes it off the queue depth and returns true.
pub fn drop_if_cancelled(shared: &PoolShared, entry: &QueueEntry) -> bool {
    if entry.reply.is_closed() {
        add(&shared.counters.cancelled, 1);
        shared.counters.queue_depth.fetch_sub(1, Ordering::Relaxed);
        true
    } else {
        false
    }
}

/// `entries` with the rank and queue time each goes back into the queue
/// with (see [`crate::ranked_queue`]).
pub fn with_ranks(entries: Vec<QueueEntry>) -> Vec<(QueueEntry, Rank, Instant)> {
    entries
        .into_iter()
        .map(|e| {
            let (rank, enqueued) = (e.rank, e.enqueued);
            (e, rank, enqueued)
        })
        .collect()
}

/// A worker's view of the queue: gathers the next batch.
pub struct Collector {
    rx: RankedReceiver<QueueEntry>,
    pending: VecDeque<QueueEntry>,
    shared: Arc<PoolShared>,
    limit: RowLimit,
    delay: Duration,
    idle_dispatch: bool,
    /// One class per batch (the pool preempts).
    one_class: bool,
    batching: BatchingSpec,
}

impl Collector {
    /// A collector for one worker; a `limit` of one row means every entry
    /// runs alone. Takes the delay and `idle_dispatch` from `batching`.
    pub fn new(
        rx: RankedReceiver<QueueEntry>,
        shared: Arc<PoolShared>,
        limit: RowLimit,
        batching: &BatchingSpec,
    ) -> Self {
        Collector {
            rx,
            pending: VecDeque::new(),
            shared,
            limit,
            delay: batching.max_queue_delay,
            idle_dispatch: batching.idle_dispatch,
            one_class: batching.preempt,
            batching: batching.clone(),
        }
    }

    /// Takes note of a fresh entry's `ahead` in the pool's `company`.
    fn observe(&mut self, entry: QueueEntry) -> QueueEntry {
        self.shared.observe_arrival(entry.ahead);
        entry
    }

    /// True when a batch of `gathered` entries already holds everyone who
    /// is likely to come: as many as usually share the pool, less those
    /// executing on other workers and those set aside for other batches
    /// (another length bucket or class): they are here too, they just
    /// cannot join this one, and waiting for them would hold the batch
    /// and everything set aside behind it until the deadline.
    fn everyone_is_here(&self, gathered: usize) -> bool {
        let elsewhere = self.shared.counters.in_flight.load(Ordering::Relaxed) + self.pending.len();
        gathered as f64 + elsewhere as f64 >= self.shared.company()
    }

    /// Puts the entries of a preempted batch back into the queue at their
    /// place (see [`crate::preempt`]).
    pub fn put_back(&self, entries: Vec<QueueEntry>) {
        self.rx.put_back(with_ranks(entries));
    }

    /// The next entry for the batch of `gathered` entries whose first is of
    /// `class`: one already queued, else (unless `idle_dispatch` finds
    /// everyone is here) the first to arrive before `deadline`; in a pool
    /// that preempts, never one of a lower class than `class`.
    fn next_arrival(&mut self, gathered: usize, deadline: Instant, class: u8) -> Option<QueueEntry> {
        let class = if self.one_class { class } else { PRIORITY_LEVELS };
        let entry = if !self.idle_dispatch {
            self.rx.recv_deadline_within(deadline, class)
        } else if let Some(entry) = self.rx.try_recv_within(class) {
            Some(entry)
        } else if self.everyone_is_here(gathered) {
            None // waiting would only add latency: nobody else is coming
        } else if self.shared.callers_run_batches(&self.batching) {
            // Callers gather their own company here and queue it without
            // waking anyone: waiting would only hold what this batch has.
            None
        } else {
            self.rx.recv_deadline_within(deadline, class)
        };
        entry.map(|e| self.observe(e))
    }

    /// Blocks until a batch is ready; `None` once the queue is closed (the
    /// model was unloaded) and drained.
    pub fn next_batch(&mut self) -> Option<Vec<QueueEntry>> {
        loop {
            let first = match self.pending.pop_front() {
                Some(entry) => entry,
                None => {
                    let entry = self.rx.recv()?;
                    self.observe(entry)
                }
            };
            self.shared.gate.wait_open();
            if drop_if_cancelled(&self.shared, &first) {
                continue;
            }
            let alone = self.one_class && first.preempted > 0;
            let mut batch = vec![first];
            if self.limit.batches() && !alone {
                self.fill(&mut batch);
            }
            let shared = &self.shared;
            batch.retain(|e| !drop_if_cancelled(shared, e));
            if !batch.is_empty() {
                return Some(batch);
            }
        }
    }

    fn fill(&mut self, batch: &mut Vec<QueueEntry>) {
        let group = batch[0].group.clone();
        let max_rows = self.limit.for_group(&group);
        let deadline = batch[0].enqueued + self.delay;
        let now = Instant::now();
        let class = batch[0].rank.effective_class(batch[0].enqueued, now);
        let mut rows = batch[0].rows;
        let mut i = 0;
        while i < self.pending.len() && rows < max_rows {
            let entry = &self.pending[i];
            let fits = entry.group == group
                && rows + entry.rows <= max_rows
                && (!self.one_class
                    || (entry.preempted == 0 && entry.rank.effective_class(entry.enqueued, now) <= class));
            match self.pending.remove(i) {
                Some(entry) if fits => {
                    if !drop_if_cancelled(&self.shared, &entry) {
                        rows += entry.rows;
                        batch.push(entry);
                    }
                }
                Some(entry) => {
                    self.pending.insert(i, entry);
                    i += 1;
                }
                None => break,
            }
        }
        while rows < max_rows {
            let Some(entry) = self.next_arrival(batch.len(), deadline, class) else { break };
            if drop_if_cancelled(&self.shared, &entry) {
                continue;
            }
            let same_group = entry.group == group;
            if same_group && rows + entry.rows <= max_rows {
                rows += entry.rows;
                batch.push(entry);
            } else {
                self.pending.push_back(entry);
                if same_group {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceKind;
    use crate::ranked_queue::{ranked, RankedSender};
    use crate::spec::PoolSpec;

    type Reply = oneshot::Receiver<Result<InferenceResponse, RuntimeError>>;

    /// The sending side, taking entries as the pool does.
    struct Sender(RankedSender<QueueEntry>);

    impl Sender {
        fn send(&self, entry: QueueEntry) -> Result<(), ()> {
            let (rank, enqueued) = (entry.rank, entry.enqueued);
            match self.0.offer(entry, rank, enqueued) {
                Ok(None) => Ok(()),
                _ => Err(()),
            }
        }
    }

    fn collector(delay: Duration) -> (Sender, Collector) {
        let (tx, rx) = ranked(64, Default::default());
        let spec = PoolSpec {
            name: "cpu".into(),
            device: DeviceKind::Cpu,
            workers: 1,
            intra_op_threads: 1,
            batching: None,
        };
        let batching = BatchingSpec {
            max_batch_size: 64,
            max_queue_delay: delay,
            queue_capacity: 64,
            idle_dispatch: true,
            inline_max: BatchingSpec::DEFAULT_INLINE_MAX,
            queue_order: crate::rank::QueueOrder::Deadline,
            preempt: false,
            reserve_top_class: BatchingSpec::DEFAULT_RESERVE_TOP_CLASS,
            max_batch_tokens: None,
        };
        (Sender(tx), Collector::new(rx, Arc::new(PoolShared::new(spec)), RowLimit::new(64, None), &batching))
    }

    fn entry(ahead: usize) -> (QueueEntry, Reply) {
        let (reply, rx) = oneshot::channel();
        let entry = QueueEntry {
            inputs: vec![],
            rows: 1,
            outputs: vec![],
            group: vec![],
            enqueued: Instant::now(),
            rank: Rank::default(),
            ahead,
            preempted: 0,
            reply,
        };
        (entry, rx)
    }

    /// Queues sixteen requests that each found `ahead` others in the pool
    /// (what teaches the pool its usual company).
    fn send_sixteen(tx: &Sender, ahead: usize) -> Vec<Reply> {
        (0..16)
            .map(|_| {
                let (e, reply) = entry(ahead);
                tx.send(e).unwrap();
                reply
            })
            .collect()
    }

    #[test]
    fn a_lone_request_into_an_empty_pool_is_dispatched_without_waiting() {
        let delay = Duration::from_secs(30);
        let (tx, mut collector) = collector(delay);
        let (first, _reply) = entry(0);
        tx.send(first).unwrap();
        let started = Instant::now();
        let batch = collector.next_batch().unwrap();
        assert_eq!(batch.len(), 1);
        assert!(started.elapsed() < delay, "it did not wait the delay");
    }

    #[test]
    fn requests_that_arrive_into_a_busy_pool_make_the_worker_wait_for_company() {
        let (tx, mut collector) = collector(Duration::from_secs(30));
        // Sixteen requests that each found ten others in the pool.
        let replies = send_sixteen(&tx, 10);
        assert_eq!(collector.next_batch().unwrap().len(), 16, "queued requests form one batch at once");
        assert!(
            collector.shared.company() > 5.0,
            "the average learnt the load: {}",
            collector.shared.company()
        );
        // Now one arrives alone and a second 50 ms later: the worker waits for it.
        let (lone, _a) = entry(10);
        tx.send(lone).unwrap();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let (e, reply) = entry(10);
            tx.send(e).unwrap();
            reply
        });
        let batch = collector.next_batch().unwrap();
        assert_eq!(batch.len(), 2, "the worker waited for the second request");
        drop((replies, late.join().unwrap()));
    }

    #[test]
    fn requests_set_aside_for_another_bucket_count_as_company_that_came() {
        let (tx, mut collector) = collector(Duration::from_secs(30));
        // The pool learns that a request usually finds two others.
        let replies = send_sixteen(&tx, 2);
        assert_eq!(collector.next_batch().unwrap().len(), 16);
        let company = collector.shared.company();
        assert!(company > 1.0 && company < 3.0, "{company}");
        // A short text, then two long ones: the long ones cannot join the
        // short one's batch, but they are the company it waited for.
        let mut texts = Vec::new();
        for bucket in [16, 32, 32] {
            let (mut e, reply) = entry(2);
            e.group = vec![vec![bucket]];
            tx.send(e).unwrap();
            texts.push(reply);
        }
        let started = Instant::now();
        let short = collector.next_batch().unwrap();
        assert_eq!(short.iter().map(|e| e.group[0][0]).collect::<Vec<_>>(), [16]);
        assert!(started.elapsed() < Duration::from_secs(30), "it did not wait the delay for nobody");
        let long = collector.next_batch().unwrap();
        assert_eq!(long.iter().map(|e| e.group[0][0]).collect::<Vec<_>>(), [32, 32]);
        drop((replies, texts));
    }

    #[test]
    fn without_idle_dispatch_a_lone_request_waits_the_delay() {
        let delay = Duration::from_millis(40);
        let (tx, mut collector) = collector(delay);
        collector.idle_dispatch = false;
        let started = Instant::now();
        let (first, _reply) = entry(0);
        tx.send(first).unwrap();
        assert_eq!(collector.next_batch().unwrap().len(), 1);
        assert!(started.elapsed() >= delay, "the deadline counts from when the request was queued");
    }

    #[test]
    fn a_token_budget_caps_each_buckets_batches_by_its_length() {
        let (tx, mut collector) = collector(Duration::from_millis(5));
        collector.limit = RowLimit::new(64, Some(256));
        let mut replies = Vec::new();
        for bucket in [16, 16, 32].iter().flat_map(|&b| std::iter::repeat_n(b, 20)) {
            let (mut e, reply) = entry(60);
            e.group = vec![vec![bucket]];
            tx.send(e).unwrap();
            replies.push(reply);
        }
        let sizes: Vec<(usize, Vec<Vec<usize>>)> = (0..6)
            .map(|_| {
                let batch = collector.next_batch().unwrap();
                (batch.len(), batch[0].group.clone())
            })
            .collect();
        let rows_of = |bucket: usize| -> Vec<usize> {
            sizes.iter().filter(|(_, g)| g[0][0] == bucket).map(|(n, _)| *n).collect()
        };
        assert_eq!(rows_of(16), vec![16, 16, 8], "256 tokens / 16 = 16 rows per batch");
        assert_eq!(rows_of(32), vec![8, 8, 4], "256 tokens / 32 = 8 rows per batch");
        drop(replies);
    }
}
