//! Running a validated request: one queue entry when it fits one batch of
//! its pool, else batch-sized chunks that take turns with other requests.
//!
//! Why: a worker runs one batch at a time, so a request of thousands of
//! rows queued as one entry would hold the worker for its whole execution
//! (and ONNX Runtime would size its buffers for all its rows at once),
//! while small requests behind it wait. Chunked, it never has more than
//! one chunk per worker of the pool queued or running; the next chunk is
//! queued when the oldest one has answered, behind whatever arrived
//! meanwhile. A small request thus waits for at most about one chunk per
//! worker, and the big one's peak memory is that of a batch.
//!
//! 1. No chunking when the model does not batch, the pool does not batch
//!    (`max_batch_size` 0 or 1: the request runs alone, bounded by the
//!    row limit), or the request fits one batch.
//! 2. Otherwise the pool is fixed first (the named one, else the best
//!    available, see `dispatch`), and the request is cut along its batch
//!    dimension into chunks of `max_batch_size` rows (zero-copy for
//!    fixed-width tensors).
//! 3. Up to `workers` chunks are queued at once; each answer is awaited in
//!    order (within the deadline, see [`crate::wait`]), then the next chunk
//!    is queued. Any error ends the request; chunks still queued are
//!    dropped (skipped as cancelled).
//! 4. The outputs are joined back in order. The response reports the
//!    largest batch a chunk ran in, the first chunk's queue time and the
//!    sum of the chunks' execution times. Each chunk counts as one request
//!    in the pool's statistics.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::batch::{concat, split};
use crate::caller_batch;
use crate::dispatch::{enqueue, order, Pending};
use crate::error::RuntimeError;
use crate::inline::{try_run, Inline};
use crate::model::{LoadedModel, Model};
use crate::rank::Rank;
use crate::request::InferenceResponse;
use crate::validate::Validated;
use crate::wait::{wait, WaitOn};

/// Runs `v` on `pool` (or the best available pool) and waits for it
/// within its `rank`'s deadline, chunked as described in the module docs;
/// each queued entry takes its place in the queue by `rank`.
pub async fn run(
    m: &Model,
    loaded: Arc<LoadedModel>,
    pool: Option<usize>,
    v: Validated,
    rank: Rank,
) -> Result<InferenceResponse, RuntimeError> {
    let deadline = rank.deadline;
    let Some((index, chunk_rows)) = chunking(m, &loaded, pool, v.rows)? else {
        let v = match try_run(m, &loaded, pool, v) {
            Inline::Ran(answer) => return answer,
            Inline::Queue(v) => v,
        };
        let queued = enqueue(m, &loaded, pool, v, rank, true)?;
        let on = wait_on(m, queued.pool)?;
        if queued.quietly {
            return caller_batch::run(m, loaded, queued, on, deadline).await;
        }
        drop(loaded);
        return wait(queued.pending, on, deadline).await;
    };
    let window = m.pools.get(index).map_or(1, |p| p.spec.workers.max(1));
    let on = wait_on(m, index)?;
    let mut chunks = cut(m, v, chunk_rows)?.into_iter();
    let mut queued: VecDeque<Pending> = VecDeque::with_capacity(window);
    let mut parts = Vec::new();
    loop {
        while queued.len() < window {
            let Some(chunk) = chunks.next() else { break };
            queued.push_back(enqueue(m, &loaded, Some(index), chunk, rank, false)?.pending);
        }
        let Some(next) = queued.pop_front() else { break };
        parts.push(wait(next, on, deadline).await?);
    }
    join(m, parts)
}

/// The pool and chunk size when `rows` must be chunked (step 1-2); `None`
/// when the request runs as one entry.
fn chunking(
    m: &Model,
    loaded: &LoadedModel,
    pool: Option<usize>,
    rows: usize,
) -> Result<Option<(usize, usize)>, RuntimeError> {
    if !loaded.batch {
        return Ok(None);
    }
    let index = match pool {
        Some(i) => i,
        None => match order(m, loaded, rows).first() {
            Some(&i) => i,
            None => return Ok(None),
        },
    };
    let Some(shared) = m.pools.get(index) else { return Ok(None) };
    let batching = m.spec.pool_batching(&shared.spec);
    if !batching.enabled() || rows <= batching.max_batch_size {
        return Ok(None);
    }
    Ok(Some((index, batching.max_batch_size)))
}

/// Where a request queued on pool `index` of `m` waits.
fn wait_on(m: &Model, index: usize) -> Result<WaitOn<'_>, RuntimeError> {
    let shared = m.pools.get(index).ok_or_else(|| RuntimeError::Execution {
        model: m.spec.name.clone(),
        reason: "queued on a pool the model does not have".into(),
    })?;
    Ok(WaitOn { model: &m.spec.name, pool: &shared.spec.name, gate: &shared.gate })
}

/// Cuts `v` into chunks of at most `size` rows along dim 0.
fn cut(m: &Model, v: Validated, size: usize) -> Result<Vec<Validated>, RuntimeError> {
    let sizes: Vec<usize> = (0..v.rows).step_by(size).map(|start| size.min(v.rows - start)).collect();
    let internal = |reason: String| RuntimeError::Execution { model: m.spec.name.clone(), reason };
    let mut per_input = Vec::with_capacity(v.inputs.len());
    for tensor in &v.inputs {
        per_input.push(split(tensor, &sizes).map_err(internal)?.into_iter());
    }
    let chunks = sizes
        .iter()
        .map(|&rows| Validated {
            inputs: per_input.iter_mut().filter_map(Iterator::next).collect(),
            rows,
            outputs: v.outputs.clone(),
            group: v.group.clone(),
        })
        .collect();
    Ok(chunks)
}

/// Joins the chunks' answers (step 4).
fn join(m: &Model, parts: Vec<InferenceResponse>) -> Result<InferenceResponse, RuntimeError> {
    let internal = |reason: String| RuntimeError::Execution { model: m.spec.name.clone(), reason };
    let Some(first) = parts.first() else { return Err(internal("a chunked request had no chunks".into())) };
    let mut outputs = Vec::with_capacity(first.outputs.len());
    for (i, (name, _)) in first.outputs.iter().enumerate() {
        let pieces: Vec<_> = parts.iter().filter_map(|p| p.outputs.get(i).map(|(_, t)| t)).collect();
        outputs.push((name.clone(), concat(&pieces).map_err(|e| internal(format!("output '{name}': {e}")))?));
    }
    Ok(InferenceResponse::assembled(
        first,
        outputs,
        parts.iter().map(|p| p.batch_size).max().unwrap_or(0),
        first.queue_time,
        parts.iter().map(|p| p.exec_time).sum(),
    ))
}
