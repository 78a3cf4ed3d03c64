//! Request coalescing: concurrent identical misses in one process compute
//! once. The first request for a key leads: it looks up L2 and, on a miss,
//! runs the model. Requests for the same key that arrive while it runs
//! wait for its outcome and get a copy of it, answer or error. Errors are
//! shared only with that in-flight group, never stored.
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
    /// flight, in which case its outcome is awaited and cloned.
    pub async fn run<F>(&self, key: CacheKey, compute: F) -> Joined<T>
    where
        F: Future<Output = T>,
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
                    if let Ok(value) = rx.wait_for(Option::is_some).await {
                        if let Some(outcome) = value.clone() {
                            return Joined { outcome, coalesced: true };
                        }
                    }
                    // The leader was dropped without an outcome: try again.
                }
            }
        }
    }

    fn role(&self, key: CacheKey) -> Role<'_, T> {
        let mut map = self.inflight.lock();
        if let Some((_, rx)) = map.get(&key) {
            return Role::Follower(rx.clone());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(None);
        map.insert(key, (id, rx));
        Role::Leader(LeaderGuard { owner: self, key, id, tx })
    }

    /// Keys being computed now.
    pub fn in_flight(&self) -> usize {
        self.inflight.lock().len()
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
                c.run(CacheKey([1; 32]), async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok(7)
                })
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
                c.run(CacheKey([2; 32]), async { Ok(1) }).await
            })
        };
        let leader = c.run(CacheKey([2; 32]), slow_error).await;
        assert_eq!(leader.outcome, Err("boom".into()));
        let follower = follower.await.unwrap();
        assert_eq!(follower.outcome, Err("boom".into()));
        assert!(follower.coalesced);
        // A later call computes afresh.
        let later = c.run(CacheKey([2; 32]), async { Ok(2) }).await;
        assert_eq!(later.outcome, Ok(2));
        assert!(!later.coalesced);
    }

    #[tokio::test]
    async fn a_cancelled_leader_hands_over_to_a_waiter() {
        let c = Arc::new(Coalescer::<u32>::default());
        let leader = {
            let c = c.clone();
            tokio::spawn(async move {
                c.run(CacheKey([3; 32]), async {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    1
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let follower = {
            let c = c.clone();
            tokio::spawn(async move { c.run(CacheKey([3; 32]), async { 2 }).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        leader.abort();
        let joined = tokio::time::timeout(Duration::from_secs(2), follower).await.unwrap().unwrap();
        assert_eq!(joined.outcome, 2);
        assert!(!joined.coalesced, "the waiter became the leader");
    }
}
