//! `latency_budget`: the most accurate answer that arrives in time. Use it
//! for routes with models of different accuracy and speed where the budget,
//! not a confidence score, should decide.

use schemars::JsonSchema;
use std::cmp::Ordering;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::evaluate::{place_all, shed_unusable, single, Placed};
use crate::fleet::FleetView;
use crate::plan::{shed, Plan};
use crate::policy_issue::PolicyIssue;
use crate::predict::Estimator;
use crate::reason::Reason;

/// Default [`LatencyBudgetPolicy::shed_margin`].
pub const DEFAULT_SHED_MARGIN: f64 = 0.5;

/// Config: `policy = { type = "latency_budget", shed_margin = 0.5 }`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyBudgetPolicy {
    /// How far the fastest option may miss the remaining budget before the
    /// request is shed, as a fraction of it: 0.5 sheds when the fastest
    /// prediction exceeds 150% of the remaining budget. `inf` never sheds
    /// for time. Must be >= 0. Default 0.5.
    #[serde(default = "default_shed_margin")]
    pub shed_margin: f64,
}

fn default_shed_margin() -> f64 {
    DEFAULT_SHED_MARGIN
}

impl Default for LatencyBudgetPolicy {
    fn default() -> Self {
        LatencyBudgetPolicy { shed_margin: DEFAULT_SHED_MARGIN }
    }
}

impl LatencyBudgetPolicy {
    /// Decides for one request.
    ///
    /// 1. Place every usable model on its best pool for the remaining budget
    ///    ([`choose_pool`](crate::choose_pool): the cheapest pool that fits,
    ///    else the fastest). No usable model: shed, reason `shed` when the
    ///    pools are all full (Retry-After: the shortest drain), else
    ///    `unavailable`.
    /// 2. Order the models: those whose placement fits first, by quality rank
    ///    (highest first), then model cost, then predicted completion, then
    ///    route order; then those that miss, by predicted completion, then
    ///    quality (highest first), then model cost, then route order.
    /// 3. If the first fits, run it: reason `budget_fit`, or `spill_over`
    ///    when its cheapest pool was too busy.
    /// 4. Otherwise the first is the fastest option. Shed when the budget is
    ///    already spent (reason `budget_exhausted`) or when its prediction
    ///    exceeds `remaining * (1 + shed_margin)` (reason `shed`); an infinite
    ///    margin never sheds. Retry-After is that option's queue wait: the
    ///    time until its backlog has drained (the minimum for a paused
    ///    pool, whose resume time is unknown).
    /// 5. Else run it, reason `budget_fastest`.
    ///
    /// Fallbacks: the chosen model's other pools, then the other models in
    /// the order of step 2.
    pub fn decide(&self, budget: Budget, fleet: &FleetView, estimator: &Estimator) -> Plan {
        let remaining = budget.remaining();
        let mut placed = place_all(fleet, remaining, estimator);
        placed.sort_by(preference);
        let Some(first) = placed.first() else {
            return shed_unusable(fleet, estimator);
        };
        if first.choice.fits() {
            return single(first, &placed, Reason::BudgetFit);
        }
        let never_shed = self.shed_margin.is_infinite() && self.shed_margin > 0.0;
        // A paused pool's resume time is unknown: the shortest hint.
        let drain =
            if first.choice.is_paused() { Duration::ZERO } else { first.choice.prediction.queue_wait };
        if !never_shed && budget.is_exhausted() {
            return shed(drain, Reason::BudgetExhausted);
        }
        let margin = if self.shed_margin.is_nan() { 0.0 } else { self.shed_margin.max(0.0) };
        let allowed = remaining.as_secs_f64() * (1.0 + margin);
        if !never_shed && first.choice.placement.predicted.as_secs_f64() > allowed {
            return shed(drain, Reason::Shed);
        }
        single(first, &placed, Reason::BudgetFastest)
    }

    /// Appends issues: `shed_margin` must be a number >= 0.
    pub(crate) fn validate(&self, issues: &mut Vec<PolicyIssue>) {
        if self.shed_margin.is_nan() || self.shed_margin < 0.0 {
            issues.push(PolicyIssue::new(
                "policy.shed_margin",
                format!("must be >= 0 (inf never sheds), got {}", self.shed_margin),
            ));
        }
    }
}

/// Step 2's order.
fn preference(a: &Placed<'_>, b: &Placed<'_>) -> Ordering {
    let by_quality = b.model.quality_rank.cmp(&a.model.quality_rank);
    let by_cost = a.model.relative_cost.total_cmp(&b.model.relative_cost);
    let by_time = a.choice.placement.predicted.cmp(&b.choice.placement.predicted);
    let order = match (a.choice.fits(), b.choice.fits()) {
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (true, true) => by_quality.then(by_cost).then(by_time),
        (false, false) => by_time.then(by_quality).then(by_cost),
    };
    order.then(a.index.cmp(&b.index))
}

#[cfg(test)]
mod tests;
