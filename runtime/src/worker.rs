//! A pool worker: a std thread that owns one ONNX Runtime session, takes
//! batches from its [`Collector`], runs them and replies to each request on
//! its oneshot channel. The session sits behind a mutex that the worker
//! takes per batch: a caller may run a request on it directly when the
//! pool is idle (see [`crate::inline`]); otherwise the lock is uncontended.

use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ort::session::{Session, SessionInputValue, SessionInputs};
use ort::value::DynValue;
use parking_lot::{Mutex, MutexGuard};

use crate::batch::{concat, concat_padded, split};
use crate::convert::{from_ort_value, to_ort_input, to_ort_value};
use crate::error::RuntimeError;
use crate::isolate::{logged_failure, settle_failed_batch};
use crate::queue::{Collector, PoolShared, QueueEntry};
use crate::request::InferenceResponse;
use crate::signature::ModelSignature;
use crate::stats::add;
use crate::tensor::Tensor;
use crate::validate::Validated;

/// What a worker needs to know about its model and pool.
#[derive(Debug)]
pub struct PoolContext {
    /// Model name.
    pub model: String,
    /// Model version.
    pub version: u64,
    /// The model's signature (input and output names, in graph order).
    pub signature: ModelSignature,
    /// The pool's shared state (spec, counters, latency).
    pub shared: Arc<PoolShared>,
    /// For a text model, the pad value of each graph input (graph order):
    /// its requests differ in sequence length and are padded when merged.
    pub pad: Option<Vec<i64>>,
    /// Set once a request has run successfully on this load of the pool.
    pub served: AtomicBool,
    /// Runs that failed since the last one that succeeded. With
    /// [`PoolContext::served`], the evidence [`crate::isolate`] weighs a
    /// lone request's failure against: the run just before it succeeded,
    /// so the model runs and this request's data is what fails.
    pub failures_in_a_row: AtomicU32,
}

/// The worker loop: runs batches until the queue closes and drains.
pub fn run_worker(session: Arc<Mutex<Session>>, ctx: Arc<PoolContext>, mut collector: Collector) {
    while let Some(batch) = collector.next_batch() {
        run_batch(session.lock(), &ctx, batch);
    }
    tracing::debug!(model = %ctx.model, pool = %ctx.shared.spec.name, "worker stopped");
}

/// Per output index, the tensor of each entry (or `None` if nobody asked).
type SplitOutputs = Vec<Option<Vec<Tensor>>>;

/// Per output index, the whole batch's tensor (or `None` if nobody asked).
pub(crate) type BatchOutputs = Vec<Option<Tensor>>;

/// What [`execute`] needs of each request of a batch: a queued entry, or
/// a validated request that runs alone on the caller's thread.
pub trait BatchPart {
    /// Inputs in graph order.
    fn inputs(&self) -> &[Tensor];
    /// Rows along the batch dimension.
    fn rows(&self) -> usize;
    /// Indices of the outputs it asked for.
    fn outputs(&self) -> &[usize];
}

/// `BatchPart` for request types that keep their inputs, rows and output
/// indices in fields of those names.
macro_rules! batch_part_from_fields {
    ($($request:ty),*) => {$(
        impl BatchPart for $request {
            fn inputs(&self) -> &[Tensor] {
                &self.inputs
            }
            fn rows(&self) -> usize {
                self.rows
            }
            fn outputs(&self) -> &[usize] {
                &self.outputs
            }
        }
    )*};
}

batch_part_from_fields!(QueueEntry, Validated);

