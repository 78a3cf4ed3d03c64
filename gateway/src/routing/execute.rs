//! [`execute`]: the one place an inference call's routing decision is made
//! and counted, for plain calls, SSE streams and gRPC streams alike.
//!
//! 1. Resolve the call into an [`Execution`], the typed target this stage
//!    hands to the next: the policy (the route's; `fixed` on a model
//!    addressed directly; the route's cheap/heavy pair for a
//!    draft-then-final call), the deadline of its backend calls, the pair's
//!    settings and the route's calibration.
//! 2. Run it ([`Execution::run`]): the policy's plan with its fallbacks
//!    ([`super::run`]), or the pair, draft then final ([`super::draft`]).
//!    A call the route's canary drew (a candidate with `serve = true`,
//!    [`super::rollout::canary`]) is answered by the candidate instead
//!    (reason `canary`), or by the route as usual when the candidate fails.
//! 3. Shadow the call for calibration when the route calibrates
//!    ([`super::calibration`]), after it is answered, off the response path;
//!    count it for the route's candidate (and mirror it, or compare a
//!    canary answer with the live model) ([`super::rollout`]).
//! 4. Mark a degraded answer ([`judge`]).
//! 5. Count the decision ([`super::decisions`]) and the outcome for the
//!    request's priority class ([`crate::metrics::classes`]).

use super::backend::Backend;
use super::calibration::{Calibration, ShadowModels};
use super::decisions::DecisionCounters;
use super::draft::{draft_then_final, DraftSink, Finished, PairRun};
use super::mixed_backend::MixedBackend;
use super::placements::Routing;
use super::rollout::canary::CanaryOutcome;
use super::rollout::{CallOutcome, Rollouts};
use super::run::route;
use crate::config::calibrate_section::CalibrateConfig;
use crate::config::candidate_section::CandidateConfig;
use crate::config::draft_section::DraftConfig;
use crate::config::RouteConfig;
use crate::error::GatewayError;
use crate::metrics::classes::{ClassOutcome, CLASSES};
use crate::snapshot::Snapshot;
use crate::target::Target;
use crate::upstream::Upstreams;
use router_policies::{Budget, CascadePolicy, Estimator, FixedPolicy, FleetView, PolicyConfig, Reason};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;
use switchyard_protocol::answer::Answer;
use switchyard_runtime::InferenceRequest;

/// Share of a request's remaining budget the placement keeps in reserve:
/// a pool is used only when its predicted completion leaves 30% of the
/// budget spare, which absorbs the error of the latency estimates (pools
/// sharing cores slow each other down between two statistics updates).
pub const SAFETY_MARGIN: f64 = 0.3;

/// What the handler hands to [`execute`]: a request validated completely
/// (its budget too), so that nothing [`execute`] fails with is specific
/// to this request's headers.
pub struct RouteRequest<'a> {
    /// The route or model the client addressed.
    pub target: &'a Target,
    /// Inputs and requested outputs, checked against the signature.
    pub request: InferenceRequest,
    /// The request's budget, resolved by the handler ([`super::budget::resolve`]).
    pub budget: Budget,
    /// When the gateway received the request; budgets count from here.
    pub received: Instant,
    /// The route's sticky draw for this client ([`super::sticky`]);
    /// `None`: a fresh random draw.
    pub draw: Option<router_policies::Draw>,
    /// The request's priority class ([`super::priority::resolve`]): its
    /// place in a pool's queue, with its deadline.
    pub class: u8,
}

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
    /// Calibrated routes' shadow runs and curves ([`super::calibration`]).
    pub calibration: &'a Arc<Calibration>,
    /// Routes' candidates: mirrored calls and comparisons ([`super::rollout`]).
    pub rollouts: &'a Arc<Rollouts>,
}

/// How [`execute`] answers a call.
#[derive(Clone, Copy)]
pub enum Strategy<'a> {
    /// One answer from the route's policy (a plain call).
    Single,
    /// A streamed call: on a route with a cheap/heavy pair (its `draft`
    /// settings), the cheap answer goes to `on_draft` as soon as it is
    /// ready and the final follows ([`super::draft`]); any other target
    /// answers as [`Strategy::Single`].
    DraftThenFinal {
        /// Takes each draft (the cheap answer and its confidence).
        on_draft: DraftSink<'a>,
    },
}

