//! The optional HTTP response cache of a prefix route (`cache = { ... }`):
//! exact match, in process (moka), bounded by `max_bytes`.
//!
//! Key (blake3, every field length-prefixed so the encoding is
//! prefix-free): layout version, route and upstream names, method, path
//! and query as the client sent them, the client's `Host` (the upstream
//! sees it as `X-Forwarded-Host`, or as `Host` with `preserve_host`), each
//! configured request header (name, value count, values in order), and
//! the request body. The rest of what the upstream sees is fixed by the
//! route, or is the client's address (`X-Forwarded-For`), which an
//! upstream that answers by address must mark `private`.
//!
//! A request is looked up when its method is listed, the client did not
//! send `Cache-Control: no-store` (`no-cache`: not read, refreshed), and its
//! body is known to fit `max_body_bytes` (`Content-Length`, or no body).
//! Other requests pass through untouched (`x-cache: bypass`).
//!
//! What may be stored and whom an entry may answer (credentials, `Vary`,
//! `private`...): [`super::http_cache_policy`]. A stored body also fits
//! `max_entry_bytes`.

use super::sharing::Sharing;
use crate::config::prefix_route_section::PrefixCacheConfig;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use moka::future::Cache;
use moka::Expiry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Version of the key layout.
const KEY_LAYOUT: &[u8] = b"switchyard-prefix-cache-v2";

/// Bytes counted per entry besides its body and headers.
const ENTRY_OVERHEAD: usize = 256;

/// A stored response.
#[derive(Debug)]
pub struct CachedResponse {
    /// Its status.
    pub status: u16,
    /// Its end-to-end headers (hop-by-hop ones already removed).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Its whole body.
    pub body: Bytes,
    /// How long it is served.
    pub ttl: Duration,
    /// Which requests with unkeyed credentials it may answer.
    pub sharing: Sharing,
}

impl CachedResponse {
    fn weight(&self) -> u32 {
        let headers: usize = self.headers.iter().map(|(n, v)| n.as_str().len() + v.len()).sum();
        u32::try_from(self.body.len() + headers + ENTRY_OVERHEAD).unwrap_or(u32::MAX)
    }
}

struct Ttl;

impl Expiry<[u8; 32], Arc<CachedResponse>> for Ttl {
    fn expire_after_create(&self, _: &[u8; 32], value: &Arc<CachedResponse>, _: Instant) -> Option<Duration> {
        Some(value.ttl)
    }

    fn expire_after_update(
        &self,
        _: &[u8; 32],
        value: &Arc<CachedResponse>,
        _: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// Counters of one route's cache.
#[derive(Debug, Default)]
pub struct PrefixCacheStats {
    /// Answered from the cache.
    pub hits: AtomicU64,
    /// Looked up, not found.
    pub misses: AtomicU64,
    /// Not looked up (method, body, `Cache-Control`).
    pub bypass: AtomicU64,
    /// Responses stored.
    pub stores: AtomicU64,
}

/// One prefix route's cache.
pub struct PrefixCache {
    /// Its settings.
    pub config: PrefixCacheConfig,
    route: String,
    store: Cache<[u8; 32], Arc<CachedResponse>>,
    /// Its counters.
    pub stats: PrefixCacheStats,
}

impl std::fmt::Debug for PrefixCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefixCache").field("route", &self.route).field("config", &self.config).finish()
    }
}

/// What a request's key is made of (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct RequestKey<'a> {
    /// The route's upstream.
    pub upstream: &'a str,
    /// The request method.
    pub method: &'a Method,
    /// Path and query as the client sent them.
    pub path_and_query: &'a str,
    /// The client's `Host`, when sent.
    pub host: Option<&'a str>,
    /// The request's headers (only the configured ones are keyed).
    pub headers: &'a HeaderMap,
    /// The request body.
    pub body: &'a [u8],
}

