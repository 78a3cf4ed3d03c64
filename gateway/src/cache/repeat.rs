//! The exact-repeat cache: the encoded response of a request whose bytes were
//! seen before, served without decoding the request or encoding the answer.
//!
//! The canonical cache key ([`super::key`]) needs the request decoded into
//! tensors, so that JSON and binary encodings and different `id`s share an
//! entry. Decoding and re-encoding cost more than the lookup itself on a
//! hit (about a third of a cache hit's CPU on small models). Clients that
//! repeat a request usually repeat it byte for byte, so a second, cheaper
//! key is kept in front of L1:
//!
//! 1. [`RepeatKey`]: blake3 over the snapshot generation, the addressed
//!    name and version, the tenant, `Inference-Header-Content-Length` and
//!    the raw body. Only plain lookups qualify (a route with caching on,
//!    no `Cache-Control` directive, not an event stream).
//! 2. Lookup: the entry holds the canonical key, the exact `Arc` of the
//!    answer L1 held when it was made, and the encoded reply. It is served
//!    only while L1 still holds that same answer (`Arc::ptr_eq`): an
//!    expired, evicted or refreshed (`no-cache`) L1 entry invalidates the
//!    remembered reply at once, so TTLs and refreshes behave exactly as without it.
//! 3. Fill: after a lookup plan answered (hit or miss), the reply is kept
//!    with `x-cache: hit-l1`, since every later repeat is an L1 hit.
//!
//! A reload starts a new generation, so no remembered reply outlives the config it
//! was made under. Entries are bounded in bytes (a quarter of
//! `l1_max_bytes`) and live at most the route's `ttl_s`.

use super::key::CacheKey;
use crate::header_names::X_CACHE;
use crate::reply::Reply;
use moka::future::Cache;
use moka::Expiry;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_protocol::answer::Answer;

/// The raw-bytes key of one request (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepeatKey(pub [u8; 32]);

/// Everything the raw key covers.
pub struct RepeatParts<'a> {
    /// The config generation in force.
    pub generation: u64,
    /// The route addressed.
    pub name: &'a str,
    /// The version segment of the path, if any.
    pub version: Option<&'a str>,
    /// The authenticated tenant, if any.
    pub tenant: Option<&'a str>,
    /// The raw `Inference-Header-Content-Length` value, if any.
    pub header_length: Option<&'a [u8]>,
    /// The whole request body.
    pub body: &'a [u8],
}

impl RepeatKey {
    /// The key of `parts`; every field is length-prefixed (prefix-free).
    pub fn of(parts: &RepeatParts<'_>) -> RepeatKey {
        let mut h = blake3::Hasher::new();
        h.update(b"switchyard-replay-v1");
        h.update(&parts.generation.to_le_bytes());
        field(&mut h, Some(parts.name.as_bytes()));
        field(&mut h, parts.version.map(str::as_bytes));
        field(&mut h, parts.tenant.map(str::as_bytes));
        field(&mut h, parts.header_length);
        field(&mut h, Some(parts.body));
        RepeatKey(*h.finalize().as_bytes())
    }
}

