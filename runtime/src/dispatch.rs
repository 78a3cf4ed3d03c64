//! Choosing a pool for a validated request and queueing it there.
//!
//! With a named pool, the request goes there or fails. Without one:
//! 1. take the available pools of the loaded model;
//! 2. order them by predicted wait ([`crate::PoolStats::predict_wait`]), spec
//!    order breaking ties, paused pools last;
//! 3. queue on the first whose queue has room (overflow goes to the next);
//! 4. if every queue is full, `Overloaded` with the best pool's predicted
//!    wait as the retry hint.
//!
//! A full queue that holds a waiter of a lower class than the request
//! takes the request anyway and sheds its youngest lowest-class waiter,
//! which is answered `Overloaded` as it would have been on arrival.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::error::RuntimeError;
use crate::model::{LoadedModel, Model};
use crate::pool::EnqueueError;
use crate::queue::QueueEntry;
use crate::rank::Rank;
use crate::request::InferenceResponse;
use crate::stats::add;
use crate::validate::Validated;

/// The receiving end of a queued request.
pub type Pending = oneshot::Receiver<Result<InferenceResponse, RuntimeError>>;

/// A queued request: where its result comes from, and the index of the
/// pool it was queued on.
pub struct Queued {
    /// The result, when a worker has run the request.
    pub pending: Pending,
    /// The pool's index in the model's spec.
    pub pool: usize,
    /// Queued without waking a worker: the caller runs its batch or
    /// wakes one ([`crate::caller_batch`]).
    pub quietly: bool,
}

const MIN_RETRY_AFTER: Duration = Duration::from_millis(10);

/// Queues `v` with `rank` on the requested pool, or the best available one.
/// With `caller_runs`, a pool where [`crate::pool_shared::PoolShared::callers_run_batches`] holds is
/// not woken: the caller runs the batch itself or wakes a worker.
pub fn enqueue(
    model: &Model,
    loaded: &LoadedModel,
    pool: Option<usize>,
    mut v: Validated,
    rank: Rank,
    caller_runs: bool,
) -> Result<Queued, RuntimeError> {
    let rows = v.rows;
    let group = v.batch_key(loaded.batch);
    let order = match pool {
        Some(i) => {
            if loaded.pools.get(i).is_none_or(Option::is_none) {
                return Err(unavailable(model, i));
            }
            vec![i]
        }
        None => order(model, loaded, rows),
    };
    let (tx, rx) = oneshot::channel();
    let mut entry = QueueEntry {
        inputs: v.inputs,
        rows,
        outputs: v.outputs,
        group,
        enqueued: Instant::now(),
        rank,
        ahead: 0,
        preempted: 0,
        reply: tx,
    };
    for &i in &order {
        let (Some(Some(runtime)), Some(shared)) = (loaded.pools.get(i), model.pools.get(i)) else { continue };
        let queued = shared.counters.queue_depth.fetch_add(1, Ordering::Relaxed);
        entry.ahead = queued + shared.counters.in_flight.load(Ordering::Relaxed);
        let quietly = caller_runs && shared.callers_run_batches(model.spec.pool_batching(&shared.spec));
        match runtime.try_enqueue(entry, !quietly) {
            Ok(displaced) => {
                add(&shared.counters.requests, 1);
                if let Some(shed) = displaced {
                    shed_displaced(model, shared, shed);
                }
                return Ok(Queued { pending: rx, pool: i, quietly });
            }
            Err(EnqueueError::Full(back) | EnqueueError::Closed(back)) => {
                shared.counters.queue_depth.fetch_sub(1, Ordering::Relaxed);
                add(&shared.counters.rejected, 1);
                entry = *back;
            }
        }
    }
    let best = order.first().and_then(|&i| model.pools.get(i));
    let retry_after = best.map_or(MIN_RETRY_AFTER, |p| {
        p.load(model.spec.pool_batching(&p.spec)).predict_wait(rows).max(MIN_RETRY_AFTER)
    });
    Err(RuntimeError::Overloaded {
        model: model.spec.name.clone(),
        pool: best.map_or_else(String::new, |p| p.spec.name.clone()),
        retry_after,
    })
}

/// Answers `shed`, a waiter displaced from the full queue of pool
/// `shared` by a higher-class arrival, with the `Overloaded` it would
/// have had on arrival; it no longer counts in the queue depth and counts
/// as rejected.
fn shed_displaced(model: &Model, shared: &crate::pool_shared::PoolShared, shed: QueueEntry) {
    shared.counters.queue_depth.fetch_sub(1, Ordering::Relaxed);
    add(&shared.counters.rejected, 1);
    let retry_after =
        shared.load(model.spec.pool_batching(&shared.spec)).predict_wait(shed.rows).max(MIN_RETRY_AFTER);
    let refusal = RuntimeError::Overloaded {
        model: model.spec.name.clone(),
        pool: shared.spec.name.clone(),
        retry_after,
    };
    // A caller that has gone away needs no answer.
    let _ = shed.reply.send(Err(refusal));
}

/// The model's running pools for a request of `rows` rows, best first:
/// by predicted wait, spec order breaking ties, paused pools last.
pub fn order(model: &Model, loaded: &LoadedModel, rows: usize) -> Vec<usize> {
    if let [only] = loaded.pools.as_slice() {
        // One pool: nothing to weigh (most models), and this runs per request.
        return if only.is_some() { vec![0] } else { Vec::new() };
    }
    let mut scored: Vec<(bool, Duration, usize)> = loaded
        .pools
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_some())
        .filter_map(|(i, _)| {
            let stats = model.pools.get(i)?.load(model.spec.pool_batching(&model.pools.get(i)?.spec));
            Some((stats.paused, stats.predict_wait(rows), i))
        })
        .collect();
    scored.sort();
    scored.into_iter().map(|(_, _, i)| i).collect()
}

fn unavailable(model: &Model, i: usize) -> RuntimeError {
    let (name, reason) = model
        .pools
        .get(i)
        .map_or_else(|| (String::new(), None), |p| (p.spec.name.clone(), p.unavailable.lock().clone()));
    RuntimeError::DeviceUnavailable {
        model: model.spec.name.clone(),
        reason: format!("pool '{name}' is unavailable: {}", reason.unwrap_or_else(|| "not started".into())),
    }
}
