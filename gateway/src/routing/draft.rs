//! Draft then final: running a route's cheap/heavy pair for one streamed
//! call. Reached only through [`super::execute`] with
//! [`super::Strategy::DraftThenFinal`], which resolves the pair, counts the
//! final's decision and shadows the call like any other; the front ends
//! turn the drafts and the final into events (`crate::stream`).
//!
//! 1. Plan with the pair's cascade policy (fresh fleet view, budget spent
//!    so far). When it is not a cascade plan (only one model usable, or
//!    none), the plain routing path answers: one final, no draft.
//! 2. Pick the mode: `sequential` as configured, or `parallel` unless the
//!    heavy placement's pool already holds `parallel_queue_limit` queued
//!    requests (default: one full batch per worker), in which case the
//!    stream runs sequentially so that speculative heavy work does not
//!    pile onto a saturated pool (`sequential_under_load`).
//! 3. Both legs ask for the confidence output too when the client did not
//!    (it is removed again before anything is sent); the cheap leg is the
//!    cheap model on its pools, the heavy leg the heavy model on its pools.
//! 4. Parallel: both legs start at once.
//!    - Cheap answers first: it is sent as the draft. Confident: the final
//!      repeats it and the heavy leg is dropped, so a heavy run that has
//!      not started is never executed. Not confident: the heavy answer is
//!      the final.
//!    - Heavy answers first: it is the final and the cheap leg is dropped
//!      (the draft never delays the final).
//! 5. Sequential: the cheap leg runs; its answer is the draft. Confident:
//!    the final repeats it and the heavy model is never queued. Otherwise,
//!    once the stream has had the chance to write the draft (one yield),
//!    [`CascadePolicy::after_cheap`] places the heavy model; with no usable
//!    pool the final repeats the draft (`cascade_unavailable`), else the
//!    heavy leg runs. A stream's final is not cut short by the latency
//!    budget: the budget bounds the draft and drives placement, while the
//!    client asked to wait for the accurate answer (it can hang up).
//! 6. Failures: the cheap leg failing (overload, device, execution) leaves
//!    the heavy answer as the final (`fallback`), without a draft; a
//!    client error (bad input) ends the request. The heavy leg failing
//!    when its answer is needed returns its error, after the draft was
//!    sent; the caller ends the stream with an `error` event.

use super::backend::Backend;
use super::cascade::with_output;
use super::confidence::confidence;
use super::placements::{run_placements, Routing};
use super::run::route;
use crate::config::draft_section::DraftMode;
use crate::error::GatewayError;
use crate::random_draws;
use router_policies::{CascadePolicy, CascadeStep, FleetView, Placement, Plan, Reason};
use std::future::Future;
use std::pin::{pin, Pin};
use std::task::Poll;
use switchyard_protocol::answer::Answer;
use switchyard_runtime::InferenceRequest;

/// How one stream runs its pair.
pub(super) struct PairRun<'a> {
    /// The request's routing (its policy is the pair's cascade).
    pub routing: &'a Routing<'a>,
    /// Cheap, heavy, confidence output and threshold.
    pub pair: &'a CascadePolicy,
    /// Parallel or sequential, as configured.
    pub mode: DraftMode,
    /// Heavy-pool queue depth at which parallel runs sequentially.
    pub parallel_queue_limit: Option<usize>,
}

/// What was sent as the draft: the cheap answer and its confidence.
pub type DraftSink<'a> = &'a (dyn Fn(&Answer, Option<f32>) + Sync);

/// How a stream's final came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// Both legs were queued at once.
    Parallel,
    /// Configured sequential.
    Sequential,
    /// Parallel configured, sequential because the heavy pool was loaded.
    SequentialUnderLoad,
    /// No cascade plan: one placement answered, no draft.
    Single,
}

impl Ran {
    /// The label in the events' `parameters.draft_mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ran::Parallel => "parallel",
            Ran::Sequential => "sequential",
            Ran::SequentialUnderLoad => "sequential_under_load",
            Ran::Single => "single",
        }
    }
}

/// What [`super::execute`] ends with: the final answer, and how a
/// draft-then-final run reached it (what a stream's events say about it).
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The final answer (the confidence output removed unless asked for).
    pub answer: Answer,
    /// True when the final repeats the draft.
    pub from_draft: bool,
    /// The final's confidence, when the confidence output gave one.
    pub confidence: Option<f32>,
    /// How the pair ran.
    pub ran: Ran,
}

impl Finished {
    /// One answer from the route's policy: no draft, no pair.
    pub fn single(answer: Answer) -> Finished {
        Finished { answer, from_draft: false, confidence: None, ran: Ran::Single }
    }
}

