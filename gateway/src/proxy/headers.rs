//! Header rules of proxied requests and responses.
//!
//! Request to the upstream (after Pingora has removed the standard
//! hop-by-hop fields and those named in `Connection`):
//! - path: the route's upstream path (prefix stripped unless configured);
//! - `Host`: the upstream address, or the client's with `preserve_host`;
//! - `X-Forwarded-For`: the client's address appended to any list it sent;
//! - `X-Forwarded-Proto`: `http`; `X-Forwarded-Host`: the client's `Host`;
//! - `X-Forwarded-Prefix`: the stripped prefix (so apps can build links);
//! - `traceparent` (and `tracestate`): when the request is traced, the
//!   attempt's `upstream_call` span replaces the client's; otherwise the
//!   client's pass through unchanged.
//!
//! Response to the client: hop-by-hop fields are removed (`Connection`,
//! `Keep-Alive`, `Proxy-Connection`, `Proxy-Authenticate`, `TE`,
//! `Trailer`, `Upgrade` except on a 101, and the fields `Connection`
//! names). `Transfer-Encoding` is left to Pingora, which frames the body
//! it sends (chunked stays chunked, so streams pass as they arrive).

use crate::prefix::PrefixRoute;
use crate::telemetry::propagation::{trace_headers, TRACESTATE};
use http::header::{self, HeaderName};
use http::Uri;
use pingora::http::{RequestHeader, ResponseHeader};
use std::net::SocketAddr;
use tracing::Span;

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
        req.insert_header(header::HOST, route.upstream.config.host_header(addr))?;
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

/// Makes the upstream request a child of `span` (the attempt's
/// `upstream_call`): its `traceparent` and `tracestate` replace the
/// client's. Nothing changes when `span` is not traced.
pub fn set_trace_context(req: &mut RequestHeader, span: &Span) -> pingora::Result<()> {
    let headers = trace_headers(span);
    if headers.is_empty() {
        return Ok(());
    }
    req.remove_header(TRACESTATE);
    for (name, value) in headers {
        req.insert_header(name, value)?;
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
    use crate::prefix::PrefixRoutes;
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
    fn a_traced_attempt_replaces_the_clients_trace_context() {
        use crate::telemetry::propagation::{remote_parent, TRACEPARENT};
        use crate::telemetry::spans::{upstream_call, UpstreamCall};
        use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        use tracing_subscriber::layer::SubscriberExt;
        let client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let client_request = || {
            let mut req = RequestHeader::build("GET", b"/apps/a/x", None).unwrap();
            req.insert_header(TRACEPARENT, client).unwrap();
            req.insert_header(TRACESTATE, "vendor=client").unwrap();
            req
        };
        let call = UpstreamCall {
            upstream: "u",
            addr: "127.0.0.1:9".parse().unwrap(),
            via: "proxy",
            route: Some("a"),
            model: None,
        };

        // Not traced: the client's headers pass through.
        let mut req = client_request();
        set_trace_context(&mut req, &upstream_call(None, &call)).unwrap();
        assert_eq!(req.headers[TRACEPARENT], client);
        assert_eq!(req.headers[TRACESTATE], "vendor=client");

        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let mut incoming = http::HeaderMap::new();
            incoming.insert(TRACEPARENT, http::HeaderValue::from_static(client));
            let request = tracing::info_span!("request");
            request.set_parent(remote_parent(&incoming).unwrap()).unwrap();
            let span = upstream_call(Some(&request), &call);
            let mut req = client_request();
            set_trace_context(&mut req, &span).unwrap();
            let id = span.context().span().span_context().span_id();
            let want = format!("00-0af7651916cd43dd8448eb211c80319c-{id}-01");
            assert_eq!(req.headers[TRACEPARENT], want.as_str());
            assert_eq!(req.headers.get_all(TRACEPARENT).iter().count(), 1);
            assert!(req.headers.get(TRACESTATE).is_none(), "the client's tracestate is not ours to forward");
        });
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
