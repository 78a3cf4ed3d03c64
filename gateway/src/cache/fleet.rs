//! Fleet-wide coalescing (`routes[].cache.fleet_coalesce = true`):
//! identical concurrent misses at different gateway replicas run the model
//! once in the whole fleet. In-process coalescing ([`super::coalesce`])
//! already makes one request per replica the leader; this makes one leader
//! per fleet, through the shared Redis L2:
//!
//! 1. The leader's L2 lookup is [`lookup_or_claim`]: one script that
//!    returns the value, or else sets a marker beside it
//!    (`<key>:computing`, `PX fleet_wait_ms`, only if no one holds it).
//!    Holding the marker, the replica computes; the value is written and
//!    the marker deleted in one command ([`store_and_release`]), or the
//!    marker alone deleted at once when the answer is not stored (an
//!    error, a degraded answer).
//! 2. A replica that finds the marker held polls the value every
//!    [`POLL_EVERY`] ([`wait_for_owner`]). The value -> answered
//!    (`x-cache: hit-l2`). The marker gone without a value, Redis failing,
//!    or `fleet_wait_ms` passed -> it computes its own answer (so a dead
//!    owner costs at most the wait: its marker expires, nobody waits for
//!    it forever).
//!
//! The key is a cluster hash tag ([`L2::redis_key`]), so the value and its
//! marker share a slot and one script can touch both in Redis Cluster.
//! Cost: the script replaces the plain `GET`; the write carries the
//! marker's delete; waiting replicas read every few milliseconds. Opt-in
//! per route (`benchmarks/fleet_miss_cost.sh` measures it).

use super::key::CacheKey;
use super::l2::{L2Read, L2};
use super::stats::CacheStats;
use crate::config::RouteCache;
use bytes::Bytes;
use redis::Value;
use std::time::{Duration, Instant};

/// How often a waiting replica looks for the owner's answer.
pub const POLL_EVERY: Duration = Duration::from_millis(5);

/// The value, else the marker if free: `1` claimed, `0` held elsewhere.
const LOOKUP_OR_CLAIM: &str = "local v = redis.call('GET', KEYS[1]) \
     if v then return v end \
     if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then return 1 end \
     return 0";

/// Stores the value and frees the marker.
const STORE_AND_RELEASE: &str = "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) \
     redis.call('DEL', KEYS[2]) return 1";

/// The marker of `redis_key` (the value's key).
pub fn marker_key(redis_key: &str) -> String {
    format!("{redis_key}:computing")
}

/// What [`lookup_or_claim`] found.
#[derive(Debug)]
pub enum Lookup {
    /// The stored value.
    Hit(Bytes),
    /// No value; this replica now holds the marker and computes.
    Claimed(String),
    /// No value; another replica holds the marker.
    Held(String),
    /// Redis skipped (breaker open) or failed: compute without a marker.
    Unavailable,
}

/// The fleet route's L2 lookup, in one round trip (module docs, step 1).
pub async fn lookup_or_claim(l2: &L2, key: &CacheKey, wait: Duration) -> Lookup {
    if !l2.allows() {
        return Lookup::Unavailable;
    }
    let redis_key = l2.redis_key(key);
    let marker = marker_key(&redis_key);
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(LOOKUP_OR_CLAIM).arg(2).arg(&redis_key).arg(&marker).arg(wait.as_millis().max(1) as u64);
    match l2.run::<Value>(&cmd, l2.timeouts().0).await {
        Some(Value::BulkString(bytes)) => Lookup::Hit(Bytes::from(bytes)),
        Some(Value::Int(1)) => Lookup::Claimed(marker),
        Some(Value::Int(_)) => Lookup::Held(marker),
        Some(_) | None => Lookup::Unavailable,
    }
}

/// The L2 value of `key`, if any, and the fleet marker this replica
/// now holds (routes with `fleet_coalesce`, module docs: a replica
/// that finds the marker held waits for the owner's answer first).
pub async fn look_up(
    l2: &L2,
    key: &CacheKey,
    policy: &RouteCache,
    stats: &CacheStats,
) -> (Option<Bytes>, Option<String>) {
    let Some(wait) = policy.fleet_wait else {
        return match l2.get(key).await {
            L2Read::Hit(bytes) => (Some(bytes), None),
            L2Read::Miss => {
                CacheStats::bump(&stats.l2_misses);
                (None, None)
            }
            L2Read::Skipped | L2Read::Failed => (None, None),
        };
    };
    match lookup_or_claim(l2, key, wait).await {
        Lookup::Hit(bytes) => (Some(bytes), None),
        Lookup::Claimed(marker) => {
            CacheStats::bump(&stats.l2_misses);
            (None, Some(marker))
        }
        Lookup::Held(marker) => {
            CacheStats::bump(&stats.l2_misses);
            CacheStats::bump(&stats.fleet_waits);
            match wait_for_owner(l2, key, &marker, wait).await {
                Waited::Answered(bytes) => {
                    CacheStats::bump(&stats.fleet_served);
                    (Some(bytes), None)
                }
                Waited::GaveUp => (None, None),
            }
        }
        Lookup::Unavailable => (None, None),
    }
}

/// Whether a waiting replica got the owner's answer.
#[derive(Debug)]
pub enum Waited {
    /// The owner's encoded answer.
    Answered(Bytes),
    /// Compute locally: the owner went away without an answer, Redis
    /// failed, or the wait ran out.
    GaveUp,
}

/// Waits up to `wait` for the replica holding `marker` (module docs, step 2).
pub async fn wait_for_owner(l2: &L2, key: &CacheKey, marker: &str, wait: Duration) -> Waited {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        tokio::time::sleep(POLL_EVERY).await;
        match l2.get(key).await {
            L2Read::Hit(bytes) => return Waited::Answered(bytes),
            L2Read::Miss => {}
            L2Read::Skipped | L2Read::Failed => return Waited::GaveUp,
        }
        if holds(l2, marker).await != Some(true) {
            // Gone between the two reads? One last look at the value.
            return match l2.get(key).await {
                L2Read::Hit(bytes) => Waited::Answered(bytes),
                _ => Waited::GaveUp,
            };
        }
    }
    Waited::GaveUp
}

/// Whether `marker` is still held; `None` when Redis was skipped or failed.
async fn holds(l2: &L2, marker: &str) -> Option<bool> {
    if !l2.allows() {
        return None;
    }
    let mut cmd = redis::cmd("EXISTS");
    cmd.arg(marker);
    l2.run::<u64>(&cmd, l2.timeouts().0).await.map(|n| n > 0)
}

/// Stores `value` under `redis_key` for `ttl` and deletes `marker` (the
/// writer's command for a fleet owner's answer). False when skipped or failed.
pub async fn store_and_release(l2: &L2, redis_key: &str, value: &[u8], ttl: Duration, marker: &str) -> bool {
    if !l2.allows() {
        return false;
    }
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(STORE_AND_RELEASE)
        .arg(2)
        .arg(redis_key)
        .arg(marker)
        .arg(value)
        .arg(ttl.as_millis().max(1) as u64);
    l2.run::<Value>(&cmd, l2.timeouts().1).await.is_some()
}

/// Deletes `marker` (best effort: it also expires on its own).
pub async fn release(l2: &L2, marker: &str) {
    let mut cmd = redis::cmd("DEL");
    cmd.arg(marker);
    let _ = l2.run::<u64>(&cmd, l2.timeouts().1).await;
}
