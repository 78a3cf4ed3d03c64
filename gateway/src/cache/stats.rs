//! Cache counters: plain atomics bumped on the request path, read as a
//! [`CacheSnapshot`] by the admin listener (and, later, by the metrics
//! exporter). Relaxed ordering: each counter is independent and only
//! needs to be eventually exact.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, shared by every part of the cache.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Lookups answered from L1.
    pub l1_hits: AtomicU64,
    /// Of the L1 hits, those answered by the exact-repeat cache (the
    /// request's bytes seen before; see [`super::repeat`]).
    pub repeat_hits: AtomicU64,
    /// Lookups not found in L1.
    pub l1_misses: AtomicU64,
    /// Lookups answered from L2 (Redis).
    pub l2_hits: AtomicU64,
    /// L2 lookups that found nothing.
    pub l2_misses: AtomicU64,
    /// L2 commands that failed or timed out (reads and writes).
    pub l2_errors: AtomicU64,
    /// L2 lookups skipped because the breaker was open.
    pub l2_skipped: AtomicU64,
    /// Requests that waited for an identical in-flight computation.
    pub coalesced: AtomicU64,
    /// Requests that did not read the cache (`no-store`, `no-cache`,
    /// disabled route, direct model address).
    pub bypass: AtomicU64,
    /// Answers stored in L1.
    pub stores: AtomicU64,
    /// L1 entries evicted to respect `l1_max_bytes`.
    pub evictions: AtomicU64,
    /// L1 entries removed because their TTL passed.
    pub expirations: AtomicU64,
    /// L2 writes completed.
    pub l2_writes: AtomicU64,
    /// L2 writes dropped: the write queue was full, or the breaker open.
    pub l2_writes_dropped: AtomicU64,
    /// L2 entries that could not be decoded (wrong version, corrupt).
    pub l2_decode_errors: AtomicU64,
    /// Misses that waited for another replica computing the same request
    /// (fleet-wide coalescing).
    pub fleet_waits: AtomicU64,
    /// ... and got its answer (the rest computed their own).
    pub fleet_served: AtomicU64,
}

impl CacheStats {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A point-in-time copy of the counters plus gauges, for JSON output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CacheSnapshot {
    /// Whether a `[cache]` section is configured.
    pub enabled: bool,
    /// Whether a Redis L2 is configured.
    pub l2_configured: bool,
    /// Breaker state: `closed`, `open`, `half_open` (or `none` without L2).
    pub l2_breaker: &'static str,
    /// L1 entries held.
    pub l1_entries: u64,
    /// L1 bytes held (the weigher's estimate of the answers' sizes).
    pub l1_bytes: u64,
    /// The L1 bound in bytes.
    pub l1_max_bytes: u64,
    /// See [`CacheStats::l1_hits`].
    pub l1_hits: u64,
    /// See [`CacheStats::repeat_hits`] (JSON `replay_hits`, its name
    /// before the exact-repeat cache was renamed).
    #[serde(rename = "replay_hits")]
    pub repeat_hits: u64,
    /// See [`CacheStats::l1_misses`].
    pub l1_misses: u64,
    /// See [`CacheStats::l2_hits`].
    pub l2_hits: u64,
    /// See [`CacheStats::l2_misses`].
    pub l2_misses: u64,
    /// See [`CacheStats::l2_errors`].
    pub l2_errors: u64,
    /// See [`CacheStats::l2_skipped`].
    pub l2_skipped: u64,
    /// See [`CacheStats::coalesced`].
    pub coalesced: u64,
    /// See [`CacheStats::bypass`].
    pub bypass: u64,
    /// See [`CacheStats::stores`].
    pub stores: u64,
    /// See [`CacheStats::evictions`].
    pub evictions: u64,
    /// See [`CacheStats::expirations`].
    pub expirations: u64,
    /// See [`CacheStats::l2_writes`].
    pub l2_writes: u64,
    /// See [`CacheStats::l2_writes_dropped`].
    pub l2_writes_dropped: u64,
    /// See [`CacheStats::l2_decode_errors`].
    pub l2_decode_errors: u64,
    /// See [`CacheStats::fleet_waits`].
    pub fleet_waits: u64,
    /// See [`CacheStats::fleet_served`].
    pub fleet_served: u64,
}

impl CacheStats {
    /// Copies the counters into a snapshot; gauges are filled by the caller.
    pub fn counters(&self) -> CacheSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CacheSnapshot {
            l1_hits: get(&self.l1_hits),
            repeat_hits: get(&self.repeat_hits),
            l1_misses: get(&self.l1_misses),
            l2_hits: get(&self.l2_hits),
            l2_misses: get(&self.l2_misses),
            l2_errors: get(&self.l2_errors),
            l2_skipped: get(&self.l2_skipped),
            coalesced: get(&self.coalesced),
            bypass: get(&self.bypass),
            stores: get(&self.stores),
            evictions: get(&self.evictions),
            expirations: get(&self.expirations),
            l2_writes: get(&self.l2_writes),
            l2_writes_dropped: get(&self.l2_writes_dropped),
            l2_decode_errors: get(&self.l2_decode_errors),
            fleet_waits: get(&self.fleet_waits),
            fleet_served: get(&self.fleet_served),
            ..CacheSnapshot::default()
        }
    }
}
