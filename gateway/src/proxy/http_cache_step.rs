//! The prefix route's HTTP response cache's part in one proxied request ([`crate::prefix::http_cache`] keys and
//! holds entries, [`crate::prefix::http_cache_policy`] says what may be stored and
//! served): the lookup before proxying, the response collected for the
//! cache while it streams to the client, and its storage once complete.

use crate::cache::control::Control;
use crate::config::Limits;
use crate::http_io::read_body;
use crate::prefix::http_cache::{CachedResponse, RequestKey};
use crate::prefix::http_cache_policy::{storable, Credentials};
use crate::prefix::PrefixRoute;
use crate::reply::Reply;
use bytes::{Bytes, BytesMut};
use http::Method;
use pingora::http::ResponseHeader;
use pingora::prelude::Session;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A request looked up (or to be stored): its key and its unkeyed credentials.
#[derive(Debug, Clone, Copy)]
pub struct Lookup {
    key: [u8; 32],
    creds: Credentials,
}

/// The cache's part in one request.
#[derive(Debug)]
pub enum HttpCacheStep {
    /// The route has no cache.
    Off,
    /// Not looked up (`x-cache: bypass`); stored when set
    /// (`Cache-Control: no-cache`).
    Bypass(Option<Lookup>),
    /// Looked up, not found or not for this request (`x-cache: miss`).
    Miss(Lookup),
}

/// A response being collected for the cache.
#[derive(Debug)]
pub struct Filling {
    key: [u8; 32],
    stored: CachedResponse,
    body: BytesMut,
}

/// What the lookup of [`super::phases::start`] found.
#[derive(Debug)]
pub struct Looked {
    /// The cache's part in the rest of the request.
    pub step: HttpCacheStep,
    /// Request body bytes read for the key (re-sent upstream on a miss).
    pub request_bytes: u64,
    /// The status sent, when answered from the cache.
    pub answered: Option<u16>,
}

impl Looked {
    fn step(step: HttpCacheStep) -> Looked {
        Looked { step, request_bytes: 0, answered: None }
    }
}

/// Looks the request up in `route`'s cache; `host` is the client's `Host`.
pub async fn lookup(
    session: &mut Session,
    route: &PrefixRoute,
    host: Option<&str>,
    declared: Option<u64>,
    limits: &Limits,
) -> Result<Looked, Reply> {
    let Some(cache) = &route.cache else { return Ok(Looked::step(HttpCacheStep::Off)) };
    let header = session.req_header();
    let method = header.method.clone();
    let chunked = header.headers.contains_key(http::header::TRANSFER_ENCODING);
    let control = Control::from_headers(&header.headers);
    let body_fits = !chunked && declared.unwrap_or(0) <= cache.config.max_body_bytes as u64;
    if !cache.allows(&method) || !body_fits || control == Control::NoStore {
        cache.stats.bypass.fetch_add(1, Ordering::Relaxed);
        return Ok(Looked::step(HttpCacheStep::Bypass(None)));
    }
    let body = if declared.unwrap_or(0) > 0 {
        // Kept by Pingora (up to 64 KiB) and re-sent upstream on a miss.
        session.enable_retry_buffering();
        let read_limits = Limits { max_body_bytes: cache.config.max_body_bytes, ..limits.clone() };
        read_body(session, &read_limits).await.map_err(|e| Reply::error(&e))?
    } else {
        Bytes::new()
    };
    let request_bytes = body.len() as u64;
    let header = session.req_header();
    let key = cache.key(&RequestKey {
        upstream: &route.upstream.config.name,
        method: &method,
        path_and_query: header.uri.path_and_query().map_or("/", |p| p.as_str()),
        host,
        headers: &header.headers,
        body: &body,
    });
    let lookup = Lookup { key, creds: cache.credentials(&header.headers) };
    if control == Control::NoCache {
        cache.stats.bypass.fetch_add(1, Ordering::Relaxed);
        return Ok(Looked { step: HttpCacheStep::Bypass(Some(lookup)), request_bytes, answered: None });
    }
    let Some(hit) = cache.get(&key).await.filter(|hit| hit.sharing.serves(lookup.creds)) else {
        cache.stats.misses.fetch_add(1, Ordering::Relaxed);
        return Ok(Looked { step: HttpCacheStep::Miss(lookup), request_bytes, answered: None });
    };
    cache.stats.hits.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = write_cached(session, &hit, method == Method::HEAD).await {
        // The client's connection failed; nothing else can be sent on it.
        tracing::debug!(error = %e, "could not write a cached response");
    }
    Ok(Looked { step: HttpCacheStep::Miss(lookup), request_bytes, answered: Some(hit.status) })
}

async fn write_cached(session: &mut Session, hit: &CachedResponse, head_only: bool) -> pingora::Result<()> {
    let mut header = ResponseHeader::build(hit.status, Some(hit.headers.len() + 2))?;
    for (name, value) in &hit.headers {
        header.append_header(name.clone(), value.clone())?;
    }
    header.insert_header(http::header::CONTENT_LENGTH, hit.body.len().to_string())?;
    header.insert_header("x-cache", "hit-l1")?;
    let no_body = head_only || hit.body.is_empty();
    session.write_response_header(Box::new(header), no_body).await?;
    if !no_body {
        session.write_response_body(Some(hit.body.clone()), true).await?;
    }
    Ok(())
}

impl HttpCacheStep {
    /// Whether this response head of `route` will be stored (once its
    /// body is complete), and for how long and whom.
    pub fn filling(
        &self,
        route: &PrefixRoute,
        resp: &ResponseHeader,
        declared: Option<u64>,
    ) -> Option<Filling> {
        let lookup = match self {
            HttpCacheStep::Miss(lookup) | HttpCacheStep::Bypass(Some(lookup)) => *lookup,
            _ => return None,
        };
        let cache = route.cache.as_ref()?;
        if declared.is_some_and(|n| n > cache.config.max_entry_bytes as u64) {
            return None;
        }
        let storable = storable(cache, resp, lookup.creds)?;
        let headers = resp
            .headers
            .iter()
            .filter(|(n, _)| *n != http::header::TRANSFER_ENCODING && *n != http::header::CONTENT_LENGTH)
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        let stored = CachedResponse {
            status: resp.status.as_u16(),
            headers,
            body: Bytes::new(),
            ttl: storable.ttl,
            sharing: storable.sharing,
        };
        Some(Filling { key: lookup.key, stored, body: BytesMut::new() })
    }

    /// Adds `x-cache` to the response the client gets.
    pub fn mark(&self, resp: &mut ResponseHeader) -> pingora::Result<()> {
        let value = match self {
            HttpCacheStep::Off => return Ok(()),
            HttpCacheStep::Bypass(_) => "bypass",
            HttpCacheStep::Miss(_) => "miss",
        };
        resp.insert_header("x-cache", value)
    }
}

impl Filling {
    /// Adds a body chunk; `false` once the entry would pass `max_entry`
    /// bytes (the caller gives it up).
    pub fn push(&mut self, chunk: &[u8], max_entry: usize) -> bool {
        if self.body.len() + chunk.len() > max_entry {
            return false;
        }
        self.body.extend_from_slice(chunk);
        true
    }

    /// Stores the complete response in `route`'s cache in the background
    /// (never delays it).
    pub fn store(self, route: Arc<PrefixRoute>) {
        let Filling { key, mut stored, body } = self;
        stored.body = body.freeze();
        tokio::spawn(async move {
            if let Some(cache) = &route.cache {
                cache.put(key, stored).await;
            }
        });
    }
}