/// An answer of one leg with its confidence (NaN when unknown).
struct Scored {
    answer: Answer,
    confidence: f32,
}

impl Scored {
    fn known(&self) -> Option<f32> {
        known(self.confidence)
    }
}

fn known(c: f32) -> Option<f32> {
    (!c.is_nan()).then_some(c)
}

/// Runs the pair for one streamed call (steps above); drafts go to
/// `on_draft`. Counting and shadowing are [`super::execute`]'s.
pub(super) async fn draft_then_final<B: Backend>(
    backend: &B,
    run: &PairRun<'_>,
    request: InferenceRequest,
    on_draft: DraftSink<'_>,
) -> Result<Finished, GatewayError> {
    let routing = run.routing;
    let fleet = backend.fleet(routing.models);
    let plan = run.pair.decide(routing.budget_now(), &fleet, routing.estimator);
    let Plan::Cascade { cheap, heavy, fallbacks, .. } = plan else {
        let answer = route(backend, routing, random_draws::next_draw(), request).await?;
        let confidence = known(confidence(&answer.outputs, &run.pair.confidence_output));
        return Ok(Finished { answer, from_draft: false, confidence, ran: Ran::Single });
    };
    let legs = Legs::new(cheap, heavy, &fallbacks);
    let ran = match run.mode {
        DraftMode::Sequential => Ran::Sequential,
        _ if heavy_is_loaded(&fleet, &legs.heavy, run.parallel_queue_limit) => Ran::SequentialUnderLoad,
        _ => Ran::Parallel,
    };
    match ran {
        Ran::Parallel => parallel(backend, run, &legs, request, on_draft).await,
        _ => sequential(backend, run, &legs, request, on_draft, ran).await,
    }
}

/// The placements of both legs: the planned pool, then the model's other pools.
struct Legs {
    cheap: Placement,
    cheap_fallbacks: Vec<Placement>,
    heavy: Placement,
    heavy_fallbacks: Vec<Placement>,
}

impl Legs {
    fn new(cheap: Placement, heavy: Placement, fallbacks: &[Placement]) -> Legs {
        let of = |model: &str, except: &str| -> Vec<Placement> {
            fallbacks.iter().filter(|t| &*t.model == model && &*t.pool != except).cloned().collect()
        };
        Legs {
            cheap_fallbacks: of(&cheap.model, &cheap.pool),
            heavy_fallbacks: of(&heavy.model, &heavy.pool),
            cheap,
            heavy,
        }
    }
}

/// True when the heavy placement's pool already holds at least `limit`
/// queued requests (default: workers times the largest batch).
fn heavy_is_loaded(fleet: &FleetView, heavy: &Placement, limit: Option<usize>) -> bool {
    let Some((_, model)) = fleet.find(&heavy.model) else { return false };
    let Some(pool) = model.pools.iter().find(|p| p.name == heavy.pool) else { return false };
    let limit = limit.unwrap_or(pool.workers.max(1) * pool.max_batch_size.max(1));
    pool.queue_depth >= limit
}

/// Runs one leg: `placement` then `fallbacks`, with the confidence output
/// added when needed; returns the answer without it and its confidence.
async fn leg<B: Backend>(
    backend: &B,
    run: &PairRun<'_>,
    placement: &Placement,
    fallbacks: &[Placement],
    reason: Reason,
    request: &InferenceRequest,
) -> Result<Scored, GatewayError> {
    let output = run.pair.confidence_output.as_str();
    let has_it = !output.is_empty() && backend.has_output(&placement.model, output);
    let (asked, added) = with_output(request, output, has_it);
    let mut answer = run_placements(backend, run.routing, placement, fallbacks, reason, asked).await?;
    let confidence = confidence(&answer.outputs, output);
    if added {
        answer.outputs.retain(|(name, _)| name != output);
    }
    Ok(Scored { answer, confidence })
}

/// True for errors that another model would fail the same way (bad input).
fn is_client_error(e: &GatewayError) -> bool {
    let status = e.status();
    (400..500).contains(&status) && status != 429
}

/// The final repeating the draft, with `reason`.
fn repeat(draft: Scored, reason: Reason, ran: Ran) -> Finished {
    let mut answer = draft.answer;
    answer.reason = reason;
    Finished { confidence: known(draft.confidence), answer, from_draft: true, ran }
}

/// The final from the heavy leg.
fn heavy_final(heavy: Scored, reason: Option<Reason>, ran: Ran) -> Finished {
    let confidence = heavy.known();
    let mut answer = heavy.answer;
    if let Some(reason) = reason {
        answer.reason = reason;
    }
    Finished { confidence, answer, from_draft: false, ran }
}

