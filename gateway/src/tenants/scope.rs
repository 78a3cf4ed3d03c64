//! The limiter state of one scope (a tenant across routes, or a tenant on
//! one route): its request and row rates (GCRA, from `governor`), its
//! requests computing now, and its requests of the UTC day.
//!
//! The state outlives config generations: a hot reload that keeps a
//! scope's rate keeps its GCRA state, one that changes the rate starts it
//! afresh (full burst); the in-flight count and the day's count are kept
//! whatever the new limits, so a reload neither forgets work in progress
//! nor hands out a second day's quota.

use super::LimitKind;
use crate::config::tenant_section::{Rate, TenantLimits};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use parking_lot::Mutex;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds in a (UTC) day.
pub const DAY_S: u64 = 86_400;

/// A refusal by one limit of one scope, before it is given its scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// Which limit.
    pub kind: LimitKind,
    /// When a retry may pass (at least the rest of this second).
    pub retry_after: Duration,
}

/// A GCRA limiter that says, when it admits, how many cells are left.
type Gcra = RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;

/// A GCRA limiter for one [`Rate`], kept with the rate it was built for.
struct Bucket {
    rate: Rate,
    gcra: Gcra,
}

impl Bucket {
    fn new(rate: Rate) -> Option<Bucket> {
        let period = Duration::from_secs_f64(1.0 / rate.per_s);
        let quota = Quota::with_period(period)?.allow_burst(NonZeroU32::new(rate.burst)?);
        let gcra = DefaultDirectRateLimiter::direct(quota).with_middleware::<StateInformationMiddleware>();
        Some(Bucket { rate, gcra })
    }
}

/// The bucket for `rate` in `slot`: the one there when its rate is the
/// same, else a new one (a reload changed the rate).
fn bucket(slot: &Mutex<Option<Arc<Bucket>>>, rate: Rate) -> Option<Arc<Bucket>> {
    let mut slot = slot.lock();
    match &*slot {
        Some(b) if b.rate == rate => Some(b.clone()),
        _ => {
            let fresh = Arc::new(Bucket::new(rate)?);
            *slot = Some(fresh.clone());
            Some(fresh)
        }
    }
}

/// Takes `n` cells of `rate` from `slot`: the cells left, or the refusal
/// (`kind` names the limit).
fn take(slot: &Mutex<Option<Arc<Bucket>>>, rate: Rate, n: u32, kind: LimitKind) -> Result<u32, Limited> {
    let Some(bucket) = bucket(slot, rate) else { return Ok(rate.burst) };
    let Some(n) = NonZeroU32::new(n) else { return Ok(rate.burst) };
    match bucket.gcra.check_n(n) {
        Ok(Ok(state)) => Ok(state.remaining_burst_capacity()),
        Ok(Err(not_until)) => {
            Err(Limited { kind, retry_after: not_until.wait_time_from(DefaultClock::default().now()) })
        }
        Err(_) => Err(Limited { kind: LimitKind::RowsOverBurst, retry_after: Duration::ZERO }),
    }
}

/// The requests of one UTC day.
#[derive(Debug, Default, Clone, Copy)]
struct DayCount {
    day: u64,
    used: u64,
}

/// Everything one scope counts.
#[derive(Default)]
pub struct ScopeState {
    requests: Mutex<Option<Arc<Bucket>>>,
    rows: Mutex<Option<Arc<Bucket>>>,
    in_flight: Arc<AtomicU32>,
    day: Mutex<DayCount>,
    /// The fleet's requests left today as Redis last said
    /// (`[fleet_limits]`): (day, left).
    fleet_day: Mutex<Option<(u64, u64)>>,
}

