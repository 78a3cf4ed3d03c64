//! The optional exact-match cache of a prefix route (`cache = { ... }`),
//! in process (moka), bounded by `max_bytes`.
//!
//! Key (blake3, every field length-prefixed so the encoding is
//! prefix-free): layout version, route and upstream names, method, path
//! and query as the client sent them, each configured request header
//! (name, value count, values in order), and the request body.
//!
//! A request is looked up when its method is listed, the client did not
//! send `Cache-Control: no-store` (`no-cache`: not read, refreshed), and its
//! body is known to fit `max_body_bytes` (`Content-Length`, or no body).
//! Other requests pass through untouched (`x-cache: bypass`).
//!
//! A response is stored ([`PrefixCache::response_ttl`]) only when:
//! 1. its status is 200 (errors and partial content never);
//! 2. it has no `Set-Cookie`, no `Cache-Control: no-store / no-cache /
//!    private`, and no `Vary` beyond the keyed headers (`Vary: *` never);
//! 3. it is marked cacheable (`s-maxage` or `max-age` > 0, or `public`),
//!    or the route sets `force = true`;
//! 4. its body fits `max_entry_bytes`.
//!
//! The entry lives for the route's `ttl_s`, or less when the response's
//! `s-maxage` / `max-age` says so.

use crate::config::proxy_types::PrefixCacheConfig;
use bytes::Bytes;
use http::header::{CACHE_CONTROL, SET_COOKIE, VARY};
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use moka::future::Cache;
use moka::Expiry;
use pingora::http::ResponseHeader;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Version of the key layout.
const KEY_LAYOUT: &[u8] = b"switchyard-prefix-cache-v1";

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
    pub fn key(
        &self,
        upstream: &str,
        method: &Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        field(&mut h, KEY_LAYOUT);
        field(&mut h, self.route.as_bytes());
        field(&mut h, upstream.as_bytes());
        field(&mut h, method.as_str().as_bytes());
        field(&mut h, path_and_query.as_bytes());
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

    /// How long `resp` may be served from the cache; `None` when it must
    /// not be stored (rules 1-3 of the module docs).
    pub fn response_ttl(&self, resp: &ResponseHeader) -> Option<Duration> {
        if resp.status != http::StatusCode::OK || resp.headers.contains_key(SET_COOKIE) {
            return None;
        }
        for vary in resp.headers.get_all(VARY) {
            let text = vary.to_str().ok()?;
            for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                if name == "*" || !self.config.headers.iter().any(|k| k.as_str().eq_ignore_ascii_case(name)) {
                    return None;
                }
            }
        }
        let (mut max_age, mut s_maxage, mut public) = (None, None, false);
        for value in resp.headers.get_all(CACHE_CONTROL) {
            for directive in value.to_str().ok()?.split(',') {
                let mut parts = directive.trim().splitn(2, '=');
                let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
                let seconds = parts.next().and_then(|v| v.trim().trim_matches('"').parse::<u64>().ok());
                match name.as_str() {
                    "no-store" | "no-cache" | "private" => return None,
                    "public" => public = true,
                    "max-age" => max_age = seconds,
                    "s-maxage" => s_maxage = seconds,
                    _ => {}
                }
            }
        }
        let ttl = match s_maxage.or(max_age) {
            Some(0) => return None,
            Some(s) => Duration::from_secs(s).min(self.config.ttl),
            None if public || self.config.force => self.config.ttl,
            None => return None,
        };
        Some(ttl)
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

    fn response(status: u16, headers: &[(&str, &str)]) -> ResponseHeader {
        let mut r = ResponseHeader::build(status, None).unwrap();
        for (n, v) in headers {
            r.append_header(n.to_string(), *v).unwrap();
        }
        r
    }

    #[test]
    fn keys_cover_method_path_keyed_headers_and_body_only() {
        let c = cache(false);
        let mut h = HeaderMap::new();
        let base = c.key("u", &Method::POST, "/x?a=1", &h, b"{}");
        assert_ne!(base, c.key("u", &Method::GET, "/x?a=1", &h, b"{}"));
        assert_ne!(base, c.key("u", &Method::POST, "/x?a=2", &h, b"{}"));
        assert_ne!(base, c.key("u", &Method::POST, "/x?a=1", &h, b"{ }"));
        assert_ne!(base, c.key("v", &Method::POST, "/x?a=1", &h, b"{}"));
        h.insert("user-agent", HeaderValue::from_static("curl"));
        assert_eq!(base, c.key("u", &Method::POST, "/x?a=1", &h, b"{}"), "unkeyed header");
        h.insert("accept", HeaderValue::from_static("text/plain"));
        assert_ne!(base, c.key("u", &Method::POST, "/x?a=1", &h, b"{}"), "keyed header");
        // Prefix-free: moving bytes between path and body changes the key.
        assert_ne!(c.key("u", &Method::GET, "/ab", &h, b"c"), c.key("u", &Method::GET, "/a", &h, b"bc"));
    }

    #[test]
    fn only_marked_or_forced_200s_are_stored() {
        let c = cache(false);
        let ttl = |h: &[(&str, &str)]| c.response_ttl(&response(200, h));
        assert_eq!(ttl(&[("cache-control", "max-age=5")]), Some(Duration::from_secs(5)));
        assert_eq!(
            ttl(&[("cache-control", "public, max-age=600, s-maxage=9")]),
            Some(Duration::from_secs(9))
        );
        assert_eq!(ttl(&[("cache-control", "max-age=600")]), Some(Duration::from_secs(60)), "route ttl caps");
        assert_eq!(ttl(&[("cache-control", "public")]), Some(Duration::from_secs(60)));
        assert_eq!(ttl(&[]), None, "unmarked");
        assert_eq!(ttl(&[("cache-control", "max-age=0")]), None);
        assert_eq!(ttl(&[("cache-control", "private, max-age=60")]), None);
        assert_eq!(ttl(&[("cache-control", "max-age=60"), ("set-cookie", "a=b")]), None);
        assert_eq!(
            ttl(&[("cache-control", "max-age=60"), ("vary", "Accept")]),
            Some(Duration::from_secs(60))
        );
        assert_eq!(ttl(&[("cache-control", "max-age=60"), ("vary", "Accept, Cookie")]), None);
        assert_eq!(c.response_ttl(&response(500, &[("cache-control", "max-age=60")])), None, "never errors");
        assert_eq!(c.response_ttl(&response(206, &[("cache-control", "max-age=60")])), None);
        let forced = cache(true);
        assert_eq!(forced.response_ttl(&response(200, &[])), Some(Duration::from_secs(60)));
        assert_eq!(forced.response_ttl(&response(200, &[("cache-control", "no-store")])), None);
        assert_eq!(forced.response_ttl(&response(404, &[])), None);
    }
}
