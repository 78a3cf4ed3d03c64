//! Client cache controls: the request's `Cache-Control` header.
//!
//! | directive | lookup | store | `x-cache` |
//! |---|---|---|---|
//! | (none) | L1, then L2 | yes | `hit-l1`, `hit-l2` or `miss` |
//! | `no-cache` | skipped | yes (refreshes the entry) | `bypass` |
//! | `no-store` | skipped | no | `bypass` |
//!
//! `no-store` wins when both are present. Directive names are matched
//! case-insensitively; other directives (`max-age`, ...) are ignored.

use http::header::CACHE_CONTROL;
use http::HeaderMap;

/// What the client allows the cache to do for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Read and write the cache.
    Normal,
    /// Do not read; compute and store the fresh answer.
    NoCache,
    /// Neither read nor write.
    NoStore,
}

impl Control {
    /// Parses every `Cache-Control` header of the request.
    pub fn from_headers(headers: &HeaderMap) -> Control {
        let mut control = Control::Normal;
        for value in headers.get_all(CACHE_CONTROL) {
            let Ok(text) = value.to_str() else { continue };
            for directive in text.split(',') {
                let name = directive.split('=').next().unwrap_or("").trim();
                if name.eq_ignore_ascii_case("no-store") {
                    return Control::NoStore;
                }
                if name.eq_ignore_ascii_case("no-cache") {
                    control = Control::NoCache;
                }
            }
        }
        control
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn parse(values: &[&'static str]) -> Control {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(CACHE_CONTROL, HeaderValue::from_static(v));
        }
        Control::from_headers(&headers)
    }

    #[test]
    fn directives() {
        assert_eq!(parse(&[]), Control::Normal);
        assert_eq!(parse(&["max-age=60"]), Control::Normal);
        assert_eq!(parse(&["No-Cache"]), Control::NoCache);
        assert_eq!(parse(&["max-age=0, no-cache"]), Control::NoCache);
        assert_eq!(parse(&["no-cache, no-store"]), Control::NoStore);
        assert_eq!(parse(&["no-cache", "no-store"]), Control::NoStore);
        assert_eq!(parse(&["no-storeX"]), Control::Normal);
    }
}
