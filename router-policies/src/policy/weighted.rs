//! `weighted`: split traffic between models by weight. Use it for canary
//! releases and A/B tests; the split is made with the caller's random draw,
//! so it is reproducible.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::draw::Draw;
use crate::evaluate::{find, next_candidate_or_shed, place_all, single, Placed};
use crate::fleet::FleetView;
use crate::plan::Plan;
use crate::policy_issue::PolicyIssue;
use crate::predict::Estimator;
use crate::reason::Reason;

/// Config: `policy = { type = "weighted", weights = [{ model = "a", weight =
/// 95 }, { model = "b", weight = 5 }] }`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedPolicy {
    /// The models and their shares; at least one.
    pub weights: Vec<ModelWeight>,
}

/// One model's share of a weighted route.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelWeight {
    /// One of the route's models, at most once per policy.
    pub model: String,
    /// Its share, a finite number > 0 in any unit (shares are normalised).
    pub weight: f64,
}

impl WeightedPolicy {
    /// Decides for one request.
    ///
    /// 1. Place every usable model on its best pool for the remaining budget.
    /// 2. Pick an entry with `draw` over all configured weights: the entry
    ///    whose cumulative share contains `draw * total` (entries with a
    ///    weight that is not a positive number count as 0).
    /// 3. If its model is usable, run it: reason `weighted`, or `spill_over`
    ///    when its cheapest pool was too busy. This policy never sheds for
    ///    time.
    /// 4. Otherwise re-pick among the entries whose model is usable, with the
    ///    draw's relative position inside the unusable entry's share (again
    ///    uniform), so traffic is redistributed in proportion to the
    ///    remaining weights: reason `fallback`.
    /// 5. No usable weighted model: the first usable model in route order,
    ///    reason `fallback`; none at all: shed, reason `shed` when every pool
    ///    is full (overload), else `unavailable`.
    ///
    /// Fallbacks: the chosen model's other pools, then the other usable
    /// weighted models by weight (largest first, ties in config order), then
    /// the other usable models in route order.
    pub fn decide(&self, budget: Budget, fleet: &FleetView, estimator: &Estimator, draw: Draw) -> Plan {
        let placed = place_all(fleet, budget.remaining(), estimator);
        let all: Vec<(usize, f64)> = self.weights.iter().enumerate().map(|(i, w)| (i, share(w))).collect();
        let Some((picked, within)) = pick(&all, draw.value()) else {
            return next_candidate_or_shed(&placed, fleet, estimator);
        };
        let placed_entry = |i: usize| self.weights.get(i).and_then(|w| find(&placed, &w.model));
        let usable = |i: usize| placed_entry(i).is_some();
        let (entry, base) = if usable(picked) {
            (Some(picked), Reason::Weighted)
        } else {
            let live: Vec<(usize, f64)> = all.iter().copied().filter(|(i, _)| usable(*i)).collect();
            (pick(&live, within).map(|(i, _)| i), Reason::Fallback)
        };
        let Some(chosen) = entry.and_then(placed_entry) else {
            return next_candidate_or_shed(&placed, fleet, estimator);
        };
        single(chosen, self.fallback_order(&placed), base)
    }

    /// Fallback order: usable weighted models by weight, then the rest of the
    /// fleet in route order.
    fn fallback_order<'p, 'a>(&self, placed: &'p [Placed<'a>]) -> Vec<&'p Placed<'a>> {
        let mut entries: Vec<&ModelWeight> = self.weights.iter().collect();
        entries.sort_by(|a, b| share(b).total_cmp(&share(a)));
        let mut order: Vec<&Placed<'a>> = entries.iter().filter_map(|w| find(placed, &w.model)).collect();
        for p in placed {
            if !order.iter().any(|o| o.index == p.index) {
                order.push(p);
            }
        }
        order
    }

    /// Appends issues: at least one entry; each weight finite and > 0; each
    /// model one of the route's, named once.
    pub(crate) fn validate(&self, route_models: &[String], issues: &mut Vec<PolicyIssue>) {
        if self.weights.is_empty() {
            issues.push(PolicyIssue::new("policy.weights", "must name at least one model"));
        }
        for (i, entry) in self.weights.iter().enumerate() {
            if !(entry.weight.is_finite() && entry.weight > 0.0) {
                issues.push(PolicyIssue::new(
                    format!("policy.weights[{i}].weight"),
                    format!("must be a finite number > 0, got {}", entry.weight),
                ));
            }
            if !route_models.contains(&entry.model) {
                issues.push(PolicyIssue::new(
                    format!("policy.weights[{i}].model"),
                    format!("model {:?} is not one of the route's models {route_models:?}", entry.model),
                ));
            }
            if self.weights[..i].iter().any(|earlier| earlier.model == entry.model) {
                issues.push(PolicyIssue::new(
                    format!("policy.weights[{i}].model"),
                    format!("model {:?} is listed more than once", entry.model),
                ));
            }
        }
        let total: f64 = self.weights.iter().map(share).sum();
        if !total.is_finite() {
            issues.push(PolicyIssue::new("policy.weights", "the weights' sum must be finite"));
        }
    }
}

/// An entry's usable share: its weight when finite and > 0, else 0.
pub(super) fn share(entry: &ModelWeight) -> f64 {
    if entry.weight.is_finite() && entry.weight > 0.0 {
        entry.weight
    } else {
        0.0
    }
}

/// Picks the entry whose cumulative share contains `u * total`, `u` in
/// `[0, 1)`. Returns its position in `entries` order and `u`'s relative
/// position within its share (uniform in `[0, 1)` again). `None` when no
/// entry has a positive share.
fn pick(entries: &[(usize, f64)], u: f64) -> Option<(usize, f64)> {
    let total: f64 = entries.iter().map(|(_, w)| w).sum();
    if !(total.is_finite() && total > 0.0) {
        return None;
    }
    let point = u * total;
    let mut start = 0.0;
    let mut last = None;
    for &(index, weight) in entries.iter().filter(|(_, w)| *w > 0.0) {
        let end = start + weight;
        if point < end {
            return Some((index, ((point - start) / weight).clamp(0.0, 1.0 - f64::EPSILON)));
        }
        last = Some((index, 1.0 - f64::EPSILON));
        start = end;
    }
    // Rounding left `point` past the last boundary: the last entry.
    last
}

#[cfg(test)]
mod tests;
