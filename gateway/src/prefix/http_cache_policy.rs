//! What a prefix route's HTTP response cache may store and whom it may serve: the rules
//! of a shared cache (RFC 9111), since one entry answers every client.
//!
//! A response is stored ([`storable`]) only when:
//! 1. its status is 200 (errors and partial content never);
//! 2. it has no `Set-Cookie`, no `Cache-Control: no-store / no-cache /
//!    private`, and no `Vary` beyond the keyed headers (`Vary: *` never);
//! 3. it is marked cacheable (`s-maxage` or `max-age` > 0, or `public`),
//!    or the route sets `force = true`;
//! 4. the request carried no credentials it is not keyed on: with an
//!    `Authorization` header (not listed in the route's `headers`), the
//!    response must say `public`, `s-maxage` or `must-revalidate` (RFC
//!    9111, 3.5); with a `Cookie` header (not listed), `public`. A shared
//!    cache that does not key the cookie cannot tell a page personalised
//!    by it from one that is not, so only an explicit `public` makes it
//!    shareable. `force` never overrides this rule.
//!
//! An entry is served ([`Sharing::serves`]) to a request with such
//! credentials only when the entry's response would have been stored for
//! it (rule 4): an answer stored for anonymous requests with a plain
//! `max-age` never reaches a request that carries `Authorization`, whose
//! answer may differ. Such a request goes to the upstream (`x-cache: miss`).
//!
//! The entry lives for the route's `ttl_s`, or less when the response's
//! `s-maxage` / `max-age` (less its `Age`) says so.

use super::http_cache::PrefixCache;
pub use super::sharing::{Credentials, Sharing};
use http::header::{AGE, AUTHORIZATION, CACHE_CONTROL, COOKIE, SET_COOKIE, VARY};
use http::HeaderMap;
use pingora::http::ResponseHeader;
use std::time::Duration;

/// A response that may be stored: for how long, and for whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Storable {
    /// How long it is served.
    pub ttl: Duration,
    /// Who it may be served to.
    pub sharing: Sharing,
}

/// The `Cache-Control` directives the rules read.
#[derive(Debug, Default)]
struct Directives {
    forbidden: bool,
    public: bool,
    must_revalidate: bool,
    max_age: Option<u64>,
    s_maxage: Option<u64>,
}

impl Directives {
    /// Parses every `Cache-Control` field; `None` when one is not text.
    fn parse(headers: &HeaderMap) -> Option<Directives> {
        let mut d = Directives::default();
        for value in headers.get_all(CACHE_CONTROL) {
            for directive in value.to_str().ok()?.split(',') {
                let mut parts = directive.trim().splitn(2, '=');
                let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
                let seconds = parts.next().and_then(|v| v.trim().trim_matches('"').parse::<u64>().ok());
                match name.as_str() {
                    "no-store" | "no-cache" | "private" => d.forbidden = true,
                    "public" => d.public = true,
                    "must-revalidate" => d.must_revalidate = true,
                    "max-age" => d.max_age = seconds,
                    "s-maxage" => d.s_maxage = seconds,
                    _ => {}
                }
            }
        }
        Some(d)
    }
}

impl PrefixCache {
    /// The credentials in `headers` that this route does not key.
    pub fn credentials(&self, headers: &HeaderMap) -> Credentials {
        let unkeyed = |name| headers.contains_key(&name) && !self.config.headers.contains(&name);
        Credentials { authorization: unkeyed(AUTHORIZATION), cookie: unkeyed(COOKIE) }
    }
}

