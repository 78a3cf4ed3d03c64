//! Executing a cascade plan.
//!
//! 1. Run the cheap placement (with the plan's fallbacks), asking it for the
//!    confidence output too when the client did not request it.
//! 2. If a fallback of another model answered, that answer is final
//!    (reason `fallback`).
//! 3. Read the confidence ([`super::confidence`]) and ask
//!    [`CascadePolicy::after_cheap`] with a fresh fleet view and the budget
//!    left now.
//! 4. Accept: the cheap answer, without the extra output
//!    (`cascade_confident`, `cascade_no_budget`, `cascade_unavailable`).
//! 5. Escalate: run the heavy placement with the client's original request;
//!    its answer is final (`cascade_escalate`). If that pool fails with an
//!    error another pool may not have, the runtime's choice of the heavy
//!    model's pools runs it (`fallback`); if that fails too, the cheap
//!    answer is final (`cascade_unavailable`) instead of an error.

use super::backend::Backend;
use super::confidence::confidence;
use super::placements::{answer, run_placements, Routing};
use crate::error::GatewayError;
use router_policies::{CascadePolicy, CascadeStep, Placement, Reason};
use switchyard_protocol::answer::Answer;
use switchyard_runtime::InferenceRequest;

/// Runs a cascade plan (steps above).
pub async fn run_cascade<B: Backend>(
    backend: &B,
    routing: &Routing<'_>,
    policy: &CascadePolicy,
    cheap: &Placement,
    fallbacks: &[Placement],
    request: InferenceRequest,
) -> Result<Answer, GatewayError> {
    let output = policy.confidence_output.as_str();
    let (cheap_request, added) = with_output(&request, output, backend.has_output(&cheap.model, output));
    let mut first =
        run_placements(backend, routing, cheap, fallbacks, Reason::Cascade, cheap_request).await?;
    let score = confidence(&first.outputs, output);
    if added {
        first.outputs.retain(|(name, _)| name != output);
    }
    if *first.model != *cheap.model {
        return Ok(first);
    }
    first.confidence = (!score.is_nan()).then_some(score);
    let fleet = backend.fleet(routing.models);
    let step = crate::telemetry::spans::decide()
        .in_scope(|| policy.after_cheap(score, routing.budget_now(), &fleet, routing.estimator));
    tracing::debug!(confidence = score, step = %step.reason(), "cascade step");
    match step {
        CascadeStep::Accept(reason) | CascadeStep::AcceptUnconfident(reason) => {
            first.reason = reason;
            Ok(first)
        }
        CascadeStep::Escalate(heavy, reason) => {
            let planned = backend.run(&heavy.model, Some(&heavy.pool), request.clone()).await;
            let outcome = match planned {
                Err(e) if e.falls_back() && !routing.budget_now().is_exhausted() => {
                    tracing::debug!(model = %heavy.model, pool = %heavy.pool, error = %e, "heavy pool failed");
                    backend.run(&heavy.model, None, request).await.map(|r| (r, Reason::Fallback))
                }
                other => other.map(|r| (r, reason)),
            };
            match outcome {
                Ok((response, reason)) => {
                    let mut heavy = answer(response, reason, routing);
                    heavy.confidence = first.confidence;
                    Ok(heavy)
                }
                Err(e) if e.falls_back() => {
                    tracing::warn!(model = %heavy.model, error = %e, "escalation failed; answering cheap");
                    first.reason = Reason::CascadeUnavailable;
                    Ok(first)
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// The request for the cheap model: the client's, plus `output` when the
/// client named its outputs without it and the model has it. Returns
/// whether it was added (and must be removed from the answer).
pub fn with_output(request: &InferenceRequest, output: &str, model_has_it: bool) -> (InferenceRequest, bool) {
    let mut cheap = request.clone();
    match cheap.outputs.as_mut() {
        Some(list) if model_has_it && !list.iter().any(|o| o == output) => {
            list.push(output.to_string());
            (cheap, true)
        }
        _ => (cheap, false),
    }
}
