//! Request coalescing: concurrent identical misses in one process compute
//! once. The first request for a key leads: it looks up L2 and, on a miss,
//! runs the model. Requests for the same key that arrive while it runs
//! wait for its outcome and get a copy of it, answer or error, when their
//! `accept` check takes it. Errors are shared only with that in-flight
//! group, never stored.
//!
//! An outcome a waiter does not accept (one that belongs to the leader's
//! request, e.g. a shed caused by the leader's tiny budget) sends the
//! waiter back to the start: it leads a computation of its own, or joins
//! the one another such waiter leads by then.
//!
//! If the leader is cancelled (its client went away), its waiters see the
//! channel close and one of them becomes the new leader.

use super::key::CacheKey;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::watch;

/// What one request got from the group: the outcome, and whether it
/// waited for another request's computation.
#[derive(Debug)]
pub struct Joined<T> {
    /// The leader's outcome (a clone for followers).
    pub outcome: T,
    /// True when this request was a follower.
    pub coalesced: bool,
}

/// A computation in flight: its leader's id and the channel its outcome
/// is published on.
type InFlight<T> = (u64, watch::Receiver<Option<T>>);

/// The in-flight map: one channel per key being computed.
pub struct Coalescer<T> {
    inflight: Mutex<HashMap<CacheKey, InFlight<T>>>,
    next_id: AtomicU64,
}

impl<T: Clone + Send + Sync> Default for Coalescer<T> {
    fn default() -> Self {
        Coalescer { inflight: Mutex::new(HashMap::new()), next_id: AtomicU64::new(0) }
    }
}

enum Role<'a, T> {
    Leader(LeaderGuard<'a, T>),
    Follower(watch::Receiver<Option<T>>),
}

/// Removes the leader's entry when it finishes or is dropped.
struct LeaderGuard<'a, T> {
    owner: &'a Coalescer<T>,
    key: CacheKey,
    id: u64,
    tx: watch::Sender<Option<T>>,
}

impl<T> Drop for LeaderGuard<'_, T> {
    fn drop(&mut self) {
        let mut map = self.owner.inflight.lock();
        if map.get(&self.key).is_some_and(|(id, _)| *id == self.id) {
            map.remove(&self.key);
        }
    }
}

impl<T: Clone + Send + Sync> Coalescer<T> {
    /// Runs `compute` for `key` unless an identical computation is in
    /// flight, in which case its outcome is awaited and cloned if
    /// `accept` takes it; otherwise `compute` runs after all (leading, or
    /// following another computation that started since).
    pub async fn run<F, A>(&self, key: CacheKey, compute: F, accept: A) -> Joined<T>
    where
        F: Future<Output = T>,
        A: Fn(&T) -> bool,
    {
        let mut compute = Some(compute);
        loop {
            match self.role(key) {
                Role::Leader(guard) => {
                    let Some(fut) = compute.take() else { continue };
                    let outcome = fut.await;
                    // Waiters get a clone; the guard's drop unregisters the key.
                    guard.tx.send_replace(Some(outcome.clone()));
                    return Joined { outcome, coalesced: false };
                }
                Role::Follower(mut rx) => {
                    let published = rx.wait_for(Option::is_some).await.ok().and_then(|value| value.clone());
                    if let Some(outcome) = published.filter(|o| accept(o)) {
                        return Joined { outcome, coalesced: true };
                    }
                    // The leader was dropped without an outcome, or the
                    // outcome is the leader's own: try again.
                }
            }
        }
    }

    /// Claims `key` for a caller that computes several keys at once (the
    /// rows of one batch, [`super::row_answer`]): it leads the key's
    /// computation, or waits for the one in flight. A [`Lead`] dropped
    /// without [`Lead::publish`] sends its waiters back to compute their own.
    pub fn claim(&self, key: CacheKey) -> Claim<'_, T> {
        match self.role(key) {
            Role::Leader(guard) => Claim::Lead(Lead(guard)),
            Role::Follower(rx) => Claim::Wait(Wait(rx)),
        }
    }

    fn role(&self, key: CacheKey) -> Role<'_, T> {
        let mut map = self.inflight.lock();
        // A computation that has published its outcome is finished (its
        // guard is about to unregister it): a newcomer, or a waiter that
        // did not accept the outcome, starts a new one in its place.
        if let Some((_, rx)) = map.get(&key).filter(|(_, rx)| rx.borrow().is_none()) {
            return Role::Follower(rx.clone());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(None);
        map.insert(key, (id, rx));
        Role::Leader(LeaderGuard { owner: self, key, id, tx })
    }

    /// Keys being computed now.
    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        self.inflight.lock().len()
    }
}

/// What [`Coalescer::claim`] gives: lead the key, or wait for it.
pub enum Claim<'a, T> {
    /// Nobody computes the key: the caller does, then publishes.
    Lead(Lead<'a, T>),
    /// Another request computes it.
    Wait(Wait<T>),
}