/// Appends a length-prefixed field to the hasher.
fn field(h: &mut blake3::Hasher, bytes: &[u8]) {
    h.update(&(bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

impl PrefixCache {
    /// An empty cache for route `route` (its name and upstream are keyed).
    pub fn new(route: &str, config: PrefixCacheConfig) -> PrefixCache {
        let store = Cache::builder()
            .max_capacity(config.max_bytes)
            .weigher(|_: &[u8; 32], v: &Arc<CachedResponse>| v.weight())
            .expire_after(Ttl)
            .build();
        PrefixCache { config, route: route.to_string(), store, stats: PrefixCacheStats::default() }
    }

    /// Whether requests with `method` may be cached at all.
    pub fn allows(&self, method: &Method) -> bool {
        self.config.methods.contains(method)
    }

    /// The key of a request (see the module docs).
    pub fn key(&self, request: &RequestKey<'_>) -> [u8; 32] {
        // Destructured: a new field does not build until it is keyed.
        let RequestKey { upstream, method, path_and_query, host, headers, body } = *request;
        let mut h = blake3::Hasher::new();
        field(&mut h, KEY_LAYOUT);
        field(&mut h, self.route.as_bytes());
        field(&mut h, upstream.as_bytes());
        field(&mut h, method.as_str().as_bytes());
        field(&mut h, path_and_query.as_bytes());
        match host {
            Some(host) => field(&mut h, host.to_ascii_lowercase().as_bytes()),
            // A length no field can have: no host differs from an empty one.
            None => {
                h.update(&u64::MAX.to_le_bytes());
            }
        }
        h.update(&(self.config.headers.len() as u64).to_le_bytes());
        for name in &self.config.headers {
            field(&mut h, name.as_str().as_bytes());
            let values: Vec<&HeaderValue> = headers.get_all(name).iter().collect();
            h.update(&(values.len() as u64).to_le_bytes());
            for v in values {
                field(&mut h, v.as_bytes());
            }
        }
        field(&mut h, body);
        *h.finalize().as_bytes()
    }

    /// The live entry for `key`.
    pub async fn get(&self, key: &[u8; 32]) -> Option<Arc<CachedResponse>> {
        self.store.get(key).await
    }

    /// Stores `response` under `key`.
    pub async fn put(&self, key: [u8; 32], response: CachedResponse) {
        self.stats.stores.fetch_add(1, Ordering::Relaxed);
        self.store.insert(key, Arc::new(response)).await;
    }

    /// Entries held.
    pub fn entries(&self) -> u64 {
        self.store.entry_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(force: bool) -> PrefixCache {
        PrefixCache::new(
            "r",
            PrefixCacheConfig {
                ttl: Duration::from_secs(60),
                methods: vec![Method::GET, Method::POST],
                headers: vec![HeaderName::from_static("accept")],
                force,
                max_body_bytes: 1024,
                max_entry_bytes: 1024,
                max_bytes: 1 << 20,
            },
        )
    }

    #[test]
    fn keys_cover_method_path_host_keyed_headers_and_body_only() {
        let c = cache(false);
        let mut h = HeaderMap::new();
        let key = |upstream, method: &Method, path_and_query, host, headers: &HeaderMap, body: &[u8]| {
            c.key(&RequestKey { upstream, method, path_and_query, host, headers, body })
        };
        let base = key("u", &Method::POST, "/x?a=1", Some("a.example"), &h, b"{}");
        assert_ne!(base, key("u", &Method::GET, "/x?a=1", Some("a.example"), &h, b"{}"));
        assert_ne!(base, key("u", &Method::POST, "/x?a=2", Some("a.example"), &h, b"{}"));
        assert_ne!(base, key("u", &Method::POST, "/x?a=1", Some("a.example"), &h, b"{ }"));
        assert_ne!(base, key("v", &Method::POST, "/x?a=1", Some("a.example"), &h, b"{}"));
        assert_ne!(base, key("u", &Method::POST, "/x?a=1", Some("b.example"), &h, b"{}"), "host");
        assert_ne!(base, key("u", &Method::POST, "/x?a=1", None, &h, b"{}"), "no host");
        assert_ne!(
            key("u", &Method::GET, "/", Some(""), &h, b""),
            key("u", &Method::GET, "/", None, &h, b"")
        );
        assert_eq!(base, key("u", &Method::POST, "/x?a=1", Some("A.Example"), &h, b"{}"), "host case");
        h.insert("user-agent", HeaderValue::from_static("curl"));
        assert_eq!(base, key("u", &Method::POST, "/x?a=1", Some("a.example"), &h, b"{}"), "unkeyed header");
        h.insert("accept", HeaderValue::from_static("text/plain"));
        assert_ne!(base, key("u", &Method::POST, "/x?a=1", Some("a.example"), &h, b"{}"), "keyed header");
        // Prefix-free: moving bytes between path and body changes the key.
        assert_ne!(
            key("u", &Method::GET, "/ab", None, &h, b"c"),
            key("u", &Method::GET, "/a", None, &h, b"bc")
        );
    }
}
