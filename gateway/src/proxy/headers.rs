//! Header rules of proxied requests and responses.
//!
//! Request to the upstream (after Pingora has removed the standard
//! hop-by-hop fields and those named in `Connection`):
//! - path: the route's upstream path (prefix stripped unless configured);
//! - `Host`: the upstream address, or the client's with `preserve_host`;
//! - `X-Forwarded-For`: the client's address appended to any list it sent;
//! - `X-Forwarded-Proto`: `http`; `X-Forwarded-Host`: the client's `Host`;
//! - `X-Forwarded-Prefix`: the stripped prefix (so apps can build links).
//!
//! Response to the client: hop-by-hop fields are removed (`Connection`,
//! `Keep-Alive`, `Proxy-Connection`, `Proxy-Authenticate`, `TE`,
//! `Trailer`, `Upgrade` except on a 101, and the fields `Connection`
//! names). `Transfer-Encoding` is left to Pingora, which frames the body
//! it sends (chunked stays chunked, so streams pass as they arrive).

use super::routes::PrefixRoute;
use http::header::{self, HeaderName};
use http::Uri;
use pingora::http::{RequestHeader, ResponseHeader};
use std::net::SocketAddr;

/// What the upstream request needs from the client's request.
#[derive(Debug, Clone)]
pub struct Forwarding {
    /// The client's IP, when known.
    pub client_ip: Option<std::net::IpAddr>,
    /// The client's `Host`, when sent.
    pub host: Option<String>,
}

/// Rewrites the request for the upstream at `addr` (rules above).
pub fn forward_request(
    req: &mut RequestHeader,
    route: &PrefixRoute,
    addr: SocketAddr,
    from: &Forwarding,
) -> pingora::Result<()> {
    let path_and_query = req.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let target = route.upstream_path(&path_and_query);
    let uri: Uri = target.parse().map_err(|e| {
        pingora::Error::explain(
            pingora::ErrorType::InvalidHTTPHeader,
            format!("bad upstream path {target:?}: {e}"),
        )
    })?;
    req.set_uri(uri);
    if !route.config.preserve_host {
        req.insert_header(header::HOST, addr.to_string())?;
    }
    if let Some(ip) = from.client_ip {
        let chain = match req.headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prior) if !prior.trim().is_empty() => format!("{prior}, {ip}"),
            _ => ip.to_string(),
        };
        req.insert_header("x-forwarded-for", chain)?;
    }
    req.insert_header("x-forwarded-proto", "http")?;
    match &from.host {
        Some(host) => req.insert_header("x-forwarded-host", host.as_str())?,
        None => {
            req.remove_header("x-forwarded-host");
        }
    }
    if route.config.strip_prefix {
        req.insert_header("x-forwarded-prefix", route.config.prefix.trim_end_matches('/'))?;
    } else {
        req.remove_header("x-forwarded-prefix");
    }
    Ok(())
}

/// Removes the response's hop-by-hop fields (rules above).
pub fn strip_hop_by_hop(resp: &mut ResponseHeader) {
    let nominated: Vec<HeaderName> = resp
        .headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .filter(|name| *name != header::TRANSFER_ENCODING && *name != header::CONTENT_LENGTH)
        .collect();
    for name in nominated {
        resp.remove_header(&name);
    }
    for name in ["keep-alive", "proxy-connection"] {
        resp.remove_header(name);
    }
    resp.remove_header(&header::CONNECTION);
    resp.remove_header(&header::PROXY_AUTHENTICATE);
    resp.remove_header(&header::TE);
    resp.remove_header(&header::TRAILER);
    if resp.status != http::StatusCode::SWITCHING_PROTOCOLS {
        resp.remove_header(&header::UPGRADE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::proxy::routes::PrefixRoutes;
    use crate::upstream::Upstreams;
    use std::path::Path;

    fn route(extra: &str) -> std::sync::Arc<PrefixRoute> {
        let text = format!(
            "[[upstreams]]\nname = \"u\"\naddrs = [\"127.0.0.1:9\"]\n\
             [[prefix_routes]]\nname = \"a\"\nprefix = \"/apps/a/\"\nupstream = \"u\"\n{extra}"
        );
        let config = parse(&text, Path::new("/")).unwrap();
        let routes = PrefixRoutes::new(&config.proxy, &Upstreams::new(&config.proxy));
        routes.find("/apps/a/x").unwrap().clone()
    }

    #[test]
    fn requests_get_the_upstream_path_host_and_forwarding_fields() {
        let r = route("");
        let mut req = RequestHeader::build("GET", b"/apps/a/x?q=1", None).unwrap();
        req.insert_header("host", "gw.example").unwrap();
        req.insert_header("x-forwarded-for", "10.0.0.1").unwrap();
        let from =
            Forwarding { client_ip: Some("127.0.0.7".parse().unwrap()), host: Some("gw.example".into()) };
        forward_request(&mut req, &r, "127.0.0.1:9".parse().unwrap(), &from).unwrap();
        assert_eq!(req.uri.to_string(), "/x?q=1");
        let h = |n: &str| req.headers.get(n).unwrap().to_str().unwrap().to_string();
        assert_eq!(h("host"), "127.0.0.1:9");
        assert_eq!(h("x-forwarded-for"), "10.0.0.1, 127.0.0.7");
        assert_eq!(h("x-forwarded-host"), "gw.example");
        assert_eq!(h("x-forwarded-proto"), "http");
        assert_eq!(h("x-forwarded-prefix"), "/apps/a");

        let kept = route("preserve_host = true\nstrip_prefix = false\n");
        let mut req = RequestHeader::build("GET", b"/apps/a/x", None).unwrap();
        req.insert_header("host", "gw.example").unwrap();
        forward_request(&mut req, &kept, "127.0.0.1:9".parse().unwrap(), &from).unwrap();
        assert_eq!(req.uri.to_string(), "/apps/a/x");
        assert_eq!(req.headers.get("host").unwrap(), "gw.example");
        assert!(req.headers.get("x-forwarded-prefix").is_none());
    }

    #[test]
    fn responses_lose_hop_by_hop_fields_only() {
        let mut resp = ResponseHeader::build(200, None).unwrap();
        for (n, v) in [
            ("connection", "keep-alive, x-secret"),
            ("keep-alive", "timeout=5"),
            ("x-secret", "1"),
            ("upgrade", "h2c"),
            ("transfer-encoding", "chunked"),
            ("content-type", "text/event-stream"),
        ] {
            resp.append_header(n, v).unwrap();
        }
        strip_hop_by_hop(&mut resp);
        let names: Vec<&str> = resp.headers.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["transfer-encoding", "content-type"], "{names:?}");
    }
}
