//! Executing a policy's [`Plan`]: one placement with its fallbacks, a cascade,
//! or a shed.
//!
//! 1. Take a fresh fleet view and decide with the budget spent so far.
//! 2. `Shed`: answer 429 (503 when nothing is available) with Retry-After;
//!    when the reason is `unavailable`, first let the runtime try the
//!    route's default model on any pool, so that its own error (e.g. why
//!    CUDA is missing) reaches the client.
//! 3. `Single`: run the placement; on an error that another pool or model may
//!    not have (overload, unavailable device, execution failure) try the
//!    fallbacks in order while budget remains. An answer from a fallback
//!    says `fallback`.
//! 4. `Cascade`: see [`super::cascade`].

use super::backend::{Backend, BackendError};
use super::cascade::run_cascade;
use super::placements::{answer, run_placements, shed, Routing};
use crate::error::GatewayError;
use router_policies::{Draw, Plan, Reason};
use switchyard_protocol::answer::Answer;
use switchyard_runtime::InferenceRequest;

/// Decides and executes one request (steps 1-4 above).
pub(super) async fn route<B: Backend>(
    backend: &B,
    routing: &Routing<'_>,
    draw: Draw,
    request: InferenceRequest,
) -> Result<Answer, GatewayError> {
    let fleet = backend.fleet(routing.models);
    let plan = crate::telemetry::spans::decide()
        .in_scope(|| routing.policy.decide(routing.budget_now(), &fleet, routing.estimator, draw));
    match plan {
        Plan::Single { placement, fallbacks, reason } => {
            run_placements(backend, routing, &placement, &fallbacks, reason, request).await
        }
        Plan::Cascade { cheap, fallbacks, .. } => match routing.policy.as_cascade() {
            Some(policy) => run_cascade(backend, routing, policy, &cheap, &fallbacks, request).await,
            None => run_placements(backend, routing, &cheap, &fallbacks, Reason::Cascade, request).await,
        },
        Plan::Shed { reason: Reason::Unavailable, retry_after } => {
            last_resort(backend, routing, request).await.map_err(|e| {
                if e.falls_back() {
                    shed(routing, Reason::Unavailable, retry_after)
                } else {
                    e.into()
                }
            })
        }
        Plan::Shed { reason, retry_after } => Err(shed(routing, reason, retry_after)),
    }
}

/// Step 2's last resort: the route's default (last) model on the pool the
/// runtime picks.
async fn last_resort<B: Backend>(
    backend: &B,
    routing: &Routing<'_>,
    request: InferenceRequest,
) -> Result<Answer, BackendError> {
    let model = routing.models.last().map_or(routing.route, String::as_str);
    let response = backend.run(model, None, request).await?;
    Ok(answer(response, Reason::Fallback, routing))
}

#[cfg(test)]
mod tests;