fn field(h: &mut blake3::Hasher, value: Option<&[u8]>) {
    match value {
        None => {
            h.update(&[0]);
        }
        Some(bytes) => {
            h.update(&[1]);
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
    }
}

/// One remembered reply.
pub struct RepeatEntry {
    /// The canonical key whose L1 entry this reply was built from.
    pub canonical: CacheKey,
    /// The answer L1 held for `canonical` (compared by pointer).
    pub answer: Arc<Answer>,
    /// The reply to send, `x-cache: hit-l1`.
    pub reply: Reply,
    /// The request's V2 `id` (same bytes, same id), for the logs.
    pub request_id: Option<String>,
    ttl: Duration,
    weight: u32,
}

impl RepeatEntry {
    /// An entry for `reply`, living at most `ttl`. The reply's `x-cache`
    /// header is rewritten to `hit-l1`.
    pub fn new(
        canonical: CacheKey,
        answer: Arc<Answer>,
        mut reply: Reply,
        request_id: Option<String>,
        ttl: Duration,
    ) -> RepeatEntry {
        let hit = crate::reply::static_value(super::CacheStatus::HitL1.as_str());
        for (name, value) in &mut reply.headers {
            if *name == X_CACHE {
                if let Ok(hit) = &hit {
                    value.clone_from(hit);
                }
            }
        }
        let weight = u32::try_from(reply.body.len()).unwrap_or(u32::MAX).saturating_add(ENTRY_OVERHEAD);
        RepeatEntry { canonical, answer, reply, request_id, ttl, weight }
    }
}

/// Fixed per-entry overhead counted by the weigher (headers, key, id).
const ENTRY_OVERHEAD: u32 = 256;

struct EntryTtl;

impl Expiry<RepeatKey, Arc<RepeatEntry>> for EntryTtl {
    fn expire_after_create(
        &self,
        _key: &RepeatKey,
        entry: &Arc<RepeatEntry>,
        _at: Instant,
    ) -> Option<Duration> {
        Some(entry.ttl)
    }
}

/// The exact-repeat map, bounded in bytes.
pub struct RepeatCache {
    cache: Cache<RepeatKey, Arc<RepeatEntry>>,
}

impl RepeatCache {
    /// An empty map holding at most `max_bytes` of replies.
    pub fn new(max_bytes: u64) -> RepeatCache {
        let cache = Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|_key: &RepeatKey, entry: &Arc<RepeatEntry>| entry.weight)
            .expire_after(EntryTtl)
            .build();
        RepeatCache { cache }
    }

    /// The entry for `key`, if any (still to be checked against L1).
    pub async fn get(&self, key: &RepeatKey) -> Option<Arc<RepeatEntry>> {
        self.cache.get(key).await
    }

    /// Remembers `entry` under `key`.
    pub async fn insert(&self, key: RepeatKey, entry: RepeatEntry) {
        self.cache.insert(key, Arc::new(entry)).await;
    }

    /// Forgets `key` (its L1 entry is gone or was replaced).
    pub async fn invalidate(&self, key: &RepeatKey) {
        self.cache.invalidate(key).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(body: &'a [u8], tenant: Option<&'a str>, generation: u64) -> RepeatParts<'a> {
        RepeatParts { generation, name: "digits", version: None, tenant, header_length: None, body }
    }

    #[test]
    fn every_field_changes_the_key() {
        let base = RepeatKey::of(&parts(b"{}", None, 1));
        assert_eq!(base, RepeatKey::of(&parts(b"{}", None, 1)), "deterministic");
        assert_ne!(base, RepeatKey::of(&parts(b"{} ", None, 1)), "body");
        assert_ne!(base, RepeatKey::of(&parts(b"{}", Some("a"), 1)), "tenant");
        assert_ne!(base, RepeatKey::of(&parts(b"{}", None, 2)), "generation");
        let versioned = RepeatParts { version: Some("1"), ..parts(b"{}", None, 1) };
        assert_ne!(base, RepeatKey::of(&versioned), "version");
        let binary = RepeatParts { header_length: Some(b"2"), ..parts(b"{}", None, 1) };
        assert_ne!(base, RepeatKey::of(&binary), "binary header length");
    }

    #[test]
    fn fields_are_prefix_free() {
        // The same bytes split differently between name and body.
        let a = RepeatParts { name: "ab", ..parts(b"c", None, 1) };
        let b = RepeatParts { name: "a", ..parts(b"bc", None, 1) };
        assert_ne!(RepeatKey::of(&a), RepeatKey::of(&b));
        let none = RepeatParts { tenant: None, ..parts(b"", None, 1) };
        let empty = RepeatParts { tenant: Some(""), ..parts(b"", None, 1) };
        assert_ne!(RepeatKey::of(&none), RepeatKey::of(&empty), "absent vs empty");
    }

    #[test]
    fn stored_replies_say_hit_l1() {
        let answer = Arc::new(Answer {
            model: "m".into(),
            version: 1,
            device: router_policies::Device::Cpu,
            pool: "cpu".into(),
            reason: router_policies::Reason::Fixed,
            batch_size: 1,
            budget_ms: 50,
            degraded: false,
            confidence: None,
            outputs: Vec::new(),
        });
        let other = http::header::HeaderName::from_static("x-other");
        let reply = Reply::json(200, "{}").with_header(X_CACHE, "miss").with_header(other.clone(), "kept");
        let entry = RepeatEntry::new(CacheKey([0; 32]), answer, reply, None, Duration::from_secs(1));
        let headers: Vec<(String, &str)> =
            entry.reply.headers.iter().map(|(n, v)| (n.to_string(), v.to_str().unwrap())).collect();
        assert_eq!(headers, vec![("x-cache".to_string(), "hit-l1"), ("x-other".to_string(), "kept")]);
    }
}
