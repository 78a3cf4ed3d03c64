//! The route's policy, chosen in config by `type`.
//!
//! Which to use:
//! - `fixed`: one model; pinning or single-model routes.
//! - `latency_budget`: several models of different accuracy; the budget
//!   decides, and overload is shed.
//! - `cascade`: a cheap and a heavy model and a confidence score; most
//!   requests stop at the cheap one. Needed for draft-then-final streaming.
//! - `weighted`: canary and A/B splits.
//!
//! All of them place the chosen model on a pool by predicted completion
//! ([`choose_pool`](crate::choose_pool)), skip unavailable models and pools,
//! and fill the plan's fallbacks.

mod cascade;
mod fixed;
mod latency_budget;
mod pressure;
mod weighted;

#[cfg(test)]
mod tests;

pub use cascade::CascadePolicy;
pub use fixed::FixedPolicy;
pub use latency_budget::{LatencyBudgetPolicy, DEFAULT_SHED_MARGIN};
pub use weighted::{ModelWeight, WeightedPolicy};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::draw::Draw;
use crate::fleet::FleetView;
use crate::plan::Plan;
use crate::policy_issue::{into_result, PolicyIssue};
use crate::predict::Estimator;

/// A route's `policy` config table, e.g.
/// `policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }`.
/// Unknown types and unknown fields are errors.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum PolicyConfig {
    /// See [`FixedPolicy`].
    Fixed(FixedPolicy),
    /// See [`LatencyBudgetPolicy`].
    LatencyBudget(LatencyBudgetPolicy),
    /// See [`CascadePolicy`].
    Cascade(CascadePolicy),
    /// See [`WeightedPolicy`].
    Weighted(WeightedPolicy),
}

impl PolicyConfig {
    /// The policy's `type`, as a stable metric label.
    pub const fn kind(&self) -> &'static str {
        match self {
            PolicyConfig::Fixed(_) => "fixed",
            PolicyConfig::LatencyBudget(_) => "latency_budget",
            PolicyConfig::Cascade(_) => "cascade",
            PolicyConfig::Weighted(_) => "weighted",
        }
    }

    /// Checks the policy against the route's model names, at start-up and on
    /// reload. Every issue is reported; paths start with `policy`.
    pub fn validate(&self, route_models: &[String]) -> Result<(), Vec<PolicyIssue>> {
        let mut issues = Vec::new();
        if route_models.is_empty() {
            issues.push(PolicyIssue::new("policy", "the route has no models to choose from"));
        }
        match self {
            PolicyConfig::Fixed(policy) => policy.validate(route_models, &mut issues),
            PolicyConfig::LatencyBudget(policy) => policy.validate(&mut issues),
            PolicyConfig::Cascade(policy) => policy.validate(route_models, &mut issues),
            PolicyConfig::Weighted(policy) => policy.validate(route_models, &mut issues),
        }
        into_result(issues)
    }

    /// Decides for one request: dispatches to the policy's own `decide`
    /// (only `weighted` uses `draw`).
    ///
    /// `budget` is the request's budget with time already spent; `fleet` is a
    /// snapshot of the route's models in route order.
    pub fn decide(&self, budget: Budget, fleet: &FleetView, estimator: &Estimator, draw: Draw) -> Plan {
        match self {
            PolicyConfig::Fixed(policy) => policy.decide(budget, fleet, estimator),
            PolicyConfig::LatencyBudget(policy) => policy.decide(budget, fleet, estimator),
            PolicyConfig::Cascade(policy) => policy.decide(budget, fleet, estimator),
            PolicyConfig::Weighted(policy) => policy.decide(budget, fleet, estimator, draw),
        }
    }

    /// The cascade settings, when this is a cascade: the gateway needs them
    /// for `after_cheap` and the confidence output's name.
    pub fn as_cascade(&self) -> Option<&CascadePolicy> {
        match self {
            PolicyConfig::Cascade(policy) => Some(policy),
            _ => None,
        }
    }
}