enum First {
    Cheap(Result<Scored, GatewayError>),
    Heavy(Result<Scored, GatewayError>),
}

/// Step 4: both legs at once.
async fn parallel<B: Backend>(
    backend: &B,
    run: &PairRun<'_>,
    legs: &Legs,
    request: InferenceRequest,
    on_draft: DraftSink<'_>,
) -> Result<Finished, GatewayError> {
    let ran = Ran::Parallel;
    let mut cheap = pin!(leg(backend, run, &legs.cheap, &legs.cheap_fallbacks, Reason::Cascade, &request));
    let mut heavy =
        pin!(leg(backend, run, &legs.heavy, &legs.heavy_fallbacks, Reason::CascadeEscalate, &request));
    // Start the heavy leg first: its first poll queues it, whatever the
    // cheap leg does; then the cheap answer wins a tie.
    let first = match poll_once(&mut heavy).await {
        Some(h) => First::Heavy(h),
        None => tokio::select! {
            biased;
            c = &mut cheap => First::Cheap(c),
            h = &mut heavy => First::Heavy(h),
        },
    };
    match first {
        First::Heavy(Ok(h)) => Ok(heavy_final(h, None, ran)),
        First::Heavy(Err(heavy_error)) => {
            // The heavy model failed first: a confident draft can still be final.
            let draft = cheap.await?;
            on_draft(&draft.answer, draft.known());
            if draft.confidence >= run.pair.threshold {
                return Ok(repeat(draft, Reason::CascadeConfident, ran));
            }
            Err(heavy_error)
        }
        First::Cheap(Err(e)) if is_client_error(&e) => Err(e),
        First::Cheap(Err(_)) => Ok(heavy_final(heavy.await?, Some(Reason::Fallback), ran)),
        First::Cheap(Ok(draft)) => {
            on_draft(&draft.answer, draft.known());
            if draft.confidence >= run.pair.threshold {
                // Dropping `heavy` here cancels a heavy run that has not started.
                return Ok(repeat(draft, Reason::CascadeConfident, ran));
            }
            Ok(heavy_final(heavy.await?, None, ran))
        }
    }
}

/// Polls `future` once: its output if it is ready, else `None` (the
/// future keeps its progress and is polled again later).
async fn poll_once<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| match Pin::new(&mut *future).poll(cx) {
        Poll::Ready(output) => Poll::Ready(Some(output)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

/// Step 5: the heavy model only after an unconfident draft.
async fn sequential<B: Backend>(
    backend: &B,
    run: &PairRun<'_>,
    legs: &Legs,
    request: InferenceRequest,
    on_draft: DraftSink<'_>,
    ran: Ran,
) -> Result<Finished, GatewayError> {
    let heavy_leg = |placement: Placement, reason: Option<Reason>| {
        let request = &request;
        async move {
            let fallbacks: Vec<Placement> = legs
                .heavy_fallbacks
                .iter()
                .chain([&legs.heavy])
                .filter(|t| t.pool != placement.pool)
                .cloned()
                .collect();
            let heavy = leg(backend, run, &placement, &fallbacks, Reason::CascadeEscalate, request).await?;
            Ok(heavy_final(heavy, reason, ran))
        }
    };
    let draft = match leg(backend, run, &legs.cheap, &legs.cheap_fallbacks, Reason::Cascade, &request).await {
        Ok(draft) => draft,
        Err(e) if is_client_error(&e) => return Err(e),
        Err(_) => return heavy_leg(legs.heavy.clone(), Some(Reason::Fallback)).await,
    };
    on_draft(&draft.answer, draft.known());
    if draft.confidence >= run.pair.threshold {
        return Ok(repeat(draft, Reason::CascadeConfident, ran));
    }
    // Let the stream write the draft before the heavy run is queued: a
    // heavy run started first would take CPU from writing it.
    tokio::task::yield_now().await;
    let fleet = backend.fleet(run.routing.models);
    let step =
        run.pair.after_cheap(draft.confidence, run.routing.budget_now(), &fleet, run.routing.estimator);
    match step {
        CascadeStep::Escalate(placement, _) => heavy_leg(placement, None).await,
        CascadeStep::AcceptUnconfident(Reason::CascadeUnavailable) => {
            Ok(repeat(draft, Reason::CascadeUnavailable, ran))
        }
        // Over budget (or accepted): a stream still waits for the heavy answer.
        CascadeStep::AcceptUnconfident(_) | CascadeStep::Accept(_) => {
            heavy_leg(legs.heavy.clone(), None).await
        }
    }
}

#[cfg(test)]
mod tests;
