//! The operator console: a web page served by the admin listener at
//! `/console/`, with live views of routes, pools, the cache, upstreams,
//! streams, cascade calibration, rollouts and tenants, and a form that previews a route edit
//! (diff and replay) before applying it through the reload path.
//!
//! The page and its assets are static files embedded in the binary
//! (`gateway/console/`, plus uPlot for the charts, placed by `build.rs`);
//! they hold no data and are served to anyone who can reach the admin
//! listener. Every number on the page comes from the token-protected admin
//! API (`/admin/stats`, `/admin/config`, `/admin/config/edit`,
//! `/admin/replay`), which the page calls with the token the operator
//! types in (kept in the tab's `sessionStorage`, sent as a bearer header,
//! so no cookie can be replayed across sites).

use super::{handler, Access, AdminApp};
use crate::reply::Reply;
use bytes::Bytes;
use http::Method;

const INDEX: &str = include_str!("../../console/index.html");
const SCRIPT: &str = include_str!("../../console/console.js");
const TENANTS_SCRIPT: &str = include_str!("../../console/tenants.js");
const STYLE: &str = include_str!("../../console/console.css");
const CHARTS: &str = include_str!(concat!(env!("OUT_DIR"), "/uplot.js"));
const CHARTS_STYLE: &str = include_str!(concat!(env!("OUT_DIR"), "/uplot.css"));
const CHARTS_LICENSE: &str = include_str!(concat!(env!("OUT_DIR"), "/uplot-license.txt"));

/// Scripts and styles only from the admin listener itself; no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Registers the console's pages on `app`.
pub fn register(app: &mut AdminApp) {
    // The page's asset paths are relative: `/console` moves to `/console/`.
    app.route(
        Method::GET,
        "/console",
        Access::Public,
        handler(|_| async { Reply::empty(308).with_static_header(http::header::LOCATION, "/console/") }),
    );
    let assets: [(&'static str, &'static str, &'static str); 7] = [
        ("/console/", "text/html; charset=utf-8", INDEX),
        ("/console/console.js", "text/javascript; charset=utf-8", SCRIPT),
        ("/console/tenants.js", "text/javascript; charset=utf-8", TENANTS_SCRIPT),
        ("/console/console.css", "text/css; charset=utf-8", STYLE),
        ("/console/uplot.js", "text/javascript; charset=utf-8", CHARTS),
        ("/console/uplot.css", "text/css; charset=utf-8", CHARTS_STYLE),
        ("/console/uplot-license.txt", "text/plain; charset=utf-8", CHARTS_LICENSE),
    ];
    for (path, content_type, text) in assets {
        app.route(
            Method::GET,
            path,
            Access::Public,
            handler(move |_| async move { asset(content_type, text) }),
        );
    }
}

fn asset(content_type: &'static str, text: &'static str) -> Reply {
    use http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS};
    let reply = Reply {
        status: 200,
        headers: Vec::with_capacity(4),
        content_type,
        body: Bytes::from_static(text.as_bytes()),
        error_label: None,
    };
    reply
        .with_static_header(CONTENT_SECURITY_POLICY, CSP)
        .with_static_header(X_CONTENT_TYPE_OPTIONS, "nosniff")
        .with_static_header(CACHE_CONTROL, "no-cache")
        .with_static_header(REFERRER_POLICY, "no-referrer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        for src in ["console.js", "tenants.js", "console.css", "uplot.js", "uplot.css"] {
            assert!(INDEX.contains(&format!("\"{src}\"")), "index.html does not load {src}");
        }
        assert!(!INDEX.contains("http://") && !INDEX.contains("https://"), "no asset from elsewhere");
        assert!(!INDEX.contains("<script>"), "no inline script (the CSP forbids it)");
    }
}
