//! A pool worker: a std thread that owns one ONNX Runtime session, takes
//! batches from its [`Collector`], runs them and replies to each request on
//! its oneshot channel. The session sits behind a mutex that the worker
//! takes per batch: a caller may run a request on it directly when the
//! pool is idle (see [`crate::inline`]); otherwise the lock is uncontended.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ort::session::Session;
use ort::value::DynValue;
use parking_lot::{Mutex, MutexGuard};

use crate::batch::split;
use crate::convert::to_ort_value;
use crate::error::RuntimeError;
use crate::execute::{named_outputs, response, run_and_record, run_preemptible, BatchOutputs, PoolContext};
use crate::isolate::{logged_failure, settle_failed_batch};
use crate::preempt::RunSlot;
use crate::queue::{Collector, QueueEntry};
use crate::request::InferenceResponse;
use crate::signature::ModelSignature;
use crate::stats::add;
use crate::tensor::Tensor;
use crate::validate::Validated;

/// The worker loop: runs batches until the queue closes and drains; puts
/// a preempted batch back into the queue. The worker of a session
/// `reserved` for the first class counts its batches
/// ([`crate::reserve`]).
pub fn run_worker(
    session: Arc<Mutex<Session>>,
    run: Arc<RunSlot>,
    ctx: Arc<PoolContext>,
    mut collector: Collector,
    reserved: bool,
) {
    while let Some(batch) = collector.next_batch() {
        if reserved {
            add(&ctx.shared.counters.reserved_batches, 1);
        }
        let preempted = run_batch(session.lock(), &run, &ctx, batch);
        collector.put_back(preempted);
    }
    tracing::debug!(model = %ctx.model, pool = %ctx.shared.spec.name, "worker stopped");
}

/// Per output index, the tensor of each entry (or `None` if nobody asked).
type SplitOutputs = Vec<Option<Vec<Tensor>>>;

/// Runs `batch` (its entries counted in the queue depth) on the locked
/// `session` in its `run` slot, releases it, records the batch in the
/// pool's statistics and replies to every entry (so a caller that has its
/// answer finds the session free). A batch that fails is handed to
/// [`settle_failed_batch`], which finds the requests that caused it. A
/// batch that was preempted (see [`crate::preempt`]) is returned, each
/// entry counted one preemption more and back in the queue depth, for
/// the caller to put back into the queue; otherwise nothing is.
#[must_use = "a preempted batch must go back into the queue"]
pub fn run_batch(
    session: MutexGuard<'_, Session>,
    run: &RunSlot,
    ctx: &PoolContext,
    batch: Vec<QueueEntry>,
) -> Vec<QueueEntry> {
    let counters = &ctx.shared.counters;
    let started = Instant::now();
    counters.in_flight.fetch_add(batch.len(), Ordering::Relaxed);
    counters.queue_depth.fetch_sub(batch.len(), Ordering::Relaxed);
    let rows: Vec<usize> = batch.iter().map(|e| e.rows).collect();
    let split_per_entry = |outputs: BatchOutputs| -> Result<SplitOutputs, String> {
        let mut split_outputs = Vec::with_capacity(outputs.len());
        for (tensor, spec) in outputs.into_iter().zip(&ctx.signature.outputs) {
            split_outputs.push(match tensor {
                None => None,
                Some(tensor) if rows.len() == 1 => Some(vec![tensor]),
                Some(tensor) => {
                    Some(split(&tensor, &rows).map_err(|e| format!("output '{}': {e}", spec.name))?)
                }
            });
        }
        Ok(split_outputs)
    };
    let mutex = MutexGuard::mutex(&session);
    let preemptible = run.preemptible_class(&batch, started);
    let Some((result, exec_time)) =
        run_preemptible(session, ctx, &batch, started, (run, preemptible), split_per_entry)
    else {
        return preempted(ctx, batch);
    };
    for entry in &batch {
        ctx.shared
            .histograms
            .queue_wait_us
            .record_duration(started.saturating_duration_since(entry.enqueued));
    }
    match result {
        Ok(outputs) => {
            counters.in_flight.fetch_sub(batch.len(), Ordering::Relaxed);
            reply_all(ctx, batch, outputs, started, exec_time);
        }
        Err(reason) => settle_failed_batch(mutex, ctx, batch, reason, started),
    }
    Vec::new()
}

