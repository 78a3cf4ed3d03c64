//! Executing a policy's [`Plan`]: one target with its fallbacks, a cascade,
//! or a shed.
//!
//! 1. Take a fresh fleet view and decide with the budget spent so far.
//! 2. `Shed`: answer 429 (503 when nothing is available) with Retry-After;
//!    when the reason is `unavailable`, first let the runtime try the
//!    route's default model on any pool, so that its own error (e.g. why
//!    CUDA is missing) reaches the client.
//! 3. `Single`: run the target; on an error that another pool or model may
//!    not have (overload, unavailable device, execution failure) try the
//!    fallbacks in order while budget remains. An answer from a fallback
//!    says `fallback`.
//! 4. `Cascade`: see [`super::cascade`].

use super::backend::Backend;
use super::cascade::run_cascade;
use crate::answer::Answer;
use crate::error::GatewayError;
use router_policies::{Budget, Draw, Estimator, Plan, PolicyConfig, Reason, Target};
use std::time::Instant;
use switchyard_runtime::{ErrorClass, InferenceRequest, InferenceResponse, RuntimeError};

/// Everything fixed about one request's routing.
pub struct Routing<'a> {
    /// The route (or model) name the client addressed.
    pub route: &'a str,
    /// The route's models, cheapest first.
    pub models: &'a [String],
    /// The route's policy.
    pub policy: &'a PolicyConfig,
    /// Completion-time estimator settings.
    pub estimator: &'a Estimator,
    /// The resolved budget, nothing spent.
    pub budget: Budget,
    /// When the gateway received the request; the budget counts from here.
    pub received: Instant,
}

impl Routing<'_> {
    /// The budget with the time elapsed since `received` spent.
    pub fn budget_now(&self) -> Budget {
        self.budget.with_spent(self.received.elapsed())
    }

    /// The budget's total in whole milliseconds, for the response headers.
    pub fn budget_ms(&self) -> u64 {
        u64::try_from(self.budget.total.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Decides and executes one request (steps 1-4 above).
pub async fn route<B: Backend>(
    backend: &B,
    routing: &Routing<'_>,
    draw: Draw,
    request: InferenceRequest,
) -> Result<Answer, GatewayError> {
    let fleet = backend.fleet(routing.models);
    let plan = crate::telemetry::spans::decide()
        .in_scope(|| routing.policy.decide(routing.budget_now(), &fleet, routing.estimator, draw));
    match plan {
        Plan::Single { target, fallbacks, reason } => {
            run_targets(backend, routing, &target, &fallbacks, reason, request).await
        }
        Plan::Cascade { cheap, fallbacks, .. } => match routing.policy.as_cascade() {
            Some(policy) => run_cascade(backend, routing, policy, &cheap, &fallbacks, request).await,
            None => run_targets(backend, routing, &cheap, &fallbacks, Reason::Cascade, request).await,
        },
        Plan::Shed { reason: Reason::Unavailable, retry_after } => {
            last_resort(backend, routing, request).await.map_err(|e| match e {
                GatewayError::Runtime(e) if falls_back(&e) => shed(routing, Reason::Unavailable, retry_after),
                other => other,
            })
        }
        Plan::Shed { reason, retry_after } => Err(shed(routing, reason, retry_after)),
    }
}

/// Runs `target`, then each fallback on a retryable error while budget
/// remains. The first target's answer carries `reason`; a fallback's says
/// `fallback`. Every target failing returns the last error.
pub async fn run_targets<B: Backend>(
    backend: &B,
    routing: &Routing<'_>,
    target: &Target,
    fallbacks: &[Target],
    reason: Reason,
    request: InferenceRequest,
) -> Result<Answer, GatewayError> {
    let mut last = None;
    for (i, t) in std::iter::once(target).chain(fallbacks).enumerate() {
        if i > 0 && routing.budget_now().is_exhausted() {
            break;
        }
        match backend.run(&t.model, Some(&t.pool), request.clone()).await {
            Ok(response) => {
                let why = if i == 0 { reason } else { Reason::Fallback };
                return Ok(answer(response, why, routing));
            }
            Err(e) if falls_back(&e) => {
                tracing::debug!(model = %t.model, pool = %t.pool, error = %e, "target failed; trying the next");
                last = Some(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(|| shed(routing, Reason::Unavailable, std::time::Duration::ZERO), Into::into))
}

/// Step 2's last resort: the route's default (last) model on the pool the
/// runtime picks.
async fn last_resort<B: Backend>(
    backend: &B,
    routing: &Routing<'_>,
    request: InferenceRequest,
) -> Result<Answer, GatewayError> {
    let model = routing.models.last().map_or(routing.route, String::as_str);
    let response = backend.run(model, None, request).await?;
    Ok(answer(response, Reason::Fallback, routing))
}

/// True for errors another pool or model may not have: overload,
/// unavailability, execution failures, a failing or slow upstream server.
/// Client errors (bad input, unknown output) would fail the same way
/// anywhere.
pub fn falls_back(e: &RuntimeError) -> bool {
    matches!(
        e.class(),
        ErrorClass::Overloaded
            | ErrorClass::Unavailable
            | ErrorClass::Internal
            | ErrorClass::BadUpstream
            | ErrorClass::TimedOut
    )
}

/// The shed error for this route.
fn shed(routing: &Routing<'_>, reason: Reason, retry_after: std::time::Duration) -> GatewayError {
    GatewayError::Shed { route: routing.route.to_string(), reason: reason.as_str(), retry_after }
}

/// The answer for a runtime response.
pub fn answer(response: InferenceResponse, reason: Reason, routing: &Routing<'_>) -> Answer {
    Answer {
        model: response.model,
        version: response.version,
        device: response.device.to_string(),
        pool: response.pool,
        reason: reason.as_str().to_string(),
        batch_size: response.batch_size,
        outputs: response.outputs,
        budget_ms: routing.budget_ms(),
        degraded: false,
    }
}
