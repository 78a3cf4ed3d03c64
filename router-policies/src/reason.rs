//! Why a plan was chosen: a small, closed vocabulary.
//!
//! The gateway puts [`Reason::as_str`] into the `x-switchyard-reason` response
//! header and into a metric label, so the set is low-cardinality and its
//! strings are stable: renaming one is a breaking change for dashboards.

use std::fmt;

use serde::Serialize;

/// Why a policy produced its plan (or a cascade step).
///
/// When several apply, a plan reports the most informative one, in this
/// order: [`Reason::Fallback`] (the preferred model could not be used) over
/// [`Reason::SpillOver`] (the preferred pool of the model was too busy) over
/// the policy's own reason (`fixed`, `budget_fit`, `weighted`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// `fixed`: the route's one configured model.
    Fixed,
    /// `budget_fit`: the most accurate model whose prediction fits the budget.
    BudgetFit,
    /// `budget_fastest`: nothing fits the budget; the fastest option, which
    /// misses it by less than the shed margin.
    BudgetFastest,
    /// `spill_over`: the model's cheapest pool would have fitted when idle,
    /// but its queue would miss the budget (or is full), so the request went
    /// to a costlier pool that fits.
    SpillOver,
    /// `cascade`: run the cheap model, maybe escalate to the heavy one.
    Cascade,
    /// `cascade_escalate`: the cheap answer was not confident and the heavy
    /// model's prediction fits the remaining budget.
    CascadeEscalate,
    /// `cascade_confident`: the cheap answer reached the confidence threshold.
    CascadeConfident,
    /// `cascade_no_budget`: the cheap answer was not confident, but the heavy
    /// model cannot finish inside the remaining budget.
    CascadeNoBudget,
    /// `cascade_unavailable`: the cheap answer was not confident, but the heavy
    /// model has no usable pool.
    CascadeUnavailable,
    /// `weighted`: the model drawn by the route's traffic weights.
    Weighted,
    /// `canary`: a rollout's candidate answered the call, as its share of
    /// the route's traffic (a candidate with `serve = true`); the gateway
    /// sets it, no policy returns it. Never cached.
    Canary,
    /// `fallback`: the model the policy preferred was unavailable (or absent
    /// from the fleet), so the next usable candidate was chosen; or the
    /// model's preferred (cheapest) pool is unavailable, e.g. CUDA missing,
    /// so another pool serves. The gateway also reports it when the planned
    /// placement failed and a fallback placement answered.
    Fallback,
    /// `shed`: overload. Even the fastest option misses the budget by more
    /// than the configured margin, or every usable pool's queue is full;
    /// answer 503 with Retry-After.
    Shed,
    /// `budget_exhausted`: the request's budget was already spent before the
    /// decision; answer 503 (or 504) with Retry-After.
    BudgetExhausted,
    /// `unavailable`: no candidate model has a usable pool.
    Unavailable,
}

impl Reason {
    /// Every reason, so that the gateway can pre-register metric series.
    pub const ALL: [Reason; 15] = [
        Reason::Fixed,
        Reason::BudgetFit,
        Reason::BudgetFastest,
        Reason::SpillOver,
        Reason::Cascade,
        Reason::CascadeEscalate,
        Reason::CascadeConfident,
        Reason::CascadeNoBudget,
        Reason::CascadeUnavailable,
        Reason::Weighted,
        Reason::Canary,
        Reason::Fallback,
        Reason::Shed,
        Reason::BudgetExhausted,
        Reason::Unavailable,
    ];

    /// The reason whose label ([`Reason::as_str`]) is `label`, if any: for
    /// answers that carry their reason as text (e.g. from a cache).
    pub fn from_label(label: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == label)
    }

    /// The stable snake_case label for headers, metrics and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Fixed => "fixed",
            Reason::BudgetFit => "budget_fit",
            Reason::BudgetFastest => "budget_fastest",
            Reason::SpillOver => "spill_over",
            Reason::Cascade => "cascade",
            Reason::CascadeEscalate => "cascade_escalate",
            Reason::CascadeConfident => "cascade_confident",
            Reason::CascadeNoBudget => "cascade_no_budget",
            Reason::CascadeUnavailable => "cascade_unavailable",
            Reason::Weighted => "weighted",
            Reason::Canary => "canary",
            Reason::Fallback => "fallback",
            Reason::Shed => "shed",
            Reason::BudgetExhausted => "budget_exhausted",
            Reason::Unavailable => "unavailable",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
