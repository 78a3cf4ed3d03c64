//! Switchyard's routing policies: pure, synchronous decisions about which
//! model and which device pool serve a request.
//!
//! Per request, the gateway:
//! 1. resolves the budget with [`RouteBudget::resolve`] (400 on a bad
//!    header or `timeout` parameter);
//! 2. builds a [`FleetView`] snapshot of the route's models and pools from the
//!    runtime's statistics;
//! 3. calls [`PolicyConfig::decide`] with the budget (time spent so far
//!    included), the snapshot, the shared [`Estimator`] and a random
//!    [`Draw`], and executes the [`Plan`]: one [`Placement`], a cascade, or a
//!    shed with Retry-After; on failure it tries the plan's fallbacks;
//! 4. for a cascade, calls [`CascadePolicy::after_cheap`] with the cheap
//!    model's confidence;
//! 5. reports [`Reason::as_str`] in `x-switchyard-reason` and metrics;
//! 6. asks [`PolicyConfig::is_degraded`] whether the final answer is one the
//!    policy gives only under pressure (then it is not cached).
//!
//! Nothing here blocks, allocates much, or knows about tokio, HTTP, ONNX
//! Runtime or Redis; everything can be unit-tested and simulated.

#![deny(missing_docs)]

mod budget;
mod device_choice;
mod draw;
mod evaluate;
mod fleet;
mod plan;
mod policy;
mod policy_issue;
mod predict;
mod reason;
mod route_budget;

#[cfg(test)]
mod test_util;

pub use budget::Budget;
pub use device_choice::{choose_pool, PoolChoice, PoolFit};
pub use draw::Draw;
pub use fleet::{CandidateModel, Device, FleetView, LatencyBucket, LatencyModel, PoolView};
pub use plan::{CascadeStep, Placement, Plan, MAX_FALLBACKS, MAX_RETRY_AFTER, MIN_RETRY_AFTER};
pub use policy::{
    CascadePolicy, FixedPolicy, LatencyBudgetPolicy, ModelWeight, PolicyConfig, WeightedPolicy,
    DEFAULT_SHED_MARGIN,
};
pub use policy_issue::PolicyIssue;
pub use predict::{EstimateBasis, Estimator, Prediction};
pub use reason::Reason;
pub use route_budget::{BudgetError, BudgetSource, ResolvedBudget, RouteBudget, BUDGET_HEADER};
