//! Choosing an address: power of two choices over peak-EWMA costs.
//!
//! 1. Candidates: the upstream's [`eligible`] addresses (health checks
//!    pass, breaker closed or due for a probe) not yet tried by this
//!    request. When every address fails its health checks, the checks are
//!    ignored ("panic mode", as Envoy and nginx do): a health endpoint that
//!    is slow under load, or a check that cannot reach the upstream while
//!    requests can, must not turn a busy upstream into a 100% outage. The
//!    breakers still take addresses that really fail out.
//! 2. None: no address. One: that one.
//! 3. Otherwise draw two distinct candidates at random and take the one
//!    with the lower cost (latency estimate x (in flight + 1)); ties go to
//!    the first drawn. Two random choices avoid the herd behaviour of
//!    always taking the cheapest address, and keep load spread while a
//!    slow or loaded address is still avoided.
//! 4. If the chosen address's breaker refuses (another request took its
//!    probe), it is dropped from the candidates and the draw is repeated.
//!
//! [`pick_two`] is the pure core of step 3.

use super::address::{Address, Attempt};
use crate::random_draws::next_draw;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Latency assumed for an address never measured: optimistic, so a new
/// address is tried (and measured) rather than starved.
pub const PRIOR_LATENCY: Duration = Duration::from_millis(1);

/// Step 3: the index (into `costs`) of the better of two distinct
/// candidates drawn with `first` and `second` (uniform in `[0, 1)`).
pub fn pick_two(costs: &[f64], first: f64, second: f64) -> Option<usize> {
    let n = costs.len();
    match n {
        0 => None,
        1 => Some(0),
        _ => {
            let i = ((first * n as f64) as usize).min(n - 1);
            let mut j = ((second * (n - 1) as f64) as usize).min(n - 2);
            if j >= i {
                j += 1;
            }
            Some(if costs[j] < costs[i] { j } else { i })
        }
    }
}

/// Step 1: per address, whether it may take a request at `now`.
pub fn eligible(addresses: &[Arc<Address>], now: Instant) -> Vec<bool> {
    let panic = !addresses.iter().any(|a| a.is_healthy());
    addresses.iter().map(|a| (panic || a.is_healthy()) && a.breaker_allows(now)).collect()
}

/// Steps 1-4: starts an attempt on the chosen address, skipping the
/// addresses in `tried` (by index into `addresses`). Returns the index
/// and the attempt, or `None` when no address can take the request.
pub fn choose(addresses: &[Arc<Address>], tried: &[usize]) -> Option<(usize, Attempt)> {
    let now = Instant::now();
    let ok = eligible(addresses, now);
    let mut candidates: Vec<usize> = (0..addresses.len()).filter(|i| !tried.contains(i) && ok[*i]).collect();
    while !candidates.is_empty() {
        let costs: Vec<f64> = candidates.iter().map(|&i| addresses[i].cost(PRIOR_LATENCY)).collect();
        let pick = pick_two(&costs, next_draw().value(), next_draw().value())?;
        let index = candidates[pick];
        if let Some(attempt) = addresses[index].begin(now) {
            return Some((index, attempt));
        }
        candidates.remove(pick);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_choices_take_the_cheaper_of_two_distinct() {
        assert_eq!(pick_two(&[], 0.5, 0.5), None);
        assert_eq!(pick_two(&[9.0], 0.9, 0.1), Some(0));
        // Draws 0 and 0 still give two distinct candidates.
        assert_eq!(pick_two(&[5.0, 1.0], 0.0, 0.0), Some(1));
        assert_eq!(pick_two(&[1.0, 5.0], 0.0, 0.0), Some(0));
        assert_eq!(pick_two(&[3.0, 3.0, 1.0], 0.0, 0.99), Some(2));
        assert_eq!(pick_two(&[3.0, 2.0, 1.0], 0.0, 0.0), Some(1), "only the two drawn compete");
    }

    fn addresses(n: usize) -> Vec<Arc<Address>> {
        (0..n)
            .map(|i| {
                let addr = format!("127.0.0.1:{}", 1000 + i).parse().unwrap();
                Arc::new(Address::new(addr, 1, Duration::from_secs(60)))
            })
            .collect()
    }

    #[test]
    fn a_slow_address_gets_less_traffic_and_a_dead_one_none() {
        let a = addresses(2);
        let now = Instant::now();
        a[0].begin(now).unwrap().succeeded(Duration::from_millis(1));
        a[1].begin(now).unwrap().succeeded(Duration::from_millis(50));
        let picks: Vec<usize> = (0..200).map(|_| choose(&a, &[]).unwrap().0).collect();
        assert!(picks.iter().all(|&i| i == 0), "with two addresses the faster always wins");
        a[0].begin(now).unwrap().failed();
        assert_eq!(choose(&a, &[]).unwrap().0, 1, "the breaker took address 0 out");
        assert!(choose(&a, &[1]).is_none(), "1 was tried, 0 is out: nothing left");
    }

    #[test]
    fn health_is_ignored_only_when_every_address_fails_it() {
        let a = addresses(2);
        a[0].set_healthy(false);
        assert!((0..50).all(|_| choose(&a, &[]).unwrap().0 == 1), "the healthy one only");
        a[1].set_healthy(false);
        assert!(choose(&a, &[]).is_some(), "all unhealthy: panic mode tries them anyway");
        a[1].begin(Instant::now()).unwrap().failed();
        assert_eq!(choose(&a, &[]).unwrap().0, 0, "breakers still apply in panic mode");
        assert_eq!(eligible(&a, Instant::now()), vec![true, false]);
    }

    #[test]
    fn load_spreads_over_equal_addresses() {
        let a = addresses(4);
        let mut counts = [0usize; 4];
        // Keep the attempts alive so in-flight load counts.
        let held: Vec<Attempt> = (0..400)
            .map(|_| {
                let (i, attempt) = choose(&a, &[]).unwrap();
                counts[i] += 1;
                attempt
            })
            .collect();
        assert!(counts.iter().all(|&c| (70..=130).contains(&c)), "{counts:?}");
        drop(held);
    }
}
