//! Per-route budget adherence: how many answered inference calls a route
//! had and how many of them took longer than their latency budget (from
//! arrival to the answer being ready, before it is written). The console
//! and `/admin/stats` show them beside the routing decisions; the scrape
//! exports them as `switchyard_route_answers_total` and
//! `switchyard_route_budget_misses_total`.
//!
//! Counted once per non-streamed call that got an answer (cache hits
//! included); errors and streams are not, so the ratio reads as "share of
//! answers that came late".

use parking_lot::Mutex;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// One route's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BudgetCounts {
    /// Answers given.
    pub answered: u64,
    /// Answers ready after their budget had run out.
    pub missed: u64,
}

/// The counters of every route that answered (names come from the config
/// in force, so the set is bounded).
#[derive(Debug, Default)]
pub struct BudgetMisses {
    routes: Mutex<BTreeMap<String, BudgetCounts>>,
}

impl BudgetMisses {
    /// Counts one answer of `route` that took `took` under `budget`.
    pub fn record(&self, route: &str, took: Duration, budget: Duration) {
        let mut routes = self.routes.lock();
        let counts = match routes.get_mut(route) {
            Some(c) => c,
            None => routes.entry(route.to_string()).or_default(),
        };
        counts.answered += 1;
        counts.missed += u64::from(took > budget);
    }

    /// Every route's counts, by route name (a copy).
    pub fn snapshot(&self) -> BTreeMap<String, BudgetCounts> {
        self.routes.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_answers_and_late_ones_per_route() {
        let misses = BudgetMisses::default();
        let ms = Duration::from_millis;
        misses.record("a", ms(5), ms(10));
        misses.record("a", ms(11), ms(10));
        misses.record("b", ms(10), ms(10));
        let snap = misses.snapshot();
        assert_eq!(snap["a"], BudgetCounts { answered: 2, missed: 1 });
        assert_eq!(snap["b"], BudgetCounts { answered: 1, missed: 0 });
    }
}
