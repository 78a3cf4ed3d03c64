//! Starting a device pool: build one session per worker (on the pool's
//! execution provider), then start the worker threads on a shared bounded
//! queue. Dropping the [`PoolRuntime`] closes the queue; workers finish
//! what is queued and exit, dropping their sessions.

use std::sync::Arc;

use ort::session::Session;
use parking_lot::Mutex;

use crate::device::DeviceKind;
use crate::execute::PoolContext;
use crate::preempt::{preempt_for, RunSlot};
use crate::queue::{with_ranks, Collector, QueueEntry};
use crate::ranked_queue::{ranked_in, OfferError, RankedSender, Take};
use crate::session::build_session;
use crate::spec::ModelSpec;
use crate::worker::{run_worker, warm_up};
use crate::worker_census::WorkerTicket;

/// A running pool: the sending side of its queue, and its workers'
/// sessions (each behind the mutex its worker takes per batch) for
/// requests run on the caller's thread ([`crate::inline`]).
pub struct PoolRuntime {
    sender: RankedSender<QueueEntry>,
    /// One per worker.
    pub sessions: Vec<Arc<Mutex<Session>>>,
    /// Each session's run slot, in the same order (see [`crate::preempt`]).
    pub runs: Vec<Arc<RunSlot>>,
    /// What the workers know about the model and pool.
    pub ctx: Arc<PoolContext>,
    /// The most rows a batch of this pool holds (1 when it does not batch).
    pub max_rows: usize,
}

impl std::fmt::Debug for PoolRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolRuntime").field("workers", &self.sessions.len()).finish_non_exhaustive()
    }
}

/// Why [`PoolRuntime::try_enqueue`] refused an entry (it is handed back).
pub enum EnqueueError {
    /// The queue is at capacity.
    Full(Box<QueueEntry>),
    /// The workers are gone.
    Closed(Box<QueueEntry>),
}

impl PoolRuntime {
    /// Builds the sessions and starts the workers. Any session that fails
    /// to build fails the whole pool (with ONNX Runtime's reason); the
    /// sessions already built are dropped.
    pub fn start(spec: &ModelSpec, ctx: Arc<PoolContext>, batch: bool) -> Result<PoolRuntime, String> {
        let pool = &ctx.shared.spec;
        let mut sessions = Vec::with_capacity(pool.workers);
        for _ in 0..pool.workers {
            let mut session = build_session(&spec.path, pool)?;
            if spec.warmup {
                if let Err(e) = warm_up(&mut session, &ctx.signature) {
                    tracing::warn!(model = %spec.name, pool = %pool.name, error = %e, "warm-up run failed");
                }
            }
            sessions.push(session);
        }
        let batching = spec.pool_batching(pool);
        let (sender, receiver) =
            ranked_in(batching.queue_order, batching.queue_capacity, Arc::clone(&ctx.shared.queued_classes));
        let max_rows = if batch && batching.enabled() { batching.max_batch_size } else { 1 };
        let sessions: Vec<Arc<Mutex<Session>>> =
            sessions.into_iter().map(|s| Arc::new(Mutex::new(s))).collect();
        let preempt = batching.preempt && pool.device == DeviceKind::Cpu;
        let runs = (0..sessions.len())
            .map(|_| RunSlot::new(preempt).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, (session, run)) in sessions.iter().cloned().zip(runs.iter().cloned()).enumerate() {
            let collector = Collector::new(receiver.clone(), Arc::clone(&ctx.shared), max_rows, batching);
            let worker_ctx = Arc::clone(&ctx);
            let ticket = WorkerTicket::new();
            std::thread::Builder::new()
                .name(format!("sy-{}-{}-{i}", spec.name, pool.name))
                .spawn(move || {
                    run_worker(session, run, worker_ctx, collector);
                    drop(ticket);
                })
                .map_err(|e| format!("cannot start worker thread: {e}"))?;
        }
        Ok(PoolRuntime { sender, sessions, runs, ctx, max_rows })
    }

    /// Queues an entry by its rank without blocking. `Ok(Some(other))`:
    /// the queue was full and `other`, a waiter of a lower class, was
    /// taken out to make room (see [`crate::ranked_queue`]); the caller
    /// refuses it as it would have been refused on arrival.
    /// With `wake` false no sleeping worker is woken: the caller runs the
    /// entry's batch itself or calls [`Self::wake_worker`]
    /// ([`crate::caller_batch`]). Once queued, the entry may preempt a
    /// running batch of a lower class ([`crate::preempt`]).
    pub fn try_enqueue(&self, entry: QueueEntry, wake: bool) -> Result<Option<QueueEntry>, EnqueueError> {
        let (rank, enqueued) = (entry.rank, entry.enqueued);
        let offered = if wake {
            self.sender.offer(entry, rank, enqueued)
        } else {
            self.sender.offer_quietly(entry, rank, enqueued)
        };
        if offered.is_ok() {
            preempt_for(&self.runs, rank.class);
        }
        offered.map_err(|e| match e {
            OfferError::Full(entry) => EnqueueError::Full(Box::new(entry)),
            OfferError::Closed(entry) => EnqueueError::Closed(Box::new(entry)),
        })
    }

    /// Wakes a worker that sleeps on an empty queue, for entries queued
    /// without waking one that the caller could not run itself.
    pub fn wake_worker(&self) {
        self.sender.wake_one();
    }

    /// Puts the entries of a preempted batch back into the queue at their
    /// place and wakes a worker (see [`crate::preempt`]).
    pub fn put_back(&self, entries: Vec<QueueEntry>) {
        self.sender.put_back(with_ranks(entries));
    }

    /// Takes queued entries by rank, as a worker would (see
    /// [`RankedSender::take_batch`]); for a caller running a batch itself.
    pub fn take_batch(&self, accept: impl FnMut(&QueueEntry) -> Take) -> Vec<QueueEntry> {
        self.sender.take_batch(accept)
    }
}