/// Chooses a model and pool for the request with the route's policy (or
/// its pair, per `strategy`) and runs it; shadows a calibrated route's
/// call and counts the decision in `ctx.decisions` (module docs).
///
/// A model addressed directly (not through a route) runs under a `fixed`
/// policy on itself, with the direct-model budget defaults.
pub async fn execute(
    ctx: RoutingContext<'_>,
    req: RouteRequest<'_>,
    strategy: Strategy<'_>,
) -> Result<Finished, GatewayError> {
    let RoutingContext { snap, upstreams, decisions, calibration, rollouts } = ctx;
    let req_class = req.class;
    let mut execution = Execution::of(req.target.route(&snap.config), &req, strategy);
    execution.config = Some(&snap.config);
    let backend = MixedBackend::new(snap, upstreams, execution.deadline, req_class);
    let observers = Observers { decisions, calibration, rollouts, models: &snap.repo };
    CLASSES.admitted(req_class);
    let result = execution.run(&backend, &observers, req.request).await;
    CLASSES.finished(
        req_class,
        ClassOutcome::of_status(result.as_ref().map_or_else(GatewayError::status, |_| 200)),
    );
    result
}

/// Where one call is counted and shadowed: the decision counters, the
/// calibration and the models its shadow runs ask.
pub(super) struct Observers<'a, M> {
    pub(super) decisions: &'a DecisionCounters,
    pub(super) calibration: &'a Arc<Calibration>,
    pub(super) rollouts: &'a Arc<Rollouts>,
    pub(super) models: &'a Arc<M>,
}

/// One call's routing, resolved before anything runs (step 1).
pub(super) struct Execution<'a> {
    target: &'a Target,
    policy: Cow<'a, PolicyConfig>,
    budget: Budget,
    received: Instant,
    /// When the backend's calls end: arrival plus the budget, or plus the
    /// route's maximum budget for a draft-then-final call (the client
    /// asked to wait for the final; upstream calls still end).
    pub(super) deadline: Instant,
    draft: Option<Draft<'a>>,
    draw: Option<router_policies::Draw>,
    calibrate: Option<(&'a CalibrateConfig, &'a CascadePolicy)>,
    /// The route's candidate in force.
    candidate: Option<&'a CandidateConfig>,
    /// Set when the route's canary drew this call: the candidate answers it.
    canary: Option<Canary>,
    /// The snapshot's config: which answers ran in this process, which
    /// models are text models, what they cost. `None` (unit tests): every
    /// model is local, none is text, costs by position.
    pub(super) config: Option<&'a crate::config::Config>,
}

/// A call the route's candidate answers (a canary): the candidate alone,
/// `fixed` on it, as a promoted route would run it.
struct Canary {
    models: Vec<String>,
    policy: PolicyConfig,
}

/// A draft-then-final call's pair, its settings and where drafts go.
struct Draft<'a> {
    pair: &'a CascadePolicy,
    settings: &'a DraftConfig,
    on_draft: DraftSink<'a>,
}

