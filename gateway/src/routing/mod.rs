//! Decide and execute: which model, on which pool, answers an inference
//! request. [`execute`] is the one seam between the V2 handler (which
//! decodes and encodes) and everything that chooses and runs models; the
//! cache wraps it.
//!
//! Per request: the handler resolves the budget ([`budget`]) before the
//! cache is consulted; then build the fleet view ([`fleet`]), let the
//! route's policy (`router-policies`) decide, execute the plan with
//! fallbacks ([`run`], [`targets`], [`cascade`]), mark a degraded answer ([`judge`]),
//! and count the decision ([`decisions`]).

pub mod backend;
pub mod budget;
pub mod budget_misses;
pub mod calibration;
pub mod cascade;
pub mod confidence;
pub mod decisions;
pub mod fleet;
pub mod mixed_backend;
pub mod run;
pub mod targets;

#[cfg(test)]
mod tests_run;

use crate::error::GatewayError;
use crate::snapshot::Snapshot;
use crate::target::Target;
use crate::upstream::Upstreams;
use backend::Backend;
use decisions::DecisionCounters;
pub use mixed_backend::MixedBackend;
use router_policies::{Budget, Estimator, FixedPolicy, FleetView, PolicyConfig};
use std::borrow::Cow;
use std::time::Instant;
use targets::Routing;

/// Share of a request's remaining budget the placement keeps in reserve:
/// a pool is used only when its predicted completion leaves 30% of the
/// budget spare, which absorbs the error of the latency estimates (pools
/// sharing cores slow each other down between two statistics updates).
pub const SAFETY_MARGIN: f64 = 0.3;
use switchyard_runtime::InferenceRequest;

/// What the handler hands to [`execute`]: a request validated completely
/// (its budget too), so that nothing [`execute`] fails with is specific
/// to this request's headers.
pub struct RouteRequest<'a> {
    /// The route or model the client addressed.
    pub target: &'a Target,
    /// Inputs and requested outputs, checked against the signature.
    pub request: InferenceRequest,
    /// The request's budget, resolved by the handler ([`budget::resolve`]).
    pub budget: Budget,
    /// When the gateway received the request; budgets count from here.
    pub received: Instant,
}

pub use crate::answer::Answer;

/// What routing reads and counts for one request: the config and models
/// of its snapshot, the running upstreams, and the decision counters.
#[derive(Clone, Copy)]
pub struct RoutingContext<'a> {
    /// The request's config generation and its models.
    pub snap: &'a Snapshot,
    /// Upstream servers and their models.
    pub upstreams: &'a Upstreams,
    /// Where decisions are counted (admin stats, metrics).
    pub decisions: &'a DecisionCounters,
    /// Calibrated routes' shadow runs and curves ([`calibration`]).
    pub calibration: &'a std::sync::Arc<calibration::Calibration>,
}

/// Chooses a model and pool for the request with the route's policy and
/// runs it; counts the decision in `ctx.decisions`.
///
/// A model addressed directly (not through a route) runs under a `fixed`
/// policy on itself, with the direct-model budget defaults.
pub async fn execute(ctx: RoutingContext<'_>, req: RouteRequest<'_>) -> Result<Answer, GatewayError> {
    let RoutingContext { snap, upstreams, decisions: counters, calibration } = ctx;
    let config = &snap.config;
    let route = req.target.route(config);
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
        budget: req.budget,
        received: req.received,
    };
    let backend = MixedBackend::new(snap, upstreams, req.received + req.budget.total);
    // Calibration shadows a call after it is answered, on its own copy of
    // the inputs (shared buffers), so the answer never waits for it.
    let calibrated = route.and_then(|r| Some((r.calibrate?, r.policy.as_cascade()?)));
    let shadow_inputs = calibrated.map(|_| req.request.inputs.clone());
    let mut outcome = run::route(&backend, &routing, crate::draw::next_draw(), req.request).await;
    if let (Some((settings, cascade)), Some(inputs)) = (calibrated, shadow_inputs) {
        calibration.maybe_shadow(&settings, cascade, routing.models, &snap.repo, routing.route, &inputs);
    }
    if let Ok(answer) = &mut outcome {
        judge(answer, &policy, || backend.fleet(routing.models));
    }
    counters.record_outcome(routing.route, outcome.as_ref());
    outcome
}

/// Sets [`Answer::degraded`]: whether `policy` gives another model's answer
/// without pressure ([`PolicyConfig::is_degraded`]). Call once on the
/// final answer, after every step that may have rewritten its reason.
/// `fleet` builds the route's fleet view, only for policies that read it.
pub fn judge(answer: &mut Answer, policy: &PolicyConfig, fleet: impl FnOnce() -> FleetView) {
    let view = if policy.judges_by_fleet() { fleet() } else { FleetView::default() };
    answer.degraded = policy.is_degraded(&view, &answer.model, answer.reason);
}
