//! Running concrete placements: what one request's routing holds fixed
//! ([`Routing`]), one placement with its fallbacks ([`run_placements`]), and the
//! answer or shed error it ends with. Used by plan execution
//! ([`super::run`]) and by the cascade ([`super::cascade`]) alike.

use super::backend::{Backend, BackendResponse};
use crate::error::GatewayError;
use router_policies::{Budget, Estimator, Placement, PolicyConfig, Reason};
use std::time::Instant;
use switchyard_protocol::answer::Answer;
use switchyard_runtime::InferenceRequest;

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

/// Runs `placement`, then each fallback on a retryable error while budget
/// remains. The first placement's answer carries `reason`; a fallback's says
/// `fallback`. Every placement failing returns the last error.
pub async fn run_placements<B: Backend>(
    backend: &B,
    routing: &Routing<'_>,
    placement: &Placement,
    fallbacks: &[Placement],
    reason: Reason,
    request: InferenceRequest,
) -> Result<Answer, GatewayError> {
    let mut last = None;
    // Copied for every attempt but the last, which takes the request: a
    // plan without fallbacks (the common case) never copies it.
    let mut request = Some(request);
    for (i, t) in std::iter::once(placement).chain(fallbacks).enumerate() {
        if i > 0 && routing.budget_now().is_exhausted() {
            break;
        }
        let attempt = if i == fallbacks.len() { request.take() } else { request.clone() };
        let Some(attempt) = attempt else { break };
        match backend.run(&t.model, Some(&t.pool), attempt).await {
            Ok(response) => {
                let why = if i == 0 { reason } else { Reason::Fallback };
                return Ok(answer(response, why, routing));
            }
            Err(e) if e.falls_back() => {
                tracing::debug!(model = %t.model, pool = %t.pool, error = %e, "target failed; trying the next");
                last = Some(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(|| shed(routing, Reason::Unavailable, std::time::Duration::ZERO), Into::into))
}

/// The shed error for this route.
pub fn shed(routing: &Routing<'_>, reason: Reason, retry_after: std::time::Duration) -> GatewayError {
    GatewayError::Shed { route: routing.route.to_string(), reason, retry_after }
}

/// The answer for a backend's response.
pub fn answer(response: BackendResponse, reason: Reason, routing: &Routing<'_>) -> Answer {
    Answer {
        model: response.model,
        version: response.version,
        device: response.device,
        pool: response.pool,
        reason,
        batch_size: response.batch_size,
        outputs: response.outputs,
        budget_ms: routing.budget_ms(),
        degraded: false,
        confidence: None,
    }
}
