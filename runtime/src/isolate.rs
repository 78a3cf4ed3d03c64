//! Pinning a failed batch's error on the requests that caused it.
//!
//! Why: requests of many clients share a batch, and ONNX Runtime fails a
//! run as a whole. One client's string that a `Cast` cannot parse would
//! fail every request batched with it; isolating keeps the others' answers
//! and gives the client who sent it a 400 that names its data.
//!
//! When a batch fails (and only then: a batch that runs pays nothing):
//! 1. A batch of one request already ran alone: go to step 4.
//! 2. Otherwise the batch counts in `isolated_batches` and each of its
//!    requests runs again alone, in queue order, on the same worker's
//!    session; a request whose caller has gone away is dropped instead
//!    (counted in `cancelled`). The requests stay counted in flight, so
//!    no caller runs inline meanwhile.
//! 3. A request that runs alone gets its answer, as if it had been
//!    batched alone (the batch size it reports is its own rows).
//! 4. A request that fails alone gets [`RuntimeError::InputRejected`]
//!    (400) when there is evidence that the model runs right now, so that
//!    this request's data is what it cannot take: a batch-mate ran alone
//!    in step 3, or (a request that was alone from the start) the pool's
//!    run just before this one succeeded ([`PoolContext::served`] and
//!    [`PoolContext::failures_in_a_row`]). Otherwise the model fails
//!    whatever it is given (every request of the batch failed alone, or
//!    runs keep failing), and the request gets [`RuntimeError::Execution`]
//!    (500), as every request of a failing batch did before isolation.
//!
//! Cost: a failed batch of `n` requests runs `n` more times, with as many
//! rows in total as the batch (a client that keeps sending bad data at
//! most doubles the rows its batch-mates cost). Running each request alone
//! rather than bisecting keeps the answers exact: every request that gets
//! an answer ran exactly as a request alone would, padding included.
//!
//! Doubt it leaves: a device that breaks after serving (e.g. a lost GPU)
//! answers its first lone failure with 400; the batches and the lone
//! requests after it fail with 500, as every run fails. Two clients
//! whose bad requests fill a whole batch get 500 (no batch-mate ran).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ort::session::Session;
use parking_lot::Mutex;

use crate::error::RuntimeError;
use crate::execute::{named_outputs, response, run_and_record, BatchOutputs, PoolContext};
use crate::queue::QueueEntry;
use crate::stats::add;

/// What became of one request of a failed batch when run alone.
enum Alone {
    /// It ran: its outputs and execution time.
    Ran(BatchOutputs, Duration),
    /// It failed on its own: ONNX Runtime's reason.
    Failed(String),
    /// Its caller had gone away; it was not run.
    Gone,
}

/// Settles `batch`, whose run (started at `started`) failed with
/// `reason`, as the module docs describe, and replies to every entry. The
/// worker has released `session`; its entries are counted in flight.
pub fn settle_failed_batch(
    session: &Mutex<Session>,
    ctx: &PoolContext,
    batch: Vec<QueueEntry>,
    reason: String,
    started: Instant,
) {
    let counters = &ctx.shared.counters;
    if batch.len() == 1 {
        counters.in_flight.fetch_sub(1, Ordering::Relaxed);
        add(&counters.errors, 1);
        for entry in batch {
            let _ = entry.reply.send(Err(logged_failure(ctx, reason.clone())));
        }
        return;
    }
    add(&ctx.shared.counters.isolated_batches, 1);
    let outcomes: Vec<Alone> = batch.iter().map(|entry| run_alone_again(session, ctx, entry)).collect();
    counters.in_flight.fetch_sub(batch.len(), Ordering::Relaxed);
    let failed = outcomes.iter().filter(|o| matches!(o, Alone::Failed(_))).count();
    let model_runs = outcomes.iter().any(|o| matches!(o, Alone::Ran(..)));
    tracing::warn!(model = %ctx.model, pool = %ctx.shared.spec.name, %reason, requests = batch.len(), failed,
        model_runs, "batch failed; its requests ran again one by one, and only those that failed alone got the error");
    for (entry, outcome) in batch.into_iter().zip(outcomes) {
        match outcome {
            Alone::Ran(mut outputs, exec_time) => {
                let tensors = named_outputs(ctx, &entry.outputs, &mut outputs);
                let queue_time = started.saturating_duration_since(entry.enqueued);
                let answer = response(ctx, tensors, queue_time, entry.rows, exec_time);
                let _ = entry.reply.send(Ok(answer));
            }
            Alone::Failed(reason) => {
                add(&counters.errors, 1);
                let _ = entry.reply.send(Err(failure(ctx, reason, model_runs)));
            }
            Alone::Gone => add(&counters.cancelled, 1),
        }
    }
}

/// Step 2-3 for one entry: runs it alone unless its caller is gone.
fn run_alone_again(session: &Mutex<Session>, ctx: &PoolContext, entry: &QueueEntry) -> Alone {
    if entry.reply.is_closed() {
        return Alone::Gone;
    }
    let started = Instant::now();
    let (result, exec_time) =
        run_and_record(session.lock(), ctx, std::slice::from_ref(entry), started, Ok::<BatchOutputs, String>);
    match result {
        Ok(outputs) => Alone::Ran(outputs, exec_time),
        Err(reason) => Alone::Failed(reason),
    }
}

/// The error of a request that failed when run alone with `reason` (step
/// 4), `model_runs` when the model was seen running meanwhile.
fn failure(ctx: &PoolContext, reason: String, model_runs: bool) -> RuntimeError {
    let model = ctx.model.clone();
    if model_runs {
        RuntimeError::InputRejected { model, reason }
    } else {
        RuntimeError::Execution { model, reason }
    }
}

/// [`failure`] for a request that ran alone from the start (a batch of
/// one, or inline), logged: a warning when the model runs nothing, at
/// debug level when it rejected the request's data (a client's error,
/// which a client could repeat at will).
pub fn logged_failure(ctx: &PoolContext, reason: String) -> RuntimeError {
    // This failure is counted already: one in a row means the run before it succeeded.
    let ran_before = ctx.served.load(Ordering::Relaxed) && ctx.failures_in_a_row.load(Ordering::Relaxed) == 1;
    let error = failure(ctx, reason, ran_before);
    match &error {
        RuntimeError::InputRejected { .. } => {
            tracing::debug!(model = %ctx.model, pool = %ctx.shared.spec.name, %error, "request rejected")
        }
        _ => tracing::warn!(model = %ctx.model, pool = %ctx.shared.spec.name, %error, "batch failed"),
    }
    error
}
