//! `cascade`: answer with the cheap model, and run the heavy one only when
//! the cheap answer is not confident and there is time left. Use it when most
//! inputs are easy and a confidence score (e.g. the top softmax probability)
//! tells the hard ones apart; it also drives draft-then-final streaming.
//!
//! The gateway calls [`CascadePolicy::decide`] first, runs the cheap placement,
//! reads the confidence from `confidence_output`, then calls
//! [`CascadePolicy::after_cheap`] with the budget left.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::device_choice::choose_pool;
use crate::evaluate::{fallbacks, find, next_candidate_or_shed, place_all, place_every, single, Placed};
use crate::fleet::{CandidateModel, FleetView};
use crate::plan::{CascadeStep, Plan};
use crate::policy_issue::PolicyIssue;
use crate::predict::Estimator;
use crate::reason::Reason;

/// Config: `policy = { type = "cascade", confidence_output = "probabilities",
/// threshold = 0.8 }`, optionally with `cheap = "..."` and `heavy = "..."`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CascadePolicy {
    /// The cheap model's output holding its confidence; the gateway reads
    /// it (policies never see tensors).
    pub confidence_output: String,
    /// Confidence in `[0, 1]` at or above which the cheap answer is final.
    pub threshold: f32,
    /// The cheap model. Default: the route model with the lowest
    /// `relative_cost` (ties: lower quality rank, then route order).
    #[serde(default)]
    pub cheap: Option<String>,
    /// The heavy model. Default: the other route model with the highest
    /// `quality_rank` (ties: lower cost, then route order).
    #[serde(default)]
    pub heavy: Option<String>,
}

impl CascadePolicy {
    /// Plans one request.
    ///
    /// 1. Resolve the cheap and heavy models (configured names, or the
    ///    defaults documented on the fields, chosen among all candidates
    ///    whether available or not).
    /// 2. Place every usable model on its best pool for the remaining budget
    ///    (a model whose pools are all paused counts only when no other
    ///    model is usable; the heavy model counts even then).
    /// 3. Both usable: a cascade plan, reason `cascade`; the cheap model is
    ///    placed with the whole remaining budget, the heavy placement is as
    ///    predicted now. Fallbacks: the cheap model's other pools, then the
    ///    heavy model's pools, then the other usable models in route order.
    /// 4. Only one usable: run it alone, reason `fallback`.
    /// 5. Neither: the first usable model in route order, reason `fallback`;
    ///    none at all: shed, reason `shed` when every pool is full (overload),
    ///    else `unavailable`.
    pub fn decide(&self, budget: Budget, fleet: &FleetView, estimator: &Estimator) -> Plan {
        let placed = place_all(fleet, budget.remaining(), estimator);
        let every = place_every(fleet, budget.remaining(), estimator);
        let (cheap, heavy) = self.resolve(fleet);
        let cheap = cheap.and_then(|m| find(&placed, &m.name));
        // Beside a usable cheap model, a paused heavy one still makes a
        // cascade: the cheap answer comes first, and `after_cheap` does
        // not escalate to a pool that does not fit (a stream may wait).
        let heavy = heavy.and_then(|m| find(if cheap.is_some() { &every } else { &placed }, &m.name));
        match (cheap, heavy) {
            (Some(cheap), Some(heavy)) => {
                let order: Vec<&Placed<'_>> =
                    std::iter::once(heavy).chain(placed.iter().filter(|p| p.index != heavy.index)).collect();
                Plan::Cascade {
                    cheap: cheap.choice.placement.clone(),
                    heavy: heavy.choice.placement.clone(),
                    threshold: self.threshold,
                    fallbacks: fallbacks(cheap, order),
                    reason: Reason::Cascade,
                }
            }
            (Some(only), None) | (None, Some(only)) => single(only, &placed, Reason::Fallback),
            (None, None) => next_candidate_or_shed(&placed, fleet, estimator),
        }
    }

