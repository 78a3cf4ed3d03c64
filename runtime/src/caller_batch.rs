//! Running a busy pool's next batch on the caller's thread instead of
//! handing it to a worker thread.
//!
//! Why: under load a worker sleeps on the queue between batches. Waking
//! it for a batch and then waking each caller with its answer costs two
//! thread switches and a few system calls per batch, on the HTTP
//! threads' CPUs; for a model that runs a batch in tens of microseconds
//! that hand-off is a large share of the request's cost, and on a server
//! with one CPU every hand-off is a context switch. [`crate::inline`]
//! already runs a request alone on the caller's thread when the pool is
//! idle; this module covers the busy case, where requests should still
//! share batches.
//!
//! How a request takes this path:
//! 1. It is queued ([`PoolShared::callers_run_batches`]) *without waking a worker* when its pool runs on the
//!    CPU, is not paused, `inline_max` is not zero, `idle_dispatch` is on
//!    (with it off the operator asked every batch to wait for company,
//!    which only a worker does) and the pool's latency table predicts a
//!    one-row batch within `inline_max` (none before the pool's first
//!    batch: that one wakes a worker).
//! 2. The caller yields once to its executor, so that the other requests
//!    the HTTP thread has already read are queued beside it: they are the
//!    company a worker would have waited for.
//! 3. If its answer has come meanwhile (another caller ran its batch), it
//!    is done. Else, if one of the pool's sessions is free, the caller
//!    takes a batch out of the queue in the queue's order (class,
//!    deadline, arrival; entries of another shape are left for a later
//!    batch), up to `max_batch_size` rows and as many rows as the latency
//!    table predicts to run within `inline_max`, runs it like a worker
//!    would (statistics, failure isolation, one reply per entry; in a
//!    pool that preempts, one class per batch, and a higher class may
//!    stop it: its entries go back into the queue and a worker is woken,
//!    see [`crate::preempt`]) and counts it in `caller_batches`.
//! 4. If its request was not in that batch (no free session, the batch
//!    was full, or its shape differed), it wakes a worker and waits for
//!    its answer as any queued request does. A caller that goes away
//!    while its request is queued without a wake-up wakes a worker too.
//!
//! A worker never sleeps on a request that nobody will run: every entry
//! queued quietly is either taken by a caller or followed by a wake-up.

use std::sync::Arc;
use std::time::Instant;

use crate::dispatch::{Pending, Queued};
use crate::error::RuntimeError;
use crate::model::{LoadedModel, Model};
use crate::pool::PoolRuntime;
use crate::pool_shared::PoolShared;
use crate::queue::drop_if_cancelled;
use crate::ranked_queue::Take;
use crate::request::InferenceResponse;
use crate::spec::BatchingSpec;
use crate::stats::add;
use crate::wait::{wait, WaitOn};
use crate::worker::run_batch;

/// Steps 2-4 for `queued`, an entry queued without waking a worker on
/// pool `queued.pool` of `m`: its answer, within `deadline` as [`wait`]
/// gives it.
pub async fn run(
    m: &Model,
    loaded: Arc<LoadedModel>,
    queued: Queued,
    on: WaitOn<'_>,
    deadline: Option<Instant>,
) -> Result<InferenceResponse, RuntimeError> {
    let pool = queued.pool;
    let (Some(Some(runtime)), Some(shared)) = (loaded.pools.get(pool), m.pools.get(pool)) else {
        return Err(RuntimeError::Execution {
            model: m.spec.name.clone(),
            reason: "queued on a pool the model does not have".into(),
        });
    };
    let wake = WakeOnDrop(Some(runtime));
    // Declared after `wake`, so dropped before it: a caller that leaves
    // closes its reply channel before the worker it wakes looks at it
    // (else the worker would run a request nobody waits for).
    let mut pending = queued.pending;
    tokio::task::yield_now().await;
    if let Some(answer) = settled(&mut pending) {
        wake.disarm();
        return answer;
    }
    run_queued_batch(runtime, shared, m.spec.pool_batching(&shared.spec));
    if let Some(answer) = settled(&mut pending) {
        wake.disarm();
        return answer;
    }
    drop(wake);
    drop(loaded);
    wait(pending, on, deadline).await
}

/// The answer, if it has come.
fn settled(pending: &mut Pending) -> Option<Result<InferenceResponse, RuntimeError>> {
    pending.try_recv().ok()
}

/// Step 3: takes a batch out of the queue and runs it on a free session;
/// does nothing when no session is free, the pool is paused or nothing
/// fits.
fn run_queued_batch(runtime: &PoolRuntime, shared: &PoolShared, batching: &BatchingSpec) {
    let Some((session, run)) =
        runtime.sessions.iter().zip(&runtime.runs).find_map(|(s, run)| Some((s.try_lock()?, run)))
    else {
        return;
    };
    if shared.gate.is_paused() {
        return;
    }
    let limit = runtime.limit;
    let fits = |rows: usize| shared.latency.predict_exec(rows).is_some_and(|t| t <= batching.inline_max);
    let mut rows = 0;
    let mut head: Option<(Vec<Vec<usize>>, u8)> = None;
    let mut alone = false;
    let now = Instant::now();
    let taken = runtime.take_batch(|entry| {
        if entry.reply.is_closed() {
            return Take::Yes; // dropped as cancelled below
        }
        let class = entry.rank.effective_class(entry.enqueued, now);
        if let Some((group, head_class)) = &head {
            if batching.preempt && (class > *head_class || alone) {
                return Take::Stop; // one class per batch in a pool that preempts; put back: alone
            }
            if batching.preempt && entry.preempted > 0 {
                return Take::Skip; // put back after a preemption: runs alone
            }
            if *group != entry.group {
                return Take::Skip;
            }
        }
        let total = rows + entry.rows;
        let max_rows = limit.for_group(head.as_ref().map_or(&entry.group, |(group, _)| group));
        if total > max_rows || !fits(total) {
            return Take::Stop;
        }
        if head.is_none() {
            head = Some((entry.group.clone(), class));
            alone = batching.preempt && entry.preempted > 0;
        }
        rows = total;
        Take::Yes
    });
    let mut batch = Vec::with_capacity(taken.len());
    for entry in taken {
        if !drop_if_cancelled(shared, &entry) {
            shared.observe_arrival(entry.ahead);
            batch.push(entry);
        }
    }
    if batch.is_empty() {
        return;
    }
    add(&shared.counters.caller_batches, 1);
    let preempted = run_batch(session, run, &runtime.ctx, batch);
    runtime.put_back(preempted);
}

/// Wakes a worker when dropped armed: a caller leaving (or giving up on
/// running its batch) with its request queued quietly (step 4).
struct WakeOnDrop<'a>(Option<&'a PoolRuntime>);

impl WakeOnDrop<'_> {
    /// The request was answered: no wake-up needed.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for WakeOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(runtime) = self.0 {
            runtime.wake_worker();
        }
    }
}
