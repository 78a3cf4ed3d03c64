//! Shared steps of every policy: place each usable model on its best pool,
//! and turn a chosen model plus an order of the others into a plan with
//! fallbacks.

use std::time::Duration;

use crate::device_choice::{choose_pool, PoolChoice, PoolFit};
use crate::fleet::{CandidateModel, FleetView};
use crate::plan::{Placement, Plan, MAX_FALLBACKS};
use crate::predict::Estimator;
use crate::reason::Reason;

/// A usable model placed on its best pool.
#[derive(Clone, Debug)]
pub(crate) struct Placed<'a> {
    /// Position in the fleet (the route's model order).
    pub index: usize,
    /// The model.
    pub model: &'a CandidateModel,
    /// Its chosen pool and alternatives.
    pub choice: PoolChoice,
}

/// Every usable model of `fleet` (available, with an admissible pool),
/// placed for `remaining`, in fleet order. A model placed on a paused pool
/// ([`PoolFit::Paused`]) counts as usable only when no model is placed
/// on a pool that serves: requests spill over to the other models as they
/// would for a full pool, and wait on a paused pool (within their budget)
/// only when there is nowhere else to go.
pub(crate) fn place_all<'a>(
    fleet: &'a FleetView,
    remaining: Duration,
    estimator: &Estimator,
) -> Vec<Placed<'a>> {
    let mut placed = place_every(fleet, remaining, estimator);
    if placed.iter().any(|p| !p.choice.is_paused()) {
        placed.retain(|p| !p.choice.is_paused());
    }
    placed
}

/// Like [`place_all`], but keeps models placed on paused pools.
pub(crate) fn place_every<'a>(
    fleet: &'a FleetView,
    remaining: Duration,
    estimator: &Estimator,
) -> Vec<Placed<'a>> {
    fleet
        .candidates
        .iter()
        .enumerate()
        .filter_map(|(index, model)| {
            choose_pool(model, remaining, estimator).map(|choice| Placed { index, model, choice })
        })
        .collect()
}

/// The placed model named `name`, if usable.
pub(crate) fn find<'p, 'a>(placed: &'p [Placed<'a>], name: &str) -> Option<&'p Placed<'a>> {
    placed.iter().find(|p| &*p.model.name == name)
}

/// The reason a single-placement plan reports, by precedence: `fallback` over
/// `spill_over` over the policy's own `base`.
pub(crate) fn placed_reason(base: Reason, fit: PoolFit) -> Reason {
    match (base, fit) {
        (Reason::Fallback, _) | (_, PoolFit::Fallback) => Reason::Fallback,
        (_, PoolFit::SpillOver) => Reason::SpillOver,
        (base, _) => base,
    }
}

/// Fallbacks: `chosen`'s alternatives, then each model of `others` (in the
/// given order, skipping `chosen`) with its pool and alternatives; capped at
/// [`MAX_FALLBACKS`].
pub(crate) fn fallbacks<'p, 'a: 'p>(
    chosen: &Placed<'a>,
    others: impl IntoIterator<Item = &'p Placed<'a>>,
) -> Vec<Placement> {
    let mut list = chosen.choice.alternatives.clone();
    for other in others.into_iter().filter(|o| o.index != chosen.index) {
        if list.len() >= MAX_FALLBACKS {
            break;
        }
        list.push(other.choice.placement.clone());
        list.extend(other.choice.alternatives.iter().cloned());
    }
    list.truncate(MAX_FALLBACKS);
    list
}

/// A single-placement plan for `chosen` with fallbacks from `others` and the
/// reason from [`placed_reason`].
pub(crate) fn single<'p, 'a: 'p>(
    chosen: &Placed<'a>,
    others: impl IntoIterator<Item = &'p Placed<'a>>,
    base: Reason,
) -> Plan {
    Plan::Single {
        placement: chosen.choice.placement.clone(),
        fallbacks: fallbacks(chosen, others),
        reason: placed_reason(base, chosen.choice.fit),
    }
}

/// The first usable model in fleet order as a `fallback` plan, or
/// [`shed_unusable`] when there is none.
pub(crate) fn next_candidate_or_shed(
    placed: &[Placed<'_>],
    fleet: &FleetView,
    estimator: &Estimator,
) -> Plan {
    match placed.first() {
        Some(first) => single(first, placed, Reason::Fallback),
        None => shed_unusable(fleet, estimator),
    }
}

/// The shed plan when no model is usable: reason `shed` when some available
/// model has available pools that are all full (overload; Retry-After is the
/// shortest time for one of those queues to drain), else `unavailable`
/// (Retry-After the minimum).
pub(crate) fn shed_unusable(fleet: &FleetView, estimator: &Estimator) -> Plan {
    let shortest_drain = fleet
        .candidates
        .iter()
        .filter(|c| c.available)
        .flat_map(|c| c.pools.iter())
        .filter(|p| p.available && p.is_full())
        .map(|p| estimator.predict(p).queue_wait)
        .min();
    match shortest_drain {
        Some(drain) => crate::plan::shed(drain, Reason::Shed),
        None => crate::plan::shed(Duration::ZERO, Reason::Unavailable),
    }
}
