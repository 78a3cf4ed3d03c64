//! Degraded answers: answers a policy gave because of pressure (a tight
//! budget, a busy or unavailable model) that differ in *what* was answered
//! from its answer without pressure, not only in how fast.
//!
//! A budget must choose how fast, not what: an answer the cheap model gave
//! because the heavy one would have missed a tight budget, or because it was
//! down, must not be handed to later requests (a response cache) or to
//! requests that asked under less pressure. The gateway asks
//! [`PolicyConfig::is_degraded`] for every final answer.
//!
//! "Without pressure" means every model available, idle, and every budget
//! large enough. The pool or device that ran a model does not matter (the
//! same model answers the same on any pool): spill-overs and pool fallbacks
//! that keep the model are not degraded. Per policy:
//! - `fixed`: any model but the configured one.
//! - `latency_budget`: any model but the most accurate: the highest
//!   `quality_rank`, then the lowest `relative_cost` (models tied on both
//!   are equally good answers).
//! - `cascade`: a cheap answer accepted although it was not confident
//!   (`cascade_no_budget`, `cascade_unavailable`), and any answer from a
//!   model other than the heavy one that was not a confident cheap answer
//!   (e.g. the cheap model alone as a `fallback`, since its confidence was
//!   never checked). The heavy model's answer is never degraded: it is the
//!   cascade's reference answer.
//! - `weighted`: a model outside the weighted entries (with a positive
//!   weight). Any weighted model's answer is one the split gives without
//!   pressure.

use super::{CascadePolicy, FixedPolicy, LatencyBudgetPolicy, PolicyConfig, WeightedPolicy};
use crate::fleet::FleetView;
use crate::reason::Reason;

impl PolicyConfig {
    /// True when [`Self::is_degraded`] reads its `fleet` argument: `fixed`
    /// and `weighted` judge by the model's name alone, so a caller that
    /// builds the fleet view for the question (on every request) may skip
    /// it for them and pass an empty view.
    pub fn judges_by_fleet(&self) -> bool {
        matches!(self, PolicyConfig::LatencyBudget(_) | PolicyConfig::Cascade(_))
    }

    /// True when an answer from `model`, reached for `reason`, is one this
    /// policy would not give without pressure (the rules are in the module
    /// docs). `fleet` is the route's models in route order; only their
    /// names, quality ranks and costs are read, so any recent snapshot
    /// will do.
    ///
    /// The gateway does not cache degraded answers and shares them only
    /// with identical in-flight requests whose budget is no larger.
    pub fn is_degraded(&self, fleet: &FleetView, model: &str, reason: Reason) -> bool {
        match self {
            PolicyConfig::Fixed(policy) => policy.is_degraded(model),
            PolicyConfig::LatencyBudget(policy) => policy.is_degraded(fleet, model),
            PolicyConfig::Cascade(policy) => policy.is_degraded(fleet, model, reason),
            PolicyConfig::Weighted(policy) => policy.is_degraded(model),
        }
    }
}

impl FixedPolicy {
    fn is_degraded(&self, model: &str) -> bool {
        model != self.model
    }
}

impl LatencyBudgetPolicy {
    fn is_degraded(&self, fleet: &FleetView, model: &str) -> bool {
        let best = fleet.candidates.iter().map(|c| c.quality_rank).max();
        let cheapest_best = fleet
            .candidates
            .iter()
            .filter(|c| Some(c.quality_rank) == best)
            .map(|c| c.relative_cost)
            .min_by(f64::total_cmp);
        let Some((_, answered)) = fleet.find(model) else { return true };
        Some(answered.quality_rank) != best
            || cheapest_best.is_some_and(|cost| answered.relative_cost.total_cmp(&cost).is_gt())
    }
}

impl CascadePolicy {
    fn is_degraded(&self, fleet: &FleetView, model: &str, reason: Reason) -> bool {
        match reason {
            Reason::CascadeNoBudget | Reason::CascadeUnavailable => true,
            Reason::CascadeConfident => false,
            _ => self.resolve(fleet).1.is_none_or(|heavy| &*heavy.name != model),
        }
    }
}

impl WeightedPolicy {
    fn is_degraded(&self, model: &str) -> bool {
        !self.weights.iter().any(|w| w.model == model && super::weighted::share(w) > 0.0)
    }
}

#[cfg(test)]
mod tests;