    /// Decides whether to run the heavy model once the cheap one answered
    /// with `confidence`, given the budget now (time spent included).
    ///
    /// 1. `confidence >= threshold`: accept, reason `cascade_confident`. A NaN
    ///    confidence is never confident.
    /// 2. Resolve the heavy model as in [`CascadePolicy::decide`] and place it
    ///    on its best pool for the remaining budget; no usable pool: accept
    ///    the cheap answer, reason `cascade_unavailable`.
    /// 3. Its prediction fits the remaining budget: escalate to that pool,
    ///    reason `cascade_escalate`.
    /// 4. Otherwise (a paused heavy pool never fits) accept the cheap
    ///    answer, reason `cascade_no_budget`.
    pub fn after_cheap(
        &self,
        confidence: f32,
        budget: Budget,
        fleet: &FleetView,
        estimator: &Estimator,
    ) -> CascadeStep {
        if confidence >= self.threshold {
            return CascadeStep::Accept(Reason::CascadeConfident);
        }
        let heavy = self.resolve(fleet).1.and_then(|m| choose_pool(m, budget.remaining(), estimator));
        match heavy {
            None => CascadeStep::AcceptUnconfident(Reason::CascadeUnavailable),
            Some(choice) if choice.fits() => CascadeStep::Escalate(choice.placement, Reason::CascadeEscalate),
            Some(_) => CascadeStep::AcceptUnconfident(Reason::CascadeNoBudget),
        }
    }

    /// Step 1 of [`CascadePolicy::decide`]: the cheap and heavy candidates,
    /// if present in the fleet.
    pub(super) fn resolve<'a>(
        &self,
        fleet: &'a FleetView,
    ) -> (Option<&'a CandidateModel>, Option<&'a CandidateModel>) {
        let cheap = match &self.cheap {
            Some(name) => fleet.find(name),
            None => fleet.candidates.iter().enumerate().min_by(|(ia, a), (ib, b)| {
                a.relative_cost
                    .total_cmp(&b.relative_cost)
                    .then(a.quality_rank.cmp(&b.quality_rank))
                    .then(ia.cmp(ib))
            }),
        };
        let heavy = match &self.heavy {
            Some(name) => fleet.find(name),
            None => {
                let cheap_index = cheap.map(|(i, _)| i);
                fleet.candidates.iter().enumerate().filter(|(i, _)| Some(*i) != cheap_index).min_by(
                    |(ia, a), (ib, b)| {
                        b.quality_rank
                            .cmp(&a.quality_rank)
                            .then(a.relative_cost.total_cmp(&b.relative_cost))
                            .then(ia.cmp(ib))
                    },
                )
            }
        };
        (cheap.map(|(_, m)| m), heavy.map(|(_, m)| m))
    }

    /// Appends issues: threshold in `[0, 1]`; output named; the route has
    /// two models; `cheap`/`heavy` are route models and differ.
    pub(crate) fn validate(&self, route_models: &[String], issues: &mut Vec<PolicyIssue>) {
        if !(0.0..=1.0).contains(&self.threshold) {
            issues.push(PolicyIssue::new(
                "policy.threshold",
                format!("must be between 0 and 1, got {}", self.threshold),
            ));
        }
        if self.confidence_output.trim().is_empty() {
            issues.push(PolicyIssue::new("policy.confidence_output", "must name the cheap model's output"));
        }
        if route_models.len() < 2 {
            issues.push(PolicyIssue::new("policy", "a cascade needs a route with at least two models"));
        }
        for (field, name) in [("cheap", &self.cheap), ("heavy", &self.heavy)] {
            if let Some(name) = name.as_ref().filter(|n| !route_models.contains(n)) {
                issues.push(PolicyIssue::new(
                    format!("policy.{field}"),
                    format!("model {name:?} is not one of the route's models {route_models:?}"),
                ));
            }
        }
        if self.cheap.is_some() && self.cheap == self.heavy {
            issues.push(PolicyIssue::new("policy.heavy", "must differ from policy.cheap"));
        }
    }
}

#[cfg(test)]
mod tests;
