//! `fixed`: always the same model. Use it for routes with one model, or to
//! pin a route while investigating; the device choice still applies.

use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::config_issue::ConfigIssue;
use crate::evaluate::{find, next_candidate_or_shed, place_all, single};
use crate::fleet::FleetView;
use crate::plan::Plan;
use crate::predict::Estimator;
use crate::reason::Reason;

/// Config: `policy = { type = "fixed", model = "digits-heavy" }`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FixedPolicy {
    /// The model to run; must be one of the route's models.
    pub model: String,
}

impl FixedPolicy {
    /// Decides for one request.
    ///
    /// 1. Place every usable model on its best pool for the remaining budget
    ///    ([`choose_pool`](crate::choose_pool)).
    /// 2. If the configured model is usable, run it on its chosen pool, even
    ///    when no pool fits the budget (this policy never sheds for time).
    ///    Reason `fixed`, or `spill_over` when its cheapest pool was too busy.
    /// 3. Otherwise run the first usable model in route order, reason
    ///    `fallback`.
    /// 4. If no model is usable, shed: reason `shed` when every pool is full
    ///    (overload; Retry-After the shortest drain), else `unavailable`.
    ///
    /// Fallbacks: the chosen model's other pools, then the other usable models
    /// in route order.
    pub fn decide(&self, budget: Budget, fleet: &FleetView, estimator: &Estimator) -> Plan {
        let placed = place_all(fleet, budget.remaining(), estimator);
        match find(&placed, &self.model) {
            Some(chosen) => single(chosen, &placed, Reason::Fixed),
            None => next_candidate_or_shed(&placed, fleet, estimator),
        }
    }

    /// Appends issues: the model must be one of the route's models.
    pub(crate) fn validate(&self, route_models: &[String], issues: &mut Vec<ConfigIssue>) {
        if !route_models.contains(&self.model) {
            issues.push(ConfigIssue::new(
                "policy.model",
                format!("model {:?} is not one of the route's models {route_models:?}", self.model),
            ));
        }
    }
}