/// Whether `resp`, the answer to a request with `creds`, may be stored by
/// `cache`, and how (rules 1-4 of the module docs).
pub fn storable(cache: &PrefixCache, resp: &ResponseHeader, creds: Credentials) -> Option<Storable> {
    if resp.status != http::StatusCode::OK || resp.headers.contains_key(SET_COOKIE) {
        return None;
    }
    for vary in resp.headers.get_all(VARY) {
        for name in vary.to_str().ok()?.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "*" || !cache.config.headers.iter().any(|k| k.as_str().eq_ignore_ascii_case(name)) {
                return None;
            }
        }
    }
    let d = Directives::parse(&resp.headers)?;
    if d.forbidden {
        return None;
    }
    let sharing = Sharing {
        with_authorization: d.public || d.s_maxage.is_some() || d.must_revalidate,
        with_cookie: d.public,
    };
    if !sharing.serves(creds) {
        return None;
    }
    let age = resp.headers.get(AGE).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok()).unwrap_or(0);
    let ttl = match d.s_maxage.or(d.max_age) {
        Some(lifetime) => Duration::from_secs(lifetime.saturating_sub(age)).min(cache.config.ttl),
        None if d.public || cache.config.force => cache.config.ttl,
        None => return None,
    };
    (!ttl.is_zero()).then_some(Storable { ttl, sharing })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::prefix_route_section::PrefixCacheConfig;
    use http::{HeaderName, HeaderValue, Method};

    fn cache(force: bool, keyed: &[&'static str]) -> PrefixCache {
        PrefixCache::new(
            "r",
            PrefixCacheConfig {
                ttl: Duration::from_secs(60),
                methods: vec![Method::GET],
                headers: keyed.iter().map(|h| HeaderName::from_static(h)).collect(),
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

    const ANON: Credentials = Credentials { authorization: false, cookie: false };
    const AUTH: Credentials = Credentials { authorization: true, cookie: false };
    const COOKIE_ONLY: Credentials = Credentials { authorization: false, cookie: true };

    fn ttl(c: &PrefixCache, h: &[(&str, &str)], creds: Credentials) -> Option<Duration> {
        storable(c, &response(200, h), creds).map(|s| s.ttl)
    }

    #[test]
    fn only_marked_or_forced_200s_are_stored() {
        let c = cache(false, &["accept"]);
        let t = |h: &[(&str, &str)]| ttl(&c, h, ANON);
        assert_eq!(t(&[("cache-control", "max-age=5")]), Some(Duration::from_secs(5)));
        assert_eq!(t(&[("cache-control", "public, max-age=600, s-maxage=9")]), Some(Duration::from_secs(9)));
        assert_eq!(t(&[("cache-control", "max-age=600")]), Some(Duration::from_secs(60)), "route ttl caps");
        assert_eq!(t(&[("cache-control", "max-age=30"), ("age", "25")]), Some(Duration::from_secs(5)));
        assert_eq!(t(&[("cache-control", "max-age=30"), ("age", "30")]), None, "already stale");
        assert_eq!(t(&[("cache-control", "public")]), Some(Duration::from_secs(60)));
        assert_eq!(t(&[]), None, "unmarked");
        assert_eq!(t(&[("cache-control", "max-age=0")]), None);
        assert_eq!(t(&[("cache-control", "private, max-age=60")]), None);
        assert_eq!(t(&[("cache-control", "max-age=60"), ("cache-control", "no-store")]), None);
        assert_eq!(t(&[("cache-control", "max-age=60"), ("set-cookie", "a=b")]), None);
        assert_eq!(t(&[("cache-control", "max-age=60"), ("vary", "Accept")]), Some(Duration::from_secs(60)));
        assert_eq!(t(&[("cache-control", "max-age=60"), ("vary", "Accept, Cookie")]), None);
        assert_eq!(t(&[("cache-control", "max-age=60"), ("vary", "*")]), None);
        assert!(
            storable(&c, &response(500, &[("cache-control", "max-age=60")]), ANON).is_none(),
            "never errors"
        );
        assert!(storable(&c, &response(206, &[("cache-control", "max-age=60")]), ANON).is_none());
        let forced = cache(true, &[]);
        assert_eq!(ttl(&forced, &[], ANON), Some(Duration::from_secs(60)));
        assert_eq!(ttl(&forced, &[("cache-control", "no-store")], ANON), None);
        assert!(storable(&forced, &response(404, &[]), ANON).is_none());
    }

    #[test]
    fn credentials_need_an_explicit_shared_answer() {
        let c = cache(true, &[]);
        let stored = |h: &[(&str, &str)], creds| ttl(&c, h, creds).is_some();
        assert!(!stored(&[("cache-control", "max-age=60")], AUTH), "a plain max-age is not enough");
        assert!(!stored(&[], AUTH), "force does not override it");
        for shared in ["public", "s-maxage=60", "max-age=60, must-revalidate"] {
            assert!(stored(&[("cache-control", shared)], AUTH), "{shared}");
        }
        assert!(!stored(&[("cache-control", "max-age=60")], COOKIE_ONLY));
        assert!(
            !stored(&[("cache-control", "s-maxage=60")], COOKIE_ONLY),
            "only public shares a cookie's answer"
        );
        assert!(stored(&[("cache-control", "public, max-age=60")], COOKIE_ONLY));

        let anonymous = storable(&c, &response(200, &[("cache-control", "max-age=60")]), ANON).unwrap();
        assert!(anonymous.sharing.serves(ANON));
        assert!(!anonymous.sharing.serves(AUTH) && !anonymous.sharing.serves(COOKIE_ONLY));
        let s_maxage = storable(&c, &response(200, &[("cache-control", "s-maxage=60")]), AUTH).unwrap();
        assert!(s_maxage.sharing.serves(AUTH) && !s_maxage.sharing.serves(COOKIE_ONLY));
    }

    #[test]
    fn keyed_credentials_are_not_shared_so_need_nothing() {
        let c = cache(false, &["cookie", "authorization"]);
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        h.insert(COOKIE, HeaderValue::from_static("s=1"));
        assert_eq!(c.credentials(&h), ANON);
        assert_eq!(cache(false, &["cookie"]).credentials(&h), AUTH);
        assert_eq!(cache(false, &[]).credentials(&h), Credentials { authorization: true, cookie: true });
        assert_eq!(cache(false, &[]).credentials(&HeaderMap::new()), ANON);
    }
}
