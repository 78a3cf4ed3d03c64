//! A request's latency budget: how long it may take in total, and how much of
//! that is already gone.
//!
//! The gateway resolves the total once per request (see
//! [`RouteBudget::resolve`](crate::RouteBudget::resolve)), then records time
//! spent (parsing, cache lookup, the cheap model of a cascade) with
//! [`Budget::spend`] before each decision. A budget already spent is a legal
//! input: policies see a zero [`Budget::remaining`] and act on it.

use std::time::Duration;

/// The latency budget of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The whole budget, from the route default or the request.
    pub total: Duration,
    /// Time already used by this request (may exceed `total`).
    pub spent: Duration,
}

impl Budget {
    /// A fresh budget of `total` with nothing spent yet.
    pub const fn new(total: Duration) -> Self {
        Budget { total, spent: Duration::ZERO }
    }

    /// The same budget with `spent` replaced, e.g. by the request's elapsed
    /// time measured from its arrival.
    pub const fn with_spent(self, spent: Duration) -> Self {
        Budget { total: self.total, spent }
    }

    /// The same budget with `more` added to the time spent (saturating).
    pub fn spend(self, more: Duration) -> Self {
        Budget { total: self.total, spent: self.spent.saturating_add(more) }
    }

    /// Time left; zero when the budget is spent or overspent.
    pub fn remaining(&self) -> Duration {
        self.total.saturating_sub(self.spent)
    }

    /// True when nothing is left (`spent >= total`).
    pub fn is_exhausted(&self) -> bool {
        self.remaining().is_zero()
    }
}

#[cfg(test)]
mod tests {
    use crate::test_util::{budget_ms, ms};
    use crate::Budget;
    use std::time::Duration;

    #[test]
    fn remaining_saturates_when_overspent() {
        let budget = budget_ms(20).spend(ms(5));
        assert_eq!(budget.remaining(), ms(15));
        assert!(!budget.is_exhausted());
        let spent = budget.with_spent(ms(25));
        assert_eq!(spent.remaining(), Duration::ZERO);
        assert!(spent.is_exhausted());
        assert_eq!(Budget::new(ms(1)).spend(Duration::MAX).remaining(), Duration::ZERO);
    }
}
