//! Decide and execute: which model, on which pool, answers an inference
//! request. [`execute`] is the one seam between the V2 handler (which
//! decodes and encodes) and everything that chooses and runs models; the
//! cache wraps it.
//!
//! Per request: resolve the budget ([`budget`]), build the fleet view
//! ([`fleet`]), let the route's policy (`router-policies`) decide, execute
//! the plan with fallbacks ([`run`], [`cascade`]), and count the decision
//! ([`decisions`]).

pub mod backend;
pub mod budget;
pub mod cascade;
pub mod confidence;
pub mod decisions;
pub mod draw;
pub mod fleet;
pub mod run;

#[cfg(test)]
mod tests_run;

use crate::error::GatewayError;
use crate::handlers::target::Target;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::upstream::MixedBackend;
use http::HeaderMap;
use router_policies::{Estimator, FixedPolicy, PolicyConfig};
use run::Routing;
use std::borrow::Cow;
use std::time::Instant;

/// Share of a request's remaining budget the placement keeps in reserve:
/// a pool is used only when its predicted completion leaves 30% of the
/// budget spare, which absorbs the error of the latency estimates (pools
/// sharing cores slow each other down between two statistics updates).
pub const SAFETY_MARGIN: f64 = 0.3;
use switchyard_runtime::{InferenceRequest, Tensor};

/// What the handler hands to [`execute`].
pub struct RouteRequest<'a> {
    /// The route or model the client addressed.
    pub target: &'a Target,
    /// Inputs and requested outputs, checked against the signature.
    pub request: InferenceRequest,
    /// Request headers (budget, cache control).
    pub headers: &'a HeaderMap,
    /// The V2 request-level `parameters` (e.g. `timeout`).
    pub parameters: &'a serde_json::Map<String, serde_json::Value>,
    /// When the gateway received the request; budgets count from here.
    pub received: Instant,
}

/// The final answer to an inference request, and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The model that produced the outputs.
    pub model: String,
    /// Its version.
    pub version: u64,
    /// The device of the pool that ran it (`cpu`, `cuda`).
    pub device: String,
    /// The pool that ran it.
    pub pool: String,
    /// Why this model and pool were chosen (a low-cardinality label,
    /// `router_policies::Reason::as_str`).
    pub reason: String,
    /// Rows in the batch that executed it.
    pub batch_size: usize,
    /// The requested outputs, in order.
    pub outputs: Vec<(String, Tensor)>,
    /// The request's latency budget in ms (route default or the client's
    /// ask, clamped to the route maximum).
    pub budget_ms: u64,
}

/// Chooses a model and pool for the request with the route's policy and
/// runs it; counts the decision in `state.decisions`.
///
/// A model addressed directly (not through a route) runs under a `fixed`
/// policy on itself, with the direct-model budget defaults.
pub async fn execute(
    state: &AppState,
    snap: &Snapshot,
    req: RouteRequest<'_>,
) -> Result<Answer, GatewayError> {
    let config = &snap.config;
    let route = req.target.is_route.then(|| config.route(&req.target.public_name)).flatten();
    let resolved = budget::resolve(budget::route_budget(route), req.headers, req.parameters)?;
    let policy = match route {
        Some(r) => Cow::Borrowed(&r.policy),
        None => {
            Cow::Owned(PolicyConfig::Fixed(FixedPolicy { model: req.target.default_model().to_string() }))
        }
    };
    let estimator = Estimator { safety_margin: SAFETY_MARGIN, ..Estimator::default() };
    let routing = Routing {
        route: &req.target.public_name,
        models: &req.target.models,
        policy: &policy,
        estimator: &estimator,
        budget: resolved.budget,
        received: req.received,
    };
    let backend = MixedBackend::new(state, snap, req.received + resolved.budget.total);
    let outcome = run::route(&backend, &routing, draw::next_draw(), req.request).await;
    match &outcome {
        Ok(a) => state.decisions.record(routing.route, &a.model, &a.device, &a.reason),
        Err(GatewayError::Shed { reason, .. }) => {
            state.decisions.record(routing.route, decisions::NONE, decisions::NONE, reason)
        }
        Err(_) => {}
    }
    outcome
}
