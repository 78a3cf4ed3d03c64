//! The cache's part in one proxied request ([`crate::prefix::cache`] keys and
//! holds entries, [`crate::prefix::cache_policy`] says what may be stored and
//! served): the lookup before proxying, the response collected for the
//! cache while it streams to the client, and its storage once complete.

use crate::prefix::cache::{CachedResponse, RequestKey};
use crate::prefix::cache_policy::{storable, Credentials};
use super::phases::ProxyCtx;
use crate::cache::control::Control;
use crate::config::Limits;
use crate::http_io::read_body;
use crate::reply::Reply;
use bytes::{Bytes, BytesMut};
use http::Method;
use pingora::http::ResponseHeader;
use pingora::prelude::Session;
use std::sync::atomic::Ordering;

/// A request looked up (or to be stored): its key and its unkeyed credentials.
#[derive(Debug, Clone, Copy)]
pub struct Lookup {
    key: [u8; 32],
    creds: Credentials,
}

/// The cache's part in one request.
#[derive(Debug)]
pub enum CacheStep {
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

/// The lookup of [`super::phases::start`]: `Some(status)` when answered
/// from the cache.
pub async fn lookup(
    session: &mut Session,
    ctx: &mut ProxyCtx,
    declared: Option<u64>,
    limits: &Limits,
) -> Result<Option<u16>, Reply> {
    let Some(cache) = &ctx.route.cache else { return Ok(None) };
    let header = session.req_header();
    let method = header.method.clone();
    let chunked = header.headers.contains_key(http::header::TRANSFER_ENCODING);
    let control = Control::from_headers(&header.headers);
    let body_fits = !chunked && declared.unwrap_or(0) <= cache.config.max_body_bytes as u64;
    if !cache.allows(&method) || !body_fits || control == Control::NoStore {
        cache.stats.bypass.fetch_add(1, Ordering::Relaxed);
        ctx.cache = CacheStep::Bypass(None);
        return Ok(None);
    }
    let body = if declared.unwrap_or(0) > 0 {
        // Kept by Pingora (up to 64 KiB) and re-sent upstream on a miss.
        session.enable_retry_buffering();
        let read_limits = Limits { max_body_bytes: cache.config.max_body_bytes, ..limits.clone() };
        read_body(session, &read_limits).await.map_err(|e| Reply::error(&e))?
    } else {
        Bytes::new()
    };
    ctx.request_bytes = body.len() as u64;
    let header = session.req_header();
    let key = cache.key(&RequestKey {
        upstream: &ctx.route.upstream.config.name,
        method: &method,
        path_and_query: header.uri.path_and_query().map_or("/", |p| p.as_str()),
        host: ctx.forwarding.host.as_deref(),
        headers: &header.headers,
        body: &body,
    });
    let lookup = Lookup { key, creds: cache.credentials(&header.headers) };
    if control == Control::NoCache {
        cache.stats.bypass.fetch_add(1, Ordering::Relaxed);
        ctx.cache = CacheStep::Bypass(Some(lookup));
        return Ok(None);
    }
    let Some(hit) = cache.get(&key).await.filter(|hit| hit.sharing.serves(lookup.creds)) else {
        cache.stats.misses.fetch_add(1, Ordering::Relaxed);
        ctx.cache = CacheStep::Miss(lookup);
        return Ok(None);
    };
    cache.stats.hits.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = write_cached(session, &hit, method == Method::HEAD).await {
        // The client's connection failed; nothing else can be sent on it.
        tracing::debug!(error = %e, "could not write a cached response");
    }
    Ok(Some(hit.status))
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

impl ProxyCtx {
    /// Whether this response head will be stored (once its body is
    /// complete), and for how long and whom.
    pub(super) fn cache_fill(&self, resp: &ResponseHeader, declared: Option<u64>) -> Option<Filling> {
        let lookup = match self.cache {
            CacheStep::Miss(lookup) | CacheStep::Bypass(Some(lookup)) => lookup,
            _ => return None,
        };
        let cache = self.route.cache.as_ref()?;
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
    pub fn response(&self, resp: &mut ResponseHeader) -> pingora::Result<()> {
        let value = match self.cache {
            CacheStep::Off => return Ok(()),
            CacheStep::Bypass(_) => "bypass",
            CacheStep::Miss(_) => "miss",
        };
        resp.insert_header("x-cache", value)
    }

    /// Adds a body chunk to the entry being filled; gives it up past
    /// `max_entry_bytes`.
    pub(super) fn fill(&mut self, chunk: &[u8]) {
        let max_entry = self.route.cache.as_ref().map_or(0, |c| c.config.max_entry_bytes);
        if let Some(filling) = &mut self.filling {
            if filling.body.len() + chunk.len() > max_entry {
                self.filling = None;
            } else {
                filling.body.extend_from_slice(chunk);
            }
        }
    }

    /// Stores a complete response in the background (never delays it).
    pub(super) fn store(&mut self) {
        let Some(Filling { key, mut stored, body }) = self.filling.take() else { return };
        stored.body = body.freeze();
        let route = self.route.clone();
        tokio::spawn(async move {
            if let Some(cache) = &route.cache {
                cache.put(key, stored).await;
            }
        });
    }
}