/// A preempted `batch`: counted, its entries out of flight and back in
/// the queue depth, each counted one preemption more.
fn preempted(ctx: &PoolContext, mut batch: Vec<QueueEntry>) -> Vec<QueueEntry> {
    let counters = &ctx.shared.counters;
    add(&counters.preemptions, 1);
    counters.queue_depth.fetch_add(batch.len(), Ordering::Relaxed);
    counters.in_flight.fetch_sub(batch.len(), Ordering::Relaxed);
    for entry in &mut batch {
        entry.preempted = entry.preempted.saturating_add(1);
    }
    tracing::debug!(model = %ctx.model, pool = %ctx.shared.spec.name, requests = batch.len(),
        "batch preempted by a higher class; its requests go back into the queue");
    batch
}

/// Runs `request` alone on the locked `session` on the caller's thread
/// ([`crate::inline`]): a batch of one that was never queued, recorded in
/// the pool's statistics like a worker's, its answer returned directly
/// (no reply channel, no batch to split). The caller has counted it in
/// flight.
pub fn run_alone(
    session: MutexGuard<'_, Session>,
    ctx: &PoolContext,
    request: Validated,
) -> Result<InferenceResponse, RuntimeError> {
    let started = Instant::now();
    ctx.shared.histograms.queue_wait_us.record_duration(Duration::ZERO);
    let (result, exec_time) =
        run_and_record(session, ctx, std::slice::from_ref(&request), started, Ok::<BatchOutputs, String>);
    let counters = &ctx.shared.counters;
    counters.in_flight.fetch_sub(1, Ordering::Relaxed);
    let mut outputs = result.map_err(|reason| {
        add(&counters.errors, 1);
        logged_failure(ctx, reason)
    })?;
    let tensors = named_outputs(ctx, &request.outputs, &mut outputs);
    Ok(response(ctx, tensors, Duration::ZERO, request.rows, exec_time))
}

/// Replies to each entry of a batch that ran with its rows of `outputs`.
fn reply_all(
    ctx: &PoolContext,
    batch: Vec<QueueEntry>,
    mut outputs: SplitOutputs,
    started: Instant,
    exec_time: Duration,
) {
    let rows = batch.iter().map(|e| e.rows).sum();
    let mut per_output: Vec<std::vec::IntoIter<Tensor>> =
        outputs.iter_mut().map(|o| o.take().unwrap_or_default().into_iter()).collect();
    for entry in batch {
        let mut mine: Vec<Option<Tensor>> = per_output.iter_mut().map(Iterator::next).collect();
        let tensors = named_outputs(ctx, &entry.outputs, &mut mine);
        let queue_time = started.saturating_duration_since(entry.enqueued);
        let _ = entry.reply.send(Ok(response(ctx, tensors, queue_time, rows, exec_time)));
    }
}

/// Runs one zero-filled request of one row through a fresh session, so the
/// first real request does not pay for lazy initialisation. Skipped (with a
/// debug log) when an input has a dynamic non-batch dimension.
pub fn warm_up(session: &mut Session, signature: &ModelSignature) -> Result<(), String> {
    let mut inputs: Vec<(String, DynValue)> = Vec::with_capacity(signature.inputs.len());
    for spec in &signature.inputs {
        let mut shape: Vec<usize> = Vec::with_capacity(spec.shape.len());
        for (k, &d) in spec.shape.iter().enumerate() {
            match (k, d) {
                (_, d) if d >= 0 => shape.push(d as usize),
                (0, _) => shape.push(1),
                _ => {
                    tracing::debug!(input = %spec.name, "warm-up skipped: dynamic non-batch dimension");
                    return Ok(());
                }
            }
        }
        let tensor = zeros(spec.dtype, shape)?;
        inputs.push((spec.name.clone(), to_ort_value(&tensor)?));
    }
    session.run(inputs).map(|_| ()).map_err(|e| e.to_string())
}

fn zeros(dtype: crate::tensor::DataType, shape: Vec<usize>) -> Result<Tensor, String> {
    use crate::tensor::{element_count, TensorData};
    let count = element_count(&shape).ok_or("shape overflows")?;
    let data = match dtype.element_size() {
        Some(size) => TensorData::Fixed(bytes::Bytes::from(vec![0u8; count * size])),
        None => TensorData::Strings(vec![bytes::Bytes::new(); count]),
    };
    Tensor::new(dtype, shape, data).map_err(|e| e.to_string())
}