/// Runs `batch` (its entries counted in the queue depth) on the locked
/// `session`, releases it, records the batch in the pool's statistics and
/// replies to every entry (so a caller that has its answer finds the
/// session free). A batch that fails is handed to
/// [`settle_failed_batch`], which finds the requests that caused it.
pub fn run_batch(session: MutexGuard<'_, Session>, ctx: &PoolContext, batch: Vec<QueueEntry>) {
    let counters = &ctx.shared.counters;
    let started = Instant::now();
    counters.in_flight.fetch_add(batch.len(), Ordering::Relaxed);
    counters.queue_depth.fetch_sub(batch.len(), Ordering::Relaxed);
    for entry in &batch {
        ctx.shared
            .histograms
            .queue_wait_us
            .record_duration(started.saturating_duration_since(entry.enqueued));
    }
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
    let (result, exec_time) = run_and_record(session, ctx, &batch, started, split_per_entry);
    match result {
        Ok(outputs) => {
            counters.in_flight.fetch_sub(batch.len(), Ordering::Relaxed);
            reply_all(ctx, batch, outputs, started, exec_time);
        }
        Err(reason) => settle_failed_batch(mutex, ctx, batch, reason, started),
    }
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

/// Runs `parts` on the locked `session` and hands the outputs to `finish`
/// (both under `catch_unwind`), releases the session and records the
/// execution: counters, histograms, and when it succeeded the latency
/// table, [`PoolContext::served`] and [`PoolContext::failures_in_a_row`]. The parts stay counted in flight
/// and a failure is not yet counted as an error: the caller settles both
/// before anyone hears the answer.
pub(crate) fn run_and_record<P: BatchPart, T>(
    mut session: MutexGuard<'_, Session>,
    ctx: &PoolContext,
    parts: &[P],
    started: Instant,
    finish: impl FnOnce(BatchOutputs) -> Result<T, String>,
) -> (Result<T, String>, Duration) {
    let counters = &ctx.shared.counters;
    let rows: usize = parts.iter().map(BatchPart::rows).sum();
    let result = catch_unwind(AssertUnwindSafe(|| execute(&mut session, ctx, parts).and_then(finish)))
        .unwrap_or_else(|_| Err("ONNX Runtime panicked while running the batch".into()));
    drop(session);
    let exec_time = started.elapsed();
    let histograms = &ctx.shared.histograms;
    add(&counters.executions, 1);
    add(&counters.executed_rows, rows as u64);
    histograms.batch_rows.record(rows as u64);
    histograms.execution_us.record_duration(exec_time);
    if result.is_ok() {
        ctx.shared.latency.record(rows, exec_time);
        if !ctx.served.load(Ordering::Relaxed) {
            ctx.served.store(true, Ordering::Relaxed);
        }
        if ctx.failures_in_a_row.load(Ordering::Relaxed) != 0 {
            ctx.failures_in_a_row.store(0, Ordering::Relaxed);
        }
    } else {
        ctx.failures_in_a_row.fetch_add(1, Ordering::Relaxed);
    }
    (result, exec_time)
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

/// The outputs a request asked for (`wanted`, indices into the
/// signature's outputs, in its order), taken out of `tensors` (one per
/// output index) with their names.
pub(crate) fn named_outputs(
    ctx: &PoolContext,
    wanted: &[usize],
    tensors: &mut [Option<Tensor>],
) -> Vec<(String, Tensor)> {
    wanted
        .iter()
        .filter_map(|&i| Some((ctx.signature.outputs.get(i)?.name.clone(), tensors.get_mut(i)?.take()?)))
        .collect()
}

/// One request's answer from its `outputs` and the batch's timing.
pub(crate) fn response(
    ctx: &PoolContext,
    outputs: Vec<(String, Tensor)>,
    queue_time: Duration,
    batch_size: usize,
    exec_time: Duration,
) -> InferenceResponse {
    InferenceResponse {
        model: ctx.model.clone(),
        version: ctx.version,
        pool: ctx.shared.spec.name.clone(),
        device: ctx.shared.spec.device,
        outputs,
        batch_size,
        queue_time,
        exec_time,
    }
}

/// Concatenates and runs one batch; returns the whole batch's outputs.
/// Only outputs some part asked for are converted.
fn execute<P: BatchPart>(
    session: &mut Session,
    ctx: &PoolContext,
    batch: &[P],
) -> Result<BatchOutputs, String> {
    let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> =
        Vec::with_capacity(ctx.signature.inputs.len());
    for (j, spec) in ctx.signature.inputs.iter().enumerate() {
        let missing = || format!("input '{}' missing", spec.name);
        // A batch of one lends the request's own tensor where it can.
        let value = if let [only] = batch {
            to_ort_input(only.inputs().get(j).ok_or_else(missing)?)
        } else {
            let parts =
                batch.iter().map(|e| e.inputs().get(j).ok_or_else(missing)).collect::<Result<Vec<_>, _>>()?;
            match ctx.pad.as_ref().and_then(|p| p.get(j)) {
                Some(&pad) => to_ort_value(&concat_padded(&parts, pad)?),
                None => to_ort_value(&concat(&parts)?),
            }
            .map(SessionInputValue::from)
        }
        .map_err(|e| format!("input '{}': {e}", spec.name))?;
        inputs.push((Cow::Borrowed(spec.name.as_str()), value));
    }
    let mut results = session.run(SessionInputs::<0>::ValueMap(inputs)).map_err(|e| e.to_string())?;
    let mut outputs: BatchOutputs = Vec::with_capacity(ctx.signature.outputs.len());
    for (i, spec) in ctx.signature.outputs.iter().enumerate() {
        if !batch.iter().any(|e| e.outputs().contains(&i)) {
            outputs.push(None);
            continue;
        }
        let value =
            results.remove(spec.name.as_str()).ok_or_else(|| format!("output '{}' missing", spec.name))?;
        let tensor = from_ort_value(value).map_err(|e| format!("output '{}': {e}", spec.name))?;
        outputs.push(Some(tensor));
    }
    Ok(outputs)
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