/// A key this caller computes; its waiters get what [`Lead::publish`] sends.
pub struct Lead<'a, T>(LeaderGuard<'a, T>);

impl<T> Lead<'_, T> {
    /// Hands `outcome` to the key's waiters and unregisters the key.
    pub fn publish(self, outcome: T) {
        self.0.tx.send_replace(Some(outcome));
    }
}

/// A key another request computes.
pub struct Wait<T>(watch::Receiver<Option<T>>);

impl<T: Clone> Wait<T> {
    /// The leader's outcome; `None` when it went away without one.
    pub async fn outcome(mut self) -> Option<T> {
        self.0.wait_for(Option::is_some).await.ok().and_then(|value| value.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn identical_concurrent_calls_compute_once() {
        let c = Arc::new(Coalescer::<Result<u32, String>>::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let (c, runs) = (c.clone(), runs.clone());
            tasks.push(tokio::spawn(async move {
                c.run(
                    CacheKey([1; 32]),
                    async {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok(7)
                    },
                    |_| true,
                )
                .await
            }));
        }
        let mut coalesced = 0;
        for t in tasks {
            let joined = t.await.unwrap();
            assert_eq!(joined.outcome, Ok(7));
            coalesced += usize::from(joined.coalesced);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(coalesced, 19);
        assert_eq!(c.in_flight(), 0);
    }

    #[tokio::test]
    async fn errors_reach_the_group_but_are_not_kept() {
        let c = Arc::new(Coalescer::<Result<u32, String>>::default());
        let slow_error = async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            Err("boom".to_string())
        };
        let follower = {
            let c = c.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                c.run(CacheKey([2; 32]), async { Ok(1) }, |_| true).await
            })
        };
        let leader = c.run(CacheKey([2; 32]), slow_error, |_| true).await;
        assert_eq!(leader.outcome, Err("boom".into()));
        let follower = follower.await.unwrap();
        assert_eq!(follower.outcome, Err("boom".into()));
        assert!(follower.coalesced);
        // A later call computes afresh.
        let later = c.run(CacheKey([2; 32]), async { Ok(2) }, |_| true).await;
        assert_eq!(later.outcome, Ok(2));
        assert!(!later.coalesced);
    }

    #[tokio::test]
    async fn a_claimed_key_is_waited_for_until_published_and_a_dropped_lead_frees_it() {
        let c = Coalescer::<u32>::default();
        let Claim::Lead(lead) = c.claim(CacheKey([5; 32])) else { panic!("first claim leads") };
        let Claim::Wait(wait) = c.claim(CacheKey([5; 32])) else { panic!("second claim waits") };
        lead.publish(9);
        assert_eq!(wait.outcome().await, Some(9));
        assert_eq!(c.in_flight(), 0);
        let Claim::Lead(lead) = c.claim(CacheKey([6; 32])) else { panic!("leads") };
        let Claim::Wait(wait) = c.claim(CacheKey([6; 32])) else { panic!("waits") };
        drop(lead);
        assert_eq!(wait.outcome().await, None, "a lead dropped unpublished leaves its waiters to compute");
        assert!(matches!(c.claim(CacheKey([6; 32])), Claim::Lead(_)));
    }

    #[tokio::test]
    async fn a_cancelled_leader_hands_over_to_a_waiter() {
        let c = Arc::new(Coalescer::<u32>::default());
        let leader = {
            let c = c.clone();
            tokio::spawn(async move {
                c.run(
                    CacheKey([3; 32]),
                    async {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        1
                    },
                    |_| true,
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let follower = {
            let c = c.clone();
            tokio::spawn(async move { c.run(CacheKey([3; 32]), async { 2 }, |_| true).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        leader.abort();
        let joined = tokio::time::timeout(Duration::from_secs(2), follower).await.unwrap().unwrap();
        assert_eq!(joined.outcome, 2);
        assert!(!joined.coalesced, "the waiter became the leader");
    }

    #[tokio::test]
    async fn an_outcome_a_waiter_does_not_accept_is_computed_again() {
        let c = Arc::new(Coalescer::<Result<u32, String>>::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let leader = {
            let c = c.clone();
            tokio::spawn(async move {
                let shed = async {
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    Err("the leader's own".to_string())
                };
                c.run(CacheKey([4; 32]), shed, |_| true).await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut waiters = Vec::new();
        for _ in 0..3 {
            let (c, runs) = (c.clone(), runs.clone());
            waiters.push(tokio::spawn(async move {
                let own = async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok(5)
                };
                c.run(CacheKey([4; 32]), own, Result::is_ok).await
            }));
        }
        assert_eq!(leader.await.unwrap().outcome, Err("the leader's own".into()));
        for w in waiters {
            assert_eq!(w.await.unwrap().outcome, Ok(5));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the waiters computed once, among themselves");
        assert_eq!(c.in_flight(), 0);
    }
}
