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
use crate::rank::FIRST_CLASS;
use crate::ranked_queue::{ranked_in, OfferError, RankedSender, Take};
use crate::reserve::{lower_this_thread_or_warn, LOWERS};
use crate::row_limit::RowLimit;
use crate::session::build_session;
use crate::spec::ModelSpec;
use crate::worker::{run_worker, warm_up};
use crate::worker_census::WorkerTicket;

/// A running pool: the sending side of its queue, and its workers'
/// sessions (each behind the mutex its worker takes per batch) for
/// requests run on the caller's thread ([`crate::inline`]). A session
/// reserved for the first class ([`crate::reserve`]) belongs to its
/// worker alone and is not among them.
pub struct PoolRuntime {
    sender: RankedSender<QueueEntry>,
    /// One per worker.
    pub sessions: Vec<Arc<Mutex<Session>>>,
    /// Each session's run slot, in the same order (see [`crate::preempt`]).
    pub runs: Vec<Arc<RunSlot>>,
    /// What the workers know about the model and pool.
    pub ctx: Arc<PoolContext>,
    /// The most rows a batch of this pool holds, by the batch's group (1
    /// when it does not batch).
    pub limit: RowLimit,
    /// A session is reserved for the first class ([`crate::reserve`]):
    /// a first-class arrival goes there and never preempts.
    reserves: bool,
}

impl std::fmt::Debug for PoolRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolRuntime").field("workers", &self.sessions.len()).finish_non_exhaustive()
    }
}

/// Builds `count` sessions of the pool of `ctx`, each warmed up when the
/// spec asks; the first that fails fails them all.
fn build_sessions(spec: &ModelSpec, ctx: &PoolContext, count: usize) -> Result<Vec<Session>, String> {
    let pool = &ctx.shared.spec;
    let mut sessions = Vec::with_capacity(count);
    for _ in 0..count {
        let mut session = build_session(&spec.path, pool)?;
        if spec.warmup {
            if let Err(e) = warm_up(&mut session, &ctx.signature) {
                tracing::warn!(model = %spec.name, pool = %pool.name, error = %e, "warm-up run failed");
            }
        }
        sessions.push(session);
    }
    Ok(sessions)
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
    /// With `batching.reserve_top_class` on a CPU pool, one more session
    /// is built for the first class, and the other workers (and their
    /// sessions' ONNX Runtime threads) run at a lowered OS priority (see
    /// [`crate::reserve`]).
    pub fn start(spec: &ModelSpec, ctx: Arc<PoolContext>, batch: bool) -> Result<PoolRuntime, String> {
        let pool = &ctx.shared.spec;
        let batching = spec.pool_batching(pool);
        let reserve = batching.reserve_top_class && pool.device == DeviceKind::Cpu;
        let (sessions, reserved) = if reserve {
            // Built on a lowered thread: the sessions' own threads inherit its priority.
            let lowered = std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name(format!("sy-{}-{}-build", spec.name, pool.name))
                    .spawn_scoped(s, || {
                        lower_this_thread_or_warn(&pool.name);
                        build_sessions(spec, &ctx, pool.workers)
                    })
                    .map_err(|e| format!("cannot start a thread to build sessions: {e}"))?
                    .join()
                    .map_err(|_| "building a session panicked".to_string())?
            })?;
            (lowered, build_sessions(spec, &ctx, 1)?.pop())
        } else {
            (build_sessions(spec, &ctx, pool.workers)?, None)
        };
        let (sender, receiver) =
            ranked_in(batching.queue_order, batching.queue_capacity, Arc::clone(&ctx.shared.queued_classes));
        let max_rows = if batch && batching.enabled() { batching.max_batch_size } else { 1 };
        let limit = RowLimit::new(max_rows, batching.max_batch_tokens.filter(|_| spec.text.is_some()));
        let sessions: Vec<Arc<Mutex<Session>>> =
            sessions.into_iter().map(|s| Arc::new(Mutex::new(s))).collect();
        let preempt = batching.preempt && pool.device == DeviceKind::Cpu;
        let runs = (0..sessions.len())
            .map(|_| RunSlot::new(preempt, reserve && LOWERS).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        // With a reserved session the queue is split: the first class
        // goes to it, the other classes to the other workers.
        let (first_class, receiver) = match reserved {
            Some(_) => {
                let (first, others) = receiver.split_first_class();
                (Some(first), others)
            }
            None => (None, receiver),
        };
        for (i, (session, run)) in sessions.iter().cloned().zip(runs.iter().cloned()).enumerate() {
            let collector = Collector::new(receiver.clone(), Arc::clone(&ctx.shared), limit, batching);
            let worker_ctx = Arc::clone(&ctx);
            let ticket = WorkerTicket::new();
            std::thread::Builder::new()
                .name(format!("sy-{}-{}-{i}", spec.name, pool.name))
                .spawn(move || {
                    run_worker(session, run, worker_ctx, collector, false);
                    drop(ticket);
                })
                .map_err(|e| format!("cannot start worker thread: {e}"))?;
        }
        if let (Some(session), Some(first_class)) = (reserved, first_class) {
            let collector = Collector::new(first_class, Arc::clone(&ctx.shared), limit, batching);
            let (worker_ctx, ticket) = (Arc::clone(&ctx), WorkerTicket::new());
            let run = Arc::new(RunSlot::new(false, false)?);
            let session = Arc::new(Mutex::new(session));
            std::thread::Builder::new()
                .name(format!("sy-first-{}-{}", spec.name, pool.name))
                .spawn(move || {
                    run_worker(session, run, worker_ctx, collector, true);
                    drop(ticket);
                })
                .map_err(|e| format!("cannot start worker thread: {e}"))?;
        }
        Ok(PoolRuntime { sender, sessions, runs, ctx, limit, reserves: reserve })
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
        if offered.is_ok() && !(self.reserves && rank.class == FIRST_CLASS) {
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