impl<'a> Execution<'a> {
    /// Resolves `req` to `route` (`None`: a model addressed directly)
    /// under `strategy`.
    pub(super) fn of(
        route: Option<&'a RouteConfig>,
        req: &RouteRequest<'a>,
        strategy: Strategy<'a>,
    ) -> Execution<'a> {
        let draft = match strategy {
            Strategy::Single => None,
            Strategy::DraftThenFinal { on_draft } => {
                route.and_then(|r| Some(Draft { pair: r.draft.pair.as_ref()?, settings: &r.draft, on_draft }))
            }
        };
        let policy = match (&draft, route) {
            (Some(draft), _) => Cow::Owned(PolicyConfig::Cascade(draft.pair.clone())),
            (None, Some(r)) => Cow::Borrowed(&r.policy),
            (None, None) => {
                Cow::Owned(PolicyConfig::Fixed(FixedPolicy { model: req.target.default_model().to_string() }))
            }
        };
        let wait = match (&draft, route) {
            (Some(_), Some(r)) => r.max_budget,
            _ => req.budget.total,
        };
        let candidate = route.and_then(|r| r.candidate.as_ref());
        let canary = candidate
            .filter(|c| c.serve && super::sticky::canary_draw(req.draw).value() < c.share())
            .map(|c| Canary {
                models: vec![c.model.clone()],
                policy: PolicyConfig::Fixed(FixedPolicy { model: c.model.clone() }),
            });
        Execution {
            target: req.target,
            policy,
            budget: req.budget,
            received: req.received,
            deadline: req.received + wait,
            draft,
            draw: req.draw,
            calibrate: route.and_then(|r| Some((r.calibrate.as_ref()?, r.policy.as_cascade()?))),
            candidate,
            canary,
            config: None,
        }
    }

    /// Steps 2-5 on `backend`: runs the call, shadows it, judges and
    /// counts its outcome.
    pub(super) async fn run<B: Backend, M: ShadowModels>(
        &self,
        backend: &B,
        observers: &Observers<'_, M>,
        request: InferenceRequest,
    ) -> Result<Finished, GatewayError> {
        let estimator = Estimator { safety_margin: SAFETY_MARGIN, ..Estimator::default() };
        let routing = Routing {
            route: &self.target.public_name,
            models: &self.target.models,
            policy: &self.policy,
            estimator: &estimator,
            budget: self.budget,
            received: self.received,
        };
        // The shadow gets its own copy of the inputs (shared buffers).
        let shadow_inputs = self.calibrate.map(|_| request.inputs.clone());
        let mirror_inputs = self.candidate.map(|_| request.inputs.clone());
        let (mut outcome, live_latency) = match (&self.canary, self.candidate) {
            (Some(canary), Some(candidate)) => {
                let fallback = request.clone();
                let started = Instant::now();
                let served = self.run_canary(backend, &estimator, canary, request).await;
                let inputs = mirror_inputs.as_deref().unwrap_or_default();
                self.observe_canary(observers, candidate, served.as_ref().ok(), started.elapsed(), inputs);
                match served {
                    Ok(answer) => (Ok(Finished::single(answer)), None),
                    Err(e) => {
                        tracing::debug!(route = %routing.route, error = %e, "canary call failed; the route answers");
                        let started = Instant::now();
                        (self.run_live(backend, &routing, fallback).await, Some(started.elapsed()))
                    }
                }
            }
            _ => {
                // Only a mirrored candidate reads the live call's latency.
                let started = self.candidate.map(|_| Instant::now());
                let outcome = self.run_live(backend, &routing, request).await;
                (outcome, Some(started.map_or(std::time::Duration::ZERO, |s| s.elapsed())))
            }
        };
        // Steps 3 and 4 for calls the live models answered.
        if let Some(live_latency) = live_latency {
            if let (Some((settings, cascade)), Some(inputs)) = (self.calibrate, shadow_inputs) {
                let models = observers.models;
                observers.calibration.maybe_shadow(
                    settings,
                    cascade,
                    routing.models,
                    models,
                    routing.route,
                    &inputs,
                );
            }
            if let (Some(candidate), Some(inputs)) = (self.candidate, mirror_inputs) {
                let answer = outcome.as_ref().ok().map(|f| &f.answer);
                self.mirror(observers, routing.models, (candidate, &inputs), answer, live_latency);
            }
        }
        if let Ok(finished) = &mut outcome {
            let policy = match (&self.canary, live_latency) {
                (Some(canary), None) => &canary.policy,
                _ => self.policy.as_ref(),
            };
            judge(&mut finished.answer, policy, || backend.fleet(routing.models));
        }
        observers.decisions.record_outcome(routing.route, outcome.as_ref().map(|f| &f.answer));
        outcome
    }

    /// Step 2 for a call the live models answer: the policy's plan, or the
    /// pair's draft then final.
    async fn run_live<B: Backend>(
        &self,
        backend: &B,
        routing: &Routing<'_>,
        request: InferenceRequest,
    ) -> Result<Finished, GatewayError> {
        match &self.draft {
            Some(draft) => {
                let run = PairRun {
                    routing,
                    pair: draft.pair,
                    mode: draft.settings.mode,
                    parallel_queue_limit: draft.settings.parallel_queue_limit,
                };
                draft_then_final(backend, &run, request, draft.on_draft).await
            }
            None => {
                route(backend, routing, self.draw.unwrap_or_else(crate::random_draws::next_draw), request)
                    .await
                    .map(Finished::single)
            }
        }
    }

    /// Step 2 for a canary's call: the candidate alone answers it (a
    /// streamed call gets no draft), marked [`Reason::Canary`].
    async fn run_canary<B: Backend>(
        &self,
        backend: &B,
        estimator: &Estimator,
        canary: &Canary,
        request: InferenceRequest,
    ) -> Result<Answer, GatewayError> {
        let routing = Routing {
            route: &self.target.public_name,
            models: &canary.models,
            policy: &canary.policy,
            estimator,
            budget: self.budget,
            received: self.received,
        };
        let mut answer = route(backend, &routing, crate::random_draws::next_draw(), request).await?;
        answer.reason = Reason::Canary;
        Ok(answer)
    }
}

