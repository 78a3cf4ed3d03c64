//! Fair share between the tenants of one route while its models are
//! overloaded: the pure policy ([`FairGroup::try_admit`]) and its state
//! (requests computing per tenant). The registry ([`super::Tenants`])
//! keeps one group per route and asks it before a model runs for a
//! request (a cache hit never asks).
//!
//! The capacity `C` of a route is the requests its models can hold
//! (queued or running) less a reserve of a quarter (at least 1): the
//! smallest, over the route's local models, of the sum of their pools'
//! `queue_capacity`, times 3/4. The reserve keeps room in the queues for a
//! tenant that arrives while another holds all of `C`.
//!
//! Algorithm, for a request of tenant `t` with weight `w_t`:
//! 1. The active weight `W` is the sum of the weights of the tenants with
//!    requests computing, plus `w_t` when `t` has none (an idle tenant's
//!    share is lent to the active ones: it is not in `W`).
//! 2. `t`'s share is `max(1, floor(C * w_t / W))`.
//! 3. Below its share, `t` is admitted, even when the route holds `C`
//!    already (the reserve takes it).
//! 4. At or above its share, `t` is admitted only while the route holds
//!    fewer than `C` (spare capacity is lent); else refused (429,
//!    `fair_share`), so it cannot crowd out the others.

use std::collections::HashMap;
use std::sync::Arc;

/// Requests computing per tenant on one route.
#[derive(Debug, Default)]
pub struct FairGroup {
    in_flight: HashMap<Arc<str>, u32>,
    total: u32,
}

/// Why [`FairGroup::try_admit`] refused: the tenant's share then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverShare {
    /// The tenant's share of the capacity (requests computing).
    pub share: u32,
}

/// The capacity of a route from its models' pools' queue capacities (one
/// sum per model): the smallest sum, less a reserve of a quarter (at least
/// 1), at least 1. `None` without a local model.
pub fn capacity(per_model: impl IntoIterator<Item = usize>) -> Option<u32> {
    let smallest = per_model.into_iter().min()?;
    let smallest = u32::try_from(smallest).unwrap_or(u32::MAX);
    let reserve = (smallest / 4).max(1);
    Some(smallest.saturating_sub(reserve).max(1))
}

impl FairGroup {
    /// Admits one request of `tenant` (steps in the module docs); `weight`
    /// gives each tenant's weight (at least 1).
    pub fn try_admit(
        &mut self,
        tenant: &Arc<str>,
        capacity: u32,
        weight: impl Fn(&str) -> u32,
    ) -> Result<(), OverShare> {
        let mine = self.in_flight.get(tenant).copied().unwrap_or(0);
        let others: u64 = self
            .in_flight
            .iter()
            .filter(|(t, n)| **n > 0 && *t != tenant)
            .map(|(t, _)| u64::from(weight(t)))
            .sum();
        let own = u64::from(weight(tenant).max(1));
        let share = (u64::from(capacity) * own / (others + own)).max(1);
        let share = u32::try_from(share).unwrap_or(u32::MAX);
        if mine >= share && self.total >= capacity {
            return Err(OverShare { share });
        }
        *self.in_flight.entry(tenant.clone()).or_default() += 1;
        self.total += 1;
        Ok(())
    }

    /// Ends one request of `tenant` admitted by [`FairGroup::try_admit`].
    pub fn release(&mut self, tenant: &str) {
        if let Some(n) = self.in_flight.get_mut(tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.in_flight.remove(tenant);
            }
            self.total = self.total.saturating_sub(1);
        }
    }

    /// Requests computing for `tenant`.
    #[cfg(test)]
    pub fn in_flight(&self, tenant: &str) -> u32 {
        self.in_flight.get(tenant).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    fn even(_: &str) -> u32 {
        1
    }

    #[test]
    fn capacity_keeps_a_quarter_in_reserve() {
        assert_eq!(capacity([8, 16]), Some(6));
        assert_eq!(capacity([1024]), Some(768));
        assert_eq!(capacity([2]), Some(1));
        assert_eq!(capacity([1]), Some(1));
        assert_eq!(capacity(Vec::<usize>::new()), None);
    }

    #[test]
    fn a_lone_tenant_borrows_the_whole_capacity_then_is_refused() {
        let mut g = FairGroup::default();
        let a = t("a");
        for _ in 0..6 {
            assert_eq!(g.try_admit(&a, 6, even), Ok(()));
        }
        assert_eq!(g.try_admit(&a, 6, even), Err(OverShare { share: 6 }));
        g.release("a");
        assert_eq!(g.try_admit(&a, 6, even), Ok(()), "a place came back");
    }

    #[test]
    fn a_light_tenant_gets_in_while_a_flooding_one_is_held_to_its_share() {
        let mut g = FairGroup::default();
        let (a, b) = (t("a"), t("b"));
        for _ in 0..6 {
            g.try_admit(&a, 6, even).unwrap();
        }
        assert_eq!(g.try_admit(&b, 6, even), Ok(()), "b is below its share: the reserve takes it");
        assert_eq!(g.try_admit(&a, 6, even), Err(OverShare { share: 3 }), "two active tenants: 6/2 each");
        for _ in 0..4 {
            g.release("a");
        }
        assert_eq!(g.in_flight("a"), 2);
        assert_eq!(g.try_admit(&a, 6, even), Ok(()), "below its share again");
        assert_eq!(g.try_admit(&a, 6, even), Ok(()), "at its share, but the route has room: lent");
        assert_eq!(g.try_admit(&a, 6, even), Ok(()), "5 of 6: still room");
        assert_eq!(g.in_flight("a"), 5);
        assert!(g.try_admit(&a, 6, even).is_err(), "the route holds 6 of 6 and a is over its share of 3");
    }

    #[test]
    fn weights_divide_the_capacity() {
        let mut g = FairGroup::default();
        let (a, b) = (t("a"), t("b"));
        let weight = |name: &str| if name == "a" { 3 } else { 1 };
        g.try_admit(&b, 8, weight).unwrap();
        for _ in 0..7 {
            g.try_admit(&a, 8, weight).unwrap();
        }
        assert_eq!(g.try_admit(&a, 8, weight), Err(OverShare { share: 6 }), "8 * 3/4");
        assert_eq!(g.try_admit(&b, 8, weight), Ok(()), "b holds 1 of its 2");
        assert_eq!(g.try_admit(&b, 8, weight), Err(OverShare { share: 2 }));
    }

    #[test]
    fn an_idle_tenant_counts_for_nothing() {
        let mut g = FairGroup::default();
        let (a, b) = (t("a"), t("b"));
        g.try_admit(&b, 4, even).unwrap();
        g.release("b");
        for _ in 0..4 {
            assert_eq!(g.try_admit(&a, 4, even), Ok(()), "b has nothing computing: its share is lent");
        }
        g.release("nobody");
        assert_eq!(g.in_flight("a"), 4);
    }
}
