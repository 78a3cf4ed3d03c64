//! The prefix-route table: which route a path belongs to (the longest
//! matching prefix), and the path the upstream sees.
//!
//! Matching is by path segment: prefix `/apps/foo/` (or `/apps/foo`)
//! matches `/apps/foo`, `/apps/foo/` and `/apps/foo/x`, never
//! `/apps/foobar`. Paths under `/v2` never reach this table (the V2 API is
//! the gateway's own; config refuses prefixes there).

use super::http_cache::PrefixCache;
use crate::config::{PrefixRouteConfig, ProxyConfig};
use crate::reply::Reply;
use crate::upstream::{Upstream, Upstreams};
use std::sync::Arc;

/// One prefix route, ready to serve.
#[derive(Debug)]
pub struct PrefixRoute {
    /// Its config.
    pub config: PrefixRouteConfig,
    /// The prefix without its trailing `/`, for matching.
    stem: String,
    /// The upstream serving it.
    pub upstream: Arc<Upstream>,
    /// Its response cache, when configured.
    pub cache: Option<PrefixCache>,
}

impl PrefixRoute {
    /// Whether `path` is under this route's prefix.
    pub fn matches(&self, path: &str) -> bool {
        match path.strip_prefix(self.stem.as_str()) {
            Some(rest) => rest.is_empty() || rest.starts_with('/') || self.stem.is_empty(),
            None => false,
        }
    }

    /// The path and query the upstream is sent: the prefix removed when
    /// `strip_prefix` (always leaving at least `/`), else unchanged.
    pub fn upstream_path(&self, path_and_query: &str) -> String {
        if !self.config.strip_prefix {
            return path_and_query.to_string();
        }
        let rest = path_and_query.strip_prefix(self.stem.as_str()).unwrap_or(path_and_query);
        if rest.starts_with('/') {
            rest.to_string()
        } else {
            format!("/{rest}")
        }
    }
}

/// Every prefix route of a config, longest prefix first.
#[derive(Debug, Default)]
pub struct PrefixRoutes {
    routes: Vec<Arc<PrefixRoute>>,
}

impl PrefixRoutes {
    /// The routes of `config` over the live `upstreams` (a route whose
    /// upstream is missing, which validation prevents, is left out).
    pub fn new(config: &ProxyConfig, upstreams: &Upstreams) -> PrefixRoutes {
        let mut routes: Vec<Arc<PrefixRoute>> = config
            .prefix_routes
            .iter()
            .filter_map(|r| {
                let upstream = upstreams.get(&r.upstream)?.clone();
                Some(Arc::new(PrefixRoute {
                    stem: r.prefix.trim_end_matches('/').to_string(),
                    cache: r.cache.as_ref().map(|c| PrefixCache::new(&r.name, c.clone())),
                    config: r.clone(),
                    upstream,
                }))
            })
            .collect();
        routes.sort_by_key(|r| std::cmp::Reverse(r.stem.len()));
        PrefixRoutes { routes }
    }

    /// The route serving a request for `path`, if any; a 400 reply when
    /// the path has a dot-segment (module docs). Called before anything
    /// else routes the request.
    pub fn route(&self, path: &str) -> Result<Option<&Arc<PrefixRoute>>, Reply> {
        if has_dot_segment(path) {
            let message = "the request path has a dot-segment ('.' or '..', also percent-encoded): \
                           send the path normalised";
            let mut reply = Reply::json_value(400, &serde_json::json!({ "error": message }));
            reply.error_label = Some("bad_path");
            return Err(reply);
        }
        Ok(self.find(path))
    }

    /// The route serving `path`, if any (no dot-segment check: see
    /// [`PrefixRoutes::route`]).
    pub fn find(&self, path: &str) -> Option<&Arc<PrefixRoute>> {
        if self.routes.is_empty() || path == "/v2" || path.starts_with("/v2/") {
            return None;
        }
        self.routes.iter().find(|r| r.matches(path))
    }

    /// Every route, longest prefix first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<PrefixRoute>> {
        self.routes.iter()
    }
}

/// Whether `path` has a dot-segment, decoded as the module docs say.
pub fn has_dot_segment(path: &str) -> bool {
    if !path.contains('.') && !path.contains('%') {
        return false;
    }
    path.split('/').any(|segment| {
        let decoded = decode_for_dots(segment);
        decoded.split('/').any(|piece| {
            let name = piece.split(';').next().unwrap_or(piece);
            name == "." || name == ".."
        })
    })
}