impl Execution<'_> {
    /// Step 4: counts the call for the route's candidate and mirrors it
    /// when drawn ([`super::rollout`]).
    fn mirror<M: ShadowModels>(
        &self,
        observers: &Observers<'_, M>,
        models: &[String],
        (candidate, inputs): (&CandidateConfig, &[(String, switchyard_runtime::Tensor)]),
        answer: Option<&Answer>,
        live_latency: std::time::Duration,
    ) {
        let spec = |model: &str| self.config.and_then(|c| c.models.iter().find(|m| m.name == model));
        let live = answer.map(|a| a.model.as_str()).unwrap_or_default();
        let (live_cost, candidate_cost) = match (self.config, answer) {
            (Some(config), Some(a)) => {
                super::rollout::cost::pair_cost(config, models, (&a.model, a.reason), &candidate.model)
            }
            _ => (1.0, 1.0),
        };
        let call = CallOutcome {
            route: &self.target.public_name,
            candidate,
            answer: answer.map(|a| (a.model.as_str(), a.outputs.as_slice())),
            text: spec(live).is_some_and(|m| m.text.is_some()),
            live_local: self.config.is_none() || spec(live).is_some(),
            live_latency,
            costs: (live_cost, candidate_cost),
            inputs,
        };
        observers.rollouts.after_call(call, observers.models);
    }

    /// Step 4 for a canary's call: counts the candidate's answer (or
    /// failure) and compares it with the live model in the background.
    fn observe_canary<M: ShadowModels>(
        &self,
        observers: &Observers<'_, M>,
        candidate: &CandidateConfig,
        answer: Option<&Answer>,
        latency: std::time::Duration,
        inputs: &[(String, switchyard_runtime::Tensor)],
    ) {
        let model = candidate.model.as_str();
        let (text, cost) = match self.config {
            Some(config) => (
                config.models.iter().any(|m| m.name == model && m.text.is_some()),
                super::rollout::cost::pair_cost(config, &self.target.models, (model, Reason::Canary), model)
                    .1,
            ),
            None => (false, 1.0),
        };
        let call = CanaryOutcome {
            route: &self.target.public_name,
            candidate,
            answer: answer.map(|a| a.outputs.as_slice()),
            text,
            latency,
            cost,
            live_models: &self.target.models,
            inputs,
        };
        observers.rollouts.after_canary(call, observers.models);
    }
}

/// Sets [`Answer::degraded`]: whether `policy` gives another model's answer
/// without pressure ([`PolicyConfig::is_degraded`]). Call once on the
/// final answer, after every step that may have rewritten its reason.
/// `fleet` builds the route's fleet view, only for policies that read it.
pub fn judge(answer: &mut Answer, policy: &PolicyConfig, fleet: impl FnOnce() -> FleetView) {
    let view = if policy.judges_by_fleet() { fleet() } else { FleetView::default() };
    answer.degraded = policy.is_degraded(&view, &answer.model, answer.reason);
}

#[cfg(test)]
mod tests;
