//! The exact-match cache a candidate config would have had over the
//! recorded traffic: requests in their recorded arrival order against an
//! L1 with the route's TTL and the `[cache]` section's byte bound (least
//! recently used evicted first), keyed like the live cache by route,
//! tenant, inputs and requested outputs. Redis (L2) is not simulated: its
//! hits depend on the other replicas' traffic, which one sample does not
//! hold.

use std::collections::HashMap;

/// Bytes an entry takes besides its outputs (key, bookkeeping).
const ENTRY_OVERHEAD: u64 = 256;

struct Entry {
    expires_ms: u64,
    bytes: u64,
    used: u64,
}

/// The simulated L1.
pub struct CacheSim {
    max_bytes: u64,
    entries: HashMap<blake3::Hash, Entry>,
    bytes: u64,
    clock: u64,
    /// Lookups of cacheable calls.
    pub lookups: u64,
    /// Of which hits.
    pub hits: u64,
}

impl CacheSim {
    /// An empty cache of `max_bytes`.
    pub fn new(max_bytes: u64) -> CacheSim {
        CacheSim { max_bytes, entries: HashMap::new(), bytes: 0, clock: 0, lookups: 0, hits: 0 }
    }

    /// A call at `now_ms` whose key is `key` and whose answer takes
    /// `answer_bytes`: a hit if a live entry holds it, else a miss that
    /// stores it for `ttl_ms`. Returns whether it hit.
    pub fn call(&mut self, key: blake3::Hash, now_ms: u64, ttl_ms: u64, answer_bytes: u64) -> bool {
        self.lookups += 1;
        self.clock += 1;
        if let Some(entry) = self.entries.get_mut(&key) {
            if entry.expires_ms > now_ms {
                entry.used = self.clock;
                self.hits += 1;
                return true;
            }
            let stale = entry.bytes;
            self.entries.remove(&key);
            self.bytes -= stale;
        }
        let bytes = answer_bytes + ENTRY_OVERHEAD;
        if bytes > self.max_bytes {
            return false;
        }
        while self.bytes + bytes > self.max_bytes {
            let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| *k) else {
                break;
            };
            if let Some(e) = self.entries.remove(&oldest) {
                self.bytes -= e.bytes;
            }
        }
        self.entries
            .insert(key, Entry { expires_ms: now_ms.saturating_add(ttl_ms), bytes, used: self.clock });
        self.bytes += bytes;
        false
    }

    /// Hits over lookups; `None` before any lookup.
    pub fn hit_ratio(&self) -> Option<f64> {
        (self.lookups > 0).then(|| self.hits as f64 / self.lookups as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> blake3::Hash {
        blake3::hash(&[n])
    }

    #[test]
    fn repeats_hit_until_their_ttl_passes() {
        let mut cache = CacheSim::new(1 << 20);
        assert!(!cache.call(key(1), 0, 100, 10));
        assert!(cache.call(key(1), 50, 100, 10));
        assert!(!cache.call(key(1), 150, 100, 10), "expired");
        assert!(cache.call(key(1), 200, 100, 10), "stored again");
        assert_eq!((cache.hits, cache.lookups), (2, 4));
        assert_eq!(cache.hit_ratio(), Some(0.5));
    }

    #[test]
    fn the_byte_bound_evicts_the_least_recently_used() {
        let mut cache = CacheSim::new(3 * (ENTRY_OVERHEAD + 100));
        for n in 1..=3 {
            assert!(!cache.call(key(n), 0, 1000, 100));
        }
        assert!(cache.call(key(1), 1, 1000, 100), "1 is now the most recently used");
        assert!(!cache.call(key(4), 2, 1000, 100), "evicts 2");
        assert!(cache.call(key(1), 3, 1000, 100));
        assert!(!cache.call(key(2), 4, 1000, 100), "2 was evicted");
    }
}
