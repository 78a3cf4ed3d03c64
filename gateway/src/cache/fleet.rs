//! Fleet-wide coalescing (`routes[].cache.fleet_coalesce = true`):
//! identical concurrent misses at different gateway replicas run the model
//! once in the whole fleet. In-process coalescing ([`super::coalesce`])
//! already makes one request per replica the leader; this makes one leader
//! per fleet, through the shared Redis L2:
//!
//! 1. After an L2 miss, the leader sets a marker beside the value's key
//!    (`SET <key>:computing 1 NX PX fleet_wait_ms`). Holding it, it computes;
//!    its answer is written to L2 as usual, and the marker deleted after the
//!    write (or at once when the answer is not stored: an error, a degraded
//!    answer).
//! 2. A replica that finds the marker held polls the value every
//!    [`POLL_EVERY`]. The value -> answered (`x-cache: hit-l2`). The marker
//!    gone without a value, Redis failing, or `fleet_wait_ms` passed ->
//!    it computes its own answer (so a dead owner costs at most the wait:
//!    its marker expires, nobody waits for it forever).
//!
//! Cost: one more Redis round trip per miss (the `SET NX`), and for the
//! waiting replicas a read every few milliseconds; hence opt-in per route.

use super::key::CacheKey;
use super::l2::{L2Read, L2};
use bytes::Bytes;
use std::time::{Duration, Instant};

/// How often a waiting replica looks for the owner's answer.
pub const POLL_EVERY: Duration = Duration::from_millis(5);

/// The marker of `redis_key` (the value's key).
pub fn marker_key(redis_key: &str) -> String {
    format!("{redis_key}:computing")
}

/// What [`claim`] found.
#[derive(Debug)]
pub enum Claim {
    /// This replica computes, holding the marker.
    Owner(String),
    /// Another replica computed it; its encoded answer.
    Answered(Bytes),
    /// Compute locally without a marker: Redis failed before the claim.
    Alone,
    /// Compute locally after waiting: the owner went away without an
    /// answer, Redis failed, or the wait ran out.
    GaveUp,
}

/// Claims the computation of `key` for the fleet, or waits up to `wait`
/// for the replica that holds it.
pub async fn claim(l2: &L2, key: &CacheKey, wait: Duration) -> Claim {
    let marker = marker_key(&l2.redis_key(key));
    match l2.claim(&marker, wait).await {
        Some(true) => return Claim::Owner(marker),
        Some(false) => {}
        None => return Claim::Alone,
    }
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        tokio::time::sleep(POLL_EVERY).await;
        match l2.get(key).await {
            L2Read::Hit(bytes) => return Claim::Answered(bytes),
            L2Read::Miss => {}
            L2Read::Skipped | L2Read::Failed => return Claim::GaveUp,
        }
        if l2.holds(&marker).await != Some(true) {
            // Gone between the two reads? One last look at the value.
            return match l2.get(key).await {
                L2Read::Hit(bytes) => Claim::Answered(bytes),
                _ => Claim::GaveUp,
            };
        }
    }
    Claim::GaveUp
}
