//! `fixed`: always the same model. Use it for routes with one model, or to
//! pin a route while investigating; the device choice still applies.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::evaluate::{find, next_candidate_or_shed, place_all, single};
use crate::fleet::FleetView;
use crate::plan::Plan;
use crate::policy_issue::PolicyIssue;
use crate::predict::Estimator;
use crate::reason::Reason;

/// Config: `policy = { type = "fixed", model = "digits-heavy" }`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema, Serialize)]
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
    pub(crate) fn validate(&self, route_models: &[String], issues: &mut Vec<PolicyIssue>) {
        if !route_models.contains(&self.model) {
            issues.push(PolicyIssue::new(
                "policy.model",
                format!("model {:?} is not one of the route's models {route_models:?}", self.model),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_util::*;
    use crate::{Budget, FixedPolicy, Plan, Reason, MIN_RETRY_AFTER};

    fn fixed(name: &str) -> FixedPolicy {
        FixedPolicy { model: name.to_string() }
    }

    #[test]
    fn runs_the_configured_model_on_its_best_pool() {
        let plan = fixed("heavy").decide(budget_ms(50), &two_models(), &estimator());
        let Plan::Single { placement, fallbacks, reason } = plan else { panic!("{plan:?}") };
        assert_eq!(
            (placement.model.as_ref(), placement.pool.as_ref(), reason),
            ("heavy", "gpu", Reason::Fixed)
        );
        assert_eq!(names(&fallbacks), ["heavy/cpu", "cheap/gpu", "cheap/cpu"]);
    }

    #[test]
    fn device_choice_still_applies() {
        let mut f = two_models();
        pool_mut(&mut f, "heavy", "gpu").queue_depth = 64; // 8 rounds * 10 ms
        let plan = fixed("heavy").decide(budget_ms(50), &f, &estimator());
        assert_eq!(plan.reason(), Reason::SpillOver);
        assert_eq!(&*plan.primary().unwrap().pool, "cpu");
    }

    #[test]
    fn never_sheds_for_time_even_when_the_budget_is_spent() {
        let spent = Budget::new(ms(20)).with_spent(ms(30));
        let plan = fixed("heavy").decide(spent, &two_models(), &estimator());
        let placement = plan.primary().unwrap();
        assert_eq!((placement.model.as_ref(), placement.pool.as_ref()), ("heavy", "gpu"));
        assert_eq!(plan.reason(), Reason::Fixed);
    }

    #[test]
    fn unavailable_model_falls_back_to_the_next_candidate() {
        let mut f = two_models();
        model_mut(&mut f, "heavy").available = false;
        let plan = fixed("heavy").decide(budget_ms(50), &f, &estimator());
        assert_eq!(plan.reason(), Reason::Fallback);
        assert_eq!(&*plan.primary().unwrap().model, "cheap");
        assert_eq!(names(plan.fallbacks()), ["cheap/cpu"]);
        // A model missing from the snapshot is treated the same way.
        let plan = fixed("gone").decide(budget_ms(50), &two_models(), &estimator());
        assert_eq!((plan.reason(), plan.primary().unwrap().model.as_ref()), (Reason::Fallback, "cheap"));
    }

    #[test]
    fn all_unavailable_sheds() {
        let mut f = two_models();
        f.candidates.iter_mut().for_each(|c| c.available = false);
        let plan = fixed("heavy").decide(budget_ms(50), &f, &estimator());
        assert_eq!(plan, Plan::Shed { retry_after: MIN_RETRY_AFTER, reason: Reason::Unavailable });
        assert!(plan.fallbacks().is_empty());
        assert!(plan.primary().is_none());
        let empty = fleet(vec![]);
        assert_eq!(fixed("heavy").decide(budget_ms(50), &empty, &estimator()).reason(), Reason::Unavailable);
    }
}
