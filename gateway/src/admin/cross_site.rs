//! The cross-site check of state-changing admin requests when no admin
//! token is configured (the loopback default), against cross-site request
//! forgery: any web page a browser opens can send a "simple" POST to
//! `http://127.0.0.1:9000/...` (`Content-Type: text/plain`, no preflight)
//! and, without a token to check, nothing else would stop it.
//!
//! A POST passes when all of these hold:
//!
//! 1. `Sec-Fetch-Site`, when sent, is `same-origin` (the console's own
//!    calls) or `none` (typed by the user);
//! 2. `Origin`, when sent, is the listener as the browser addressed it:
//!    `http://` or `https://` followed by the request's `Host`;
//! 3. a non-empty body is `Content-Type: application/json` (or
//!    `application/toml`, `/admin/replay`'s candidate config); an empty
//!    body has no `Content-Type` or one of those two. A browser can send
//!    neither cross-site without a CORS preflight, which the admin
//!    listener never grants; an empty body without `Content-Type` comes
//!    from fetch-like calls, which always carry `Origin` (rule 2).
//!
//! Non-browser clients (curl, scripts) send no `Origin` nor
//! `Sec-Fetch-Site` and pass with a JSON body or none. With a token
//! configured this check is not needed (a browser cannot attach the
//! bearer header cross-site) and the token check applies instead.
//! Refusals are 403.

use crate::error::GatewayError;
use http::header::{CONTENT_TYPE, HOST, ORIGIN};
use http::HeaderMap;

/// The `Content-Type`s a state-changing admin request may carry.
pub const ACCEPTED_TYPES: [&str; 2] = ["application/json", "application/toml"];

/// Checks a state-changing request from a caller without the token.
pub fn check_same_origin(headers: &HeaderMap, body_is_empty: bool) -> Result<(), GatewayError> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("?");
        if !site.eq_ignore_ascii_case("same-origin") && !site.eq_ignore_ascii_case("none") {
            return Err(refusal(format!("Sec-Fetch-Site is {site:?}")));
        }
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().unwrap_or("?");
        let host = headers.get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        let same = ["http://", "https://"].iter().any(|scheme| {
            origin.len() == scheme.len() + host.len()
                && origin.get(..scheme.len()).is_some_and(|s| s.eq_ignore_ascii_case(scheme))
                && origin.get(scheme.len()..).is_some_and(|h| !h.is_empty() && h.eq_ignore_ascii_case(host))
        });
        if !same {
            return Err(refusal(format!("Origin {origin:?} is not this listener (Host {host:?})")));
        }
    }
    match headers.get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or("?")) {
        None if body_is_empty => Ok(()),
        None => Err(refusal("the body has no Content-Type".to_string())),
        Some(given) => {
            let essence = given.split(';').next().unwrap_or("").trim();
            if ACCEPTED_TYPES.iter().any(|t| essence.eq_ignore_ascii_case(t)) {
                Ok(())
            } else {
                Err(refusal(format!("Content-Type is {given:?}")))
            }
        }
    }
}

fn refusal(why: String) -> GatewayError {
    GatewayError::Forbidden(format!(
        "cross-site request refused: {why}; without an admin token, changes are accepted only \
         from this listener's own pages or from non-browser clients sending \
         Content-Type: application/json (see docs/src/reference/admin-api.md, \
         \"Browsers and the admin listener\")"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pairs: &[(&'static str, &'static str)], empty: bool) -> Result<(), u16> {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, value.parse().unwrap());
        }
        check_same_origin(&headers, empty).map_err(|e| e.status())
    }

    #[test]
    fn scripts_and_the_console_pass() {
        assert_eq!(check(&[("host", "127.0.0.1:9000")], true), Ok(()));
        assert_eq!(check(&[("content-type", "application/json")], false), Ok(()));
        assert_eq!(check(&[("content-type", "Application/JSON; charset=utf-8")], false), Ok(()));
        assert_eq!(check(&[("content-type", "application/toml")], false), Ok(()));
        let console = [
            ("host", "127.0.0.1:9000"),
            ("origin", "http://127.0.0.1:9000"),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/json"),
        ];
        assert_eq!(check(&console, false), Ok(()));
    }

    #[test]
    fn simple_cross_site_posts_are_refused() {
        let evil = [
            ("host", "127.0.0.1:9000"),
            ("origin", "http://evil.example"),
            ("sec-fetch-site", "cross-site"),
            ("content-type", "text/plain"),
        ];
        assert_eq!(check(&evil, false), Err(403));
        assert_eq!(check(&[("sec-fetch-site", "same-site")], true), Err(403));
        assert_eq!(check(&[("host", "127.0.0.1:9000"), ("origin", "http://127.0.0.1:9001")], true), Err(403));
        assert_eq!(check(&[("host", "127.0.0.1:9000"), ("origin", "null")], true), Err(403));
        assert_eq!(check(&[("origin", "http://")], true), Err(403));
        assert_eq!(check(&[("content-type", "text/plain")], false), Err(403));
        assert_eq!(check(&[("content-type", "application/x-www-form-urlencoded")], true), Err(403));
        assert_eq!(check(&[("content-type", "multipart/form-data; boundary=x")], false), Err(403));
        assert_eq!(check(&[], false), Err(403));
    }
}