/// `segment` with `%2e` decoded to `.`, and `%2f`, `%5c` and `\` to `/`;
/// every other byte (and escape) unchanged.
fn decode_for_dots(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = String::with_capacity(segment.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = bytes.get(i..i + 3).filter(|e| e[0] == b'%').map(|e| e[1..].to_ascii_lowercase());
        match escape.as_deref() {
            Some(b"2e") => out.push('.'),
            Some(b"2f") | Some(b"5c") => out.push('/'),
            _ => {
                // Escapes and UTF-8 sequences are copied through unchanged.
                let c = segment[i..].chars().next().unwrap_or('\u{fffd}');
                out.push(if c == '\\' { '/' } else { c });
                i += c.len_utf8();
                continue;
            }
        }
        i += 3;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    fn routes(extra: &str) -> PrefixRoutes {
        let text = format!(
            "[[upstreams]]\nname = \"u\"\naddrs = [\"127.0.0.1:1\"]\n\
             [[prefix_routes]]\nname = \"a\"\nprefix = \"/apps/a/\"\nupstream = \"u\"\n\
             [[prefix_routes]]\nname = \"deep\"\nprefix = \"/apps/a/deep\"\nupstream = \"u\"\nstrip_prefix = false\n{extra}"
        );
        let config = parse(&text, Path::new("/")).unwrap();
        PrefixRoutes::new(&config.proxy, &Upstreams::new(&config.proxy))
    }

    #[test]
    fn longest_prefix_by_segment() {
        let r = routes("");
        assert_eq!(r.find("/apps/a/x").unwrap().config.name, "a");
        assert_eq!(r.find("/apps/a").unwrap().config.name, "a");
        assert_eq!(r.find("/apps/a/deep/x").unwrap().config.name, "deep");
        assert_eq!(r.find("/apps/a/deeper").unwrap().config.name, "a", "segments, not characters");
        assert!(r.find("/apps/ab").is_none());
        assert!(r.find("/v2/models/m").is_none());
    }

    #[test]
    fn dot_segments_are_refused_in_every_spelling() {
        for path in [
            "/apps/a/../../secret",
            "/apps/a/..",
            "/apps/a/./x",
            "/apps/a/%2e%2E/x",
            "/apps/a/.%2e/x",
            "/apps/a/..%2fx",
            "/apps/a/x%2F..%2Fy",
            "/apps/a/..%5cx",
            "/apps/a/..\\x",
            "/apps/a/..;jsessionid=1/x",
            "/..",
        ] {
            assert!(has_dot_segment(path), "{path}");
            assert!(routes("").route(path).is_err(), "{path}");
        }
        for path in
            ["/apps/a/x", "/apps/a/a.b/..c/c../.hidden", "/apps/a/x%2Fy", "/apps/a/%252e%252e", "/", "/é/.."]
        {
            assert_eq!(has_dot_segment(path), path.ends_with(".."), "{path}");
        }
        assert_eq!(routes("").route("/apps/a/x").unwrap().unwrap().config.name, "a");
    }

    #[test]
    fn catch_all_never_takes_the_v2_api() {
        let r = routes("[[prefix_routes]]\nname = \"all\"\nprefix = \"/\"\nupstream = \"u\"\n");
        assert_eq!(r.find("/anything").unwrap().config.name, "all");
        assert_eq!(r.find("/").unwrap().config.name, "all");
        assert!(r.find("/v2").is_none() && r.find("/v2/health/ready").is_none());
    }

    #[test]
    fn upstream_paths_strip_the_prefix_and_keep_the_query() {
        let r = routes("");
        let a = r.find("/apps/a/x").unwrap();
        assert_eq!(a.upstream_path("/apps/a/x/y?q=1"), "/x/y?q=1");
        assert_eq!(a.upstream_path("/apps/a"), "/");
        assert_eq!(a.upstream_path("/apps/a?q=1"), "/?q=1");
        let deep = r.find("/apps/a/deep").unwrap();
        assert_eq!(deep.upstream_path("/apps/a/deep/z?k"), "/apps/a/deep/z?k");
    }
}
