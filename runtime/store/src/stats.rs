//! Counters of a [`crate::ModelStore`]: requests to the store, bytes
//! downloaded, cache hits and evictions. The gateway can export them as
//! metrics; tests use them to show that concurrent pulls share one download.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Live counters, shared by the store's tasks.
#[derive(Debug, Default)]
pub(crate) struct StoreCounters {
    gets: AtomicU64,
    lists: AtomicU64,
    bytes: AtomicU64,
    downloads: AtomicU64,
    cache_hits: AtomicU64,
    offline_hits: AtomicU64,
    evictions: AtomicU64,
}

impl StoreCounters {
    pub(crate) fn count_get(&self) {
        self.gets.fetch_add(1, Relaxed);
    }
    pub(crate) fn count_list(&self) {
        self.lists.fetch_add(1, Relaxed);
    }
    pub(crate) fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Relaxed);
    }
    pub(crate) fn count_download(&self) {
        self.downloads.fetch_add(1, Relaxed);
    }
    pub(crate) fn count_cache_hit(&self) {
        self.cache_hits.fetch_add(1, Relaxed);
    }
    pub(crate) fn count_offline_hit(&self) {
        self.offline_hits.fetch_add(1, Relaxed);
    }
    pub(crate) fn add_evictions(&self, n: u64) {
        self.evictions.fetch_add(n, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> StoreStats {
        StoreStats {
            gets: self.gets.load(Relaxed),
            lists: self.lists.load(Relaxed),
            bytes_downloaded: self.bytes.load(Relaxed),
            versions_downloaded: self.downloads.load(Relaxed),
            cache_hits: self.cache_hits.load(Relaxed),
            offline_hits: self.offline_hits.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
        }
    }
}

/// A snapshot of the counters since the store was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// GET requests sent (one per small file, one per part of a large one).
    pub gets: u64,
    /// LIST requests sent (pages of a listing count one each).
    pub lists: u64,
    /// Bytes written into the cache by downloads.
    pub bytes_downloaded: u64,
    /// Model versions downloaded into the cache.
    pub versions_downloaded: u64,
    /// Model versions served from the cache after the store confirmed them.
    pub cache_hits: u64,
    /// Model versions served from the cache because the store was unreachable.
    pub offline_hits: u64,
    /// Model versions deleted from the cache to respect its size bound.
    pub evictions: u64,
}