/// One request computing in a scope; dropping it ends it.
pub struct InFlight(Option<Arc<AtomicU32>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(count) = &self.0 {
            count.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Seconds since the epoch, now.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl ScopeState {
    /// Counts one request of the UTC day of `now_s` when the daily quota
    /// has room (every request is counted, quota or not, so a quota set
    /// by a reload counts the day so far).
    pub fn reserve_day(&self, limits: &TenantLimits, now_s: u64) -> Result<Option<u64>, Limited> {
        let mut day = self.day.lock();
        let today = now_s / DAY_S;
        if day.day != today {
            *day = DayCount { day: today, used: 0 };
        }
        if limits.requests_per_day.is_some_and(|quota| day.used >= quota) {
            let left = DAY_S - now_s % DAY_S;
            return Err(Limited { kind: LimitKind::Daily, retry_after: Duration::from_secs(left) });
        }
        day.used += 1;
        Ok(limits.requests_per_day.map(|quota| quota.saturating_sub(day.used)))
    }

    /// Gives back a request [`ScopeState::reserve_day`] counted (another
    /// limit refused it).
    pub fn refund_day(&self, now_s: u64) {
        let mut day = self.day.lock();
        if day.day == now_s / DAY_S {
            day.used = day.used.saturating_sub(1);
        }
    }

    /// Takes one request from the request rate: the requests left at once.
    pub fn take_rate(&self, limits: &TenantLimits) -> Result<Option<u32>, Limited> {
        match limits.requests {
            Some(rate) => take(&self.requests, rate, 1, LimitKind::Requests).map(Some),
            None => Ok(None),
        }
    }

    /// Admits one request in this scope alone: its daily quota, then its
    /// request rate (a rate refusal gives the day's request back).
    #[cfg(test)]
    pub fn take_request(&self, limits: &TenantLimits, now_s: u64) -> Result<(), Limited> {
        self.reserve_day(limits, now_s)?;
        self.take_rate(limits).map(|_| ()).inspect_err(|_| self.refund_day(now_s))
    }

    /// Admits `rows` rows to compute: a place under `concurrent`, then the
    /// rows from the row rate (the place is given back when they are
    /// refused).
    pub fn take_compute(&self, limits: &TenantLimits, rows: usize) -> Result<InFlight, Limited> {
        let place = match limits.concurrent {
            None => InFlight(None),
            Some(max) => {
                let taken = self
                    .in_flight
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1));
                if taken.is_err() {
                    let refused =
                        Limited { kind: LimitKind::Concurrent, retry_after: Duration::from_secs(1) };
                    return Err(refused);
                }
                InFlight(Some(self.in_flight.clone()))
            }
        };
        if let Some(rate) = limits.rows {
            let n = u32::try_from(rows).unwrap_or(u32::MAX);
            take(&self.rows, rate, n, LimitKind::Rows).map(|_| ())?;
        }
        Ok(place)
    }

    /// Records what the fleet's Redis said is left of today's quota.
    pub fn note_fleet_day(&self, left: u64, now_s: u64) {
        *self.fleet_day.lock() = Some((now_s / DAY_S, left));
    }

    /// Requests left today under `quota` (at `now_s`): the fleet's count
    /// as Redis last said it today, else this process's own.
    pub fn quota_left(&self, quota: u64, now_s: u64) -> u64 {
        if let Some((day, left)) = *self.fleet_day.lock() {
            if day == now_s / DAY_S {
                return left.min(quota);
            }
        }
        let day = *self.day.lock();
        if day.day == now_s / DAY_S {
            quota.saturating_sub(day.used)
        } else {
            quota
        }
    }

    /// Requests computing now.
    #[cfg(test)]
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(
        requests: Option<Rate>,
        rows: Option<Rate>,
        concurrent: Option<u32>,
        per_day: Option<u64>,
    ) -> TenantLimits {
        TenantLimits { requests, rows, concurrent, requests_per_day: per_day }
    }

    /// A rate so slow no cell comes back while a test runs.
    fn slow(burst: u32) -> Rate {
        Rate { per_s: 1.0 / 3600.0, burst }
    }

    #[test]
    fn the_burst_passes_then_the_rate_refuses_with_a_wait() {
        let scope = ScopeState::default();
        let l = limits(Some(slow(3)), None, None, None);
        assert_eq!(scope.take_rate(&l), Ok(Some(2)), "2 of the burst of 3 left");
        assert_eq!(scope.take_rate(&l), Ok(Some(1)));
        assert_eq!(scope.take_request(&l, 0), Ok(()));
        let refused = scope.take_request(&l, 0).unwrap_err();
        assert_eq!(refused.kind, LimitKind::Requests);
        assert!(refused.retry_after > Duration::from_secs(3000), "{refused:?}");
    }

    #[test]
    fn the_daily_quota_counts_admitted_requests_and_resets_the_next_day() {
        let scope = ScopeState::default();
        let l = limits(None, None, None, Some(2));
        let noon = 20_000 * DAY_S + DAY_S / 2;
        assert_eq!(scope.quota_left(2, noon), 2);
        assert_eq!(scope.reserve_day(&l, noon), Ok(Some(1)));
        scope.refund_day(noon);
        assert!(scope.take_request(&l, noon).is_ok());
        assert!(scope.take_request(&l, noon).is_ok());
        let refused = scope.take_request(&l, noon).unwrap_err();
        assert_eq!(refused, Limited { kind: LimitKind::Daily, retry_after: Duration::from_secs(DAY_S / 2) });
        assert_eq!(scope.quota_left(2, noon), 0);
        assert!(scope.take_request(&l, noon + DAY_S).is_ok(), "a new UTC day");
        assert_eq!(scope.quota_left(2, noon + DAY_S), 1);
    }

    #[test]
    fn the_quota_left_is_the_fleets_as_last_seen_today() {
        let scope = ScopeState::default();
        let l = limits(None, None, None, Some(50));
        let noon = 20_000 * DAY_S + DAY_S / 2;
        assert!(scope.take_request(&l, noon).is_ok());
        assert_eq!(scope.quota_left(50, noon), 49);
        scope.note_fleet_day(12, noon);
        assert_eq!(scope.quota_left(50, noon), 12, "the fleet's count wins");
        assert_eq!(scope.quota_left(10, noon), 10, "never above a lowered quota");
        assert_eq!(scope.quota_left(50, noon + DAY_S), 50, "a new day");
    }

    #[test]
    fn a_rate_refusal_does_not_spend_the_quota() {
        let scope = ScopeState::default();
        let l = limits(Some(slow(1)), None, None, Some(5));
        assert!(scope.take_request(&l, 0).is_ok());
        assert!(scope.take_request(&l, 0).is_err());
        assert_eq!(scope.quota_left(5, 0), 4);
    }

    #[test]
    fn concurrency_places_come_back_when_dropped() {
        let scope = ScopeState::default();
        let l = limits(None, None, Some(2), None);
        let a = scope.take_compute(&l, 1).unwrap();
        let _b = scope.take_compute(&l, 1).unwrap();
        assert_eq!(scope.take_compute(&l, 1).err().map(|r| r.kind), Some(LimitKind::Concurrent));
        drop(a);
        assert!(scope.take_compute(&l, 1).is_ok());
    }

    #[test]
    fn rows_are_taken_by_the_batch_and_a_refusal_frees_its_place() {
        let scope = ScopeState::default();
        let l = limits(None, Some(slow(10)), Some(1), None);
        let first = scope.take_compute(&l, 6).unwrap();
        drop(first);
        assert_eq!(scope.take_compute(&l, 6).err().map(|r| r.kind), Some(LimitKind::Rows));
        assert_eq!(scope.in_flight(), 0, "the refused request gave its place back");
        assert_eq!(scope.take_compute(&l, 11).err().map(|r| r.kind), Some(LimitKind::RowsOverBurst));
        assert!(scope.take_compute(&l, 4).is_ok(), "4 of the 10 are left");
    }

    #[test]
    fn a_reload_with_the_same_rate_keeps_the_state_and_a_new_rate_starts_afresh() {
        let scope = ScopeState::default();
        let l = limits(Some(slow(1)), None, None, None);
        assert!(scope.take_request(&l, 0).is_ok());
        assert!(scope.take_request(&l, 0).is_err(), "same rate: same bucket");
        let raised = limits(Some(slow(2)), None, None, None);
        assert!(scope.take_request(&raised, 0).is_ok(), "a new rate starts with its full burst");
    }
}
