//! L1: the in-process cache (moka), bounded in bytes, with a TTL per entry
//! (each route has its own `ttl_s`).
//!
//! Entries hold an answer whose tensors are slices of one compact buffer
//! (its [`super::value_codec`] encoding), so an entry's weight is its real
//! size and a cached answer never keeps a whole batch's output alive.

use super::key::CacheKey;
use super::stats::CacheStats;
use moka::future::Cache;
use moka::notification::RemovalCause;
use moka::Expiry;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_protocol::answer::Answer;

/// One cached answer and how long it lives.
#[derive(Debug, Clone)]
pub struct L1Entry {
    /// The answer, shared by every hit.
    pub answer: Arc<Answer>,
    /// Time to live from insertion.
    pub ttl: Duration,
    /// Bytes it holds (its encoded size plus a fixed overhead).
    pub weight: u32,
}

/// Fixed per-entry overhead counted by the weigher (key, bookkeeping).
const ENTRY_OVERHEAD: u32 = 128;

impl L1Entry {
    /// An entry for `answer`, whose encoded form is `encoded_len` bytes.
    pub fn new(answer: Arc<Answer>, ttl: Duration, encoded_len: usize) -> L1Entry {
        let weight = u32::try_from(encoded_len).unwrap_or(u32::MAX).saturating_add(ENTRY_OVERHEAD);
        L1Entry { answer, ttl, weight }
    }
}

struct PerEntryTtl;

impl Expiry<CacheKey, L1Entry> for PerEntryTtl {
    fn expire_after_create(
        &self,
        _key: &CacheKey,
        value: &L1Entry,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(value.ttl)
    }

    fn expire_after_update(
        &self,
        _key: &CacheKey,
        value: &L1Entry,
        _updated_at: Instant,
        _duration_until_expiry: Option<Duration>,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// Entries and bytes held, kept exact on insert and removal (moka's own
/// counts lag until its maintenance runs).
#[derive(Debug, Default)]
struct Held {
    entries: AtomicI64,
    bytes: AtomicI64,
}

impl Held {
    fn add(&self, weight: u32, sign: i64) {
        self.entries.fetch_add(sign, Ordering::Relaxed);
        self.bytes.fetch_add(sign * i64::from(weight), Ordering::Relaxed);
    }
}

/// The L1 cache.
pub struct L1 {
    cache: Cache<CacheKey, L1Entry>,
    max_bytes: u64,
    held: Arc<Held>,
}

impl L1 {
    /// An empty cache holding at most `max_bytes` (by the weigher);
    /// evictions and expirations are counted in `stats`.
    pub fn new(max_bytes: u64, stats: Arc<CacheStats>) -> L1 {
        let held = Arc::new(Held::default());
        let on_removal = held.clone();
        let cache = Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|_key: &CacheKey, entry: &L1Entry| entry.weight)
            .expire_after(PerEntryTtl)
            .eviction_listener(move |_key, entry: L1Entry, cause| {
                on_removal.add(entry.weight, -1);
                match cause {
                    RemovalCause::Size => CacheStats::bump(&stats.evictions),
                    RemovalCause::Expired => CacheStats::bump(&stats.expirations),
                    RemovalCause::Explicit | RemovalCause::Replaced => {}
                }
            })
            .build();
        L1 { cache, max_bytes, held }
    }

    /// The live answer for `key`, if any.
    pub async fn get(&self, key: &CacheKey) -> Option<Arc<Answer>> {
        self.cache.get(key).await.map(|entry| entry.answer)
    }

    /// Stores (or replaces) the entry for `key`.
    pub async fn insert(&self, key: CacheKey, entry: L1Entry) {
        // Counted before the insert so that the removal of an entry moka
        // rejects (or replaces) never drives the gauges below zero.
        self.held.add(entry.weight, 1);
        self.cache.insert(key, entry).await;
    }

    /// Entries held (expired ones count until moka removes them).
    pub fn entry_count(&self) -> u64 {
        u64::try_from(self.held.entries.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// Bytes held, by the weigher.
    pub fn weighted_size(&self) -> u64 {
        u64::try_from(self.held.bytes.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// The configured bound in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Applies pending evictions now (tests and stats).
    #[cfg(test)]
    pub async fn run_pending_tasks(&self) {
        self.cache.run_pending_tasks().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_runtime::Tensor;

    fn entry(bytes: usize, ttl: Duration) -> L1Entry {
        let answer = Answer {
            model: "m".into(),
            version: 1,
            device: router_policies::Device::Cpu,
            pool: "cpu".into(),
            reason: router_policies::Reason::Fixed,
            batch_size: 1,
            budget_ms: 50,
            degraded: false,
            confidence: None,
            outputs: vec![("o".into(), Tensor::from_f32(vec![1], &[1.0]).unwrap())],
        };
        L1Entry::new(Arc::new(answer), ttl, bytes)
    }

    fn key(i: u8) -> CacheKey {
        CacheKey([i; 32])
    }

    #[tokio::test]
    async fn per_entry_ttl() {
        let stats = Arc::new(CacheStats::default());
        let l1 = L1::new(1 << 20, stats);
        l1.insert(key(1), entry(10, Duration::from_millis(50))).await;
        l1.insert(key(2), entry(10, Duration::from_secs(60))).await;
        assert!(l1.get(&key(1)).await.is_some());
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(l1.get(&key(1)).await.is_none(), "short TTL expired");
        assert!(l1.get(&key(2)).await.is_some(), "long TTL still there");
    }

    #[tokio::test]
    async fn bounded_in_bytes() {
        let stats = Arc::new(CacheStats::default());
        let l1 = L1::new(10_000, stats.clone());
        for i in 0..50u8 {
            l1.insert(key(i), entry(1_000, Duration::from_secs(60))).await;
            l1.run_pending_tasks().await;
        }
        assert!(l1.weighted_size() <= 10_000, "{} bytes held", l1.weighted_size());
        assert!(stats.counters().evictions > 0);
        assert!(l1.entry_count() < 50);
    }
}
