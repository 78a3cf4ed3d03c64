//! Running a batch's parts on a locked session and recording the run:
//! what a worker's batches ([`crate::worker`]), a lone request on the
//! caller's thread ([`crate::inline`]) and the reruns of a failed batch
//! ([`crate::isolate`]) share, with the [`PoolContext`] they run in.

use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ort::session::{RunOptions, Session, SessionInputValue, SessionInputs};
use parking_lot::MutexGuard;

use crate::batch::{concat, concat_padded};
use crate::convert::{from_ort_value, to_ort_input, to_ort_value};
use crate::pool_shared::PoolShared;
use crate::preempt::RunSlot;
use crate::queue::QueueEntry;
use crate::request::InferenceResponse;
use crate::reserve::lower_this_thread;
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

/// Per output index, the whole batch's tensor (or `None` if nobody asked).
pub(crate) type BatchOutputs = Vec<Option<Tensor>>;

/// What [`execute`] needs of each request of a batch: a queued entry, or
/// a validated request that runs alone on the caller's thread.
pub trait BatchPart: Sync {
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
    let result = run_caught(&mut session, ctx, parts, (None, false), finish);
    drop(session);
    record(ctx, parts, started, result)
}

/// [`run_and_record`] for a batch that may be preempted: it runs with
/// `slot`'s run options, registered in the slot with
/// `preemptible_class` (see [`crate::preempt`]). `None` when the run
/// failed after the batch was told to stop: nothing is recorded, the
/// session is released, and the caller puts the batch back.
pub(crate) fn run_preemptible<P: BatchPart, T>(
    mut session: MutexGuard<'_, Session>,
    ctx: &PoolContext,
    parts: &[P],
    started: Instant,
    run: (&RunSlot, Option<u8>),
    finish: impl FnOnce(BatchOutputs) -> Result<T, String>,
) -> Option<(Result<T, String>, Duration)> {
    let (slot, preemptible_class) = run;
    slot.begin(preemptible_class);
    let result = run_caught(&mut session, ctx, parts, (Some(slot.options()), slot.lowered()), finish);
    let terminated = slot.end();
    drop(session);
    if terminated && result.is_err() {
        return None;
    }
    Some(record(ctx, parts, started, result))
}

/// Runs `parts` (with `run`'s options, on a thread of lowered priority
/// when `run` says so) and `finish` under `catch_unwind`.
fn run_caught<P: BatchPart, T>(
    session: &mut Session,
    ctx: &PoolContext,
    parts: &[P],
    run: (Option<&RunOptions>, bool),
    finish: impl FnOnce(BatchOutputs) -> Result<T, String>,
) -> Result<T, String> {
    let (options, lowered) = run;
    catch_unwind(AssertUnwindSafe(|| {
        if lowered {
            execute_lowered(session, ctx, parts, options)
        } else {
            execute(session, ctx, parts, options)
        }
        .and_then(finish)
    }))
    .unwrap_or_else(|_| Err("ONNX Runtime panicked while running the batch".into()))
}

/// [`execute`] on a thread of its own that lowers its OS priority first
/// ([`crate::reserve`]): only the model's run is lowered, never the
/// worker that takes the queue's and the statistics' locks (a lowered
/// thread holding a lock the reserved worker or the HTTP front waits for
/// would hold them all back behind every thread of normal priority).
fn execute_lowered<P: BatchPart>(
    session: &mut Session,
    ctx: &PoolContext,
    batch: &[P],
    options: Option<&RunOptions>,
) -> Result<BatchOutputs, String> {
    std::thread::scope(|s| {
        let runner = std::thread::Builder::new().name("sy-lowered-run".into()).spawn_scoped(s, || {
            if let Err(e) = lower_this_thread() {
                tracing::debug!(error = %e, "cannot lower a run's priority");
            }
            execute(session, ctx, batch, options)
        });
        match runner {
            Ok(runner) => {
                runner.join().unwrap_or_else(|_| Err("ONNX Runtime panicked while running the batch".into()))
            }
            Err(e) => Err(format!("cannot start a thread to run the batch: {e}")),
        }
    })
}

/// Records a finished run of `parts` (see [`run_and_record`]).
fn record<P: BatchPart, T>(
    ctx: &PoolContext,
    parts: &[P],
    started: Instant,
    result: Result<T, String>,
) -> (Result<T, String>, Duration) {
    let counters = &ctx.shared.counters;
    let rows: usize = parts.iter().map(BatchPart::rows).sum();
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
    options: Option<&RunOptions>,
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
    let inputs = SessionInputs::<0>::ValueMap(inputs);
    let mut results = match options {
        Some(options) => session.run_with_options(inputs, options),
        None => session.run(inputs),
    }
    .map_err(|e| e.to_string())?;
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
