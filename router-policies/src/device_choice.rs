//! Choosing among one model's pools (GPU, CPU, upstream) by predicted
//! completion time and cost. Every policy places its chosen model with
//! [`choose_pool`].

use std::cmp::Ordering;
use std::time::Duration;

use crate::fleet::{CandidateModel, PoolView};
use crate::plan::Placement;
use crate::predict::{Estimator, Prediction};

/// How the chosen pool relates to the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolFit {
    /// The cheapest pool that fits the budget (the usual case).
    Fits,
    /// A costlier pool that fits, because the pool that would serve an idle
    /// fleet (the cheapest) fits on execution time alone but its queue would
    /// miss the budget, or is full.
    SpillOver,
    /// A pool that fits, because the pool that would serve an idle fleet
    /// (the cheapest of all configured pools) is unavailable, e.g. CUDA
    /// configured but missing.
    Fallback,
    /// No pool fits; the fastest one.
    Late,
    /// Every pool of the model that could take the request is paused
    /// ([`crate::PoolView::paused`]): the request would wait until an
    /// operator resumes it. Policies use such a model only when no other
    /// model can serve (see `evaluate::place_all`), and it never fits.
    Paused,
}

/// The pool chosen for one model, and the model's other usable pools.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolChoice {
    /// Where to run.
    pub placement: Placement,
    /// The prediction behind `placement`.
    pub prediction: Prediction,
    /// Whether and how it fits.
    pub fit: PoolFit,
    /// The model's other admissible pools, best first (fallbacks).
    pub alternatives: Vec<Placement>,
}

impl PoolChoice {
    /// True unless no pool fits the budget.
    pub fn fits(&self) -> bool {
        !matches!(self.fit, PoolFit::Late | PoolFit::Paused)
    }

    /// True when the chosen pool is paused (fit [`PoolFit::Paused`]).
    pub fn is_paused(&self) -> bool {
        self.fit == PoolFit::Paused
    }
}

/// A pool with its prediction and configured position.
struct Scored<'a> {
    index: usize,
    pool: &'a PoolView,
    prediction: Prediction,
}

/// Chooses the pool of `model` to serve a request with `remaining` budget.
///
/// 1. An unavailable model, or one without an admissible pool (available and
///    queue not full), gives `None`.
/// 2. Predict completion on every available pool with `estimator`.
/// 3. Rank the admissible pools: those that fit (`completion <=
///    remaining x (1 - safety_margin)`)
///    first, by relative cost, then completion, then configured order; then
///    those that miss, by completion, then relative cost, then configured
///    order. Ties are thus broken by the pool's position in the config.
///    Paused pools come after all of these.
/// 4. The first is chosen; the rest become `alternatives` (paused pools
///    only when the chosen pool is paused too).
/// 5. Fit: [`PoolFit::Paused`] when the chosen pool is paused (a
///    paused pool never fits and ranks after every other pool, so it is
///    chosen only when every admissible pool is paused);
///    [`PoolFit::Late`] when it misses; [`PoolFit::Fallback`]
///    when it fits and the cheapest configured pool (lowest cost, then
///    position) is unavailable; [`PoolFit::SpillOver`] when it fits but is
///    not the *idle choice* (the available pool with the lowest cost, then
///    execution time, then position) and the idle choice would fit on
///    execution time alone but is full or its queue makes it miss; else
///    [`PoolFit::Fits`].
pub fn choose_pool(model: &CandidateModel, remaining: Duration, estimator: &Estimator) -> Option<PoolChoice> {
    if !model.available {
        return None;
    }
    let scored: Vec<Scored<'_>> = model
        .pools
        .iter()
        .enumerate()
        .filter(|(_, pool)| pool.available)
        .map(|(index, pool)| Scored { index, pool, prediction: estimator.predict(pool) })
        .collect();
    let usable = estimator.usable(remaining);
    let fits = |s: &Scored<'_>| s.prediction.completion() <= usable;
    let mut ranked: Vec<&Scored<'_>> = scored.iter().filter(|s| !s.pool.is_full()).collect();
    ranked.sort_by(|a, b| rank(a, b, fits(a), fits(b)));
    let (chosen, rest) = ranked.split_first()?;

    let idle = scored.iter().min_by(|a, b| {
        a.pool
            .relative_cost
            .total_cmp(&b.pool.relative_cost)
            .then(a.prediction.execution.cmp(&b.prediction.execution))
            .then(a.index.cmp(&b.index))
    });
    let preferred = model
        .pools
        .iter()
        .enumerate()
        .min_by(|(ia, a), (ib, b)| a.relative_cost.total_cmp(&b.relative_cost).then(ia.cmp(ib)));
    let fit = match idle {
        _ if chosen.pool.paused => PoolFit::Paused,
        _ if !fits(chosen) => PoolFit::Late,
        _ if preferred.is_some_and(|(_, p)| !p.available) => PoolFit::Fallback,
        Some(idle)
            if idle.index != chosen.index
                && idle.prediction.execution <= remaining
                && (idle.pool.is_full() || !fits(idle)) =>
        {
            PoolFit::SpillOver
        }
        _ => PoolFit::Fits,
    };
    Some(PoolChoice {
        placement: placement(model, chosen),
        prediction: chosen.prediction,
        fit,
        // A paused pool is no fallback for a pool that serves.
        alternatives: rest
            .iter()
            .filter(|s| chosen.pool.paused || !s.pool.paused)
            .map(|s| placement(model, s))
            .collect(),
    })
}

/// Step 3's order; paused pools last.
fn rank(a: &Scored<'_>, b: &Scored<'_>, a_fits: bool, b_fits: bool) -> Ordering {
    if a.pool.paused != b.pool.paused {
        return a.pool.paused.cmp(&b.pool.paused);
    }
    let by_cost = a.pool.relative_cost.total_cmp(&b.pool.relative_cost);
    let by_time = a.prediction.completion().cmp(&b.prediction.completion());
    let order = match (a_fits, b_fits) {
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (true, true) => by_cost.then(by_time),
        (false, false) => by_time.then(by_cost),
    };
    order.then(a.index.cmp(&b.index))
}

/// The placement naming `model` on the scored pool.
fn placement(model: &CandidateModel, scored: &Scored<'_>) -> Placement {
    Placement {
        model: model.name.clone(),
        pool: scored.pool.name.clone(),
        device: scored.pool.device,
        predicted: scored.prediction.completion(),
        basis: scored.prediction.basis,
    }
}

#[cfg(test)]
mod tests;
