//! The admin listener (`server.admin_listen`, loopback by default).
//!
//! | method | path | what | token |
//! |---|---|---|---|
//! | GET | `/healthz` | liveness | no |
//! | GET | `/metrics` | Prometheus metrics ([`crate::metrics`]) | no |
//! | GET | `/admin/stats` | live statistics per model, pool, route ([`stats`]) | yes |
//! | GET | `/admin/config` | the effective config, secrets redacted ([`config_view`]) | yes |
//! | POST | `/admin/reload` | reload the config file ([`crate::reload`]) | yes |
//! | GET | `/admin/models` | models with state and file ([`models`]) | yes |
//! | POST | `/admin/models/{m}/load`, `/unload` | load or unload a model now | yes |
//! | POST | `/admin/models/{m}/pools/{p}/pause`, `/resume` | hold or release a pool's workers ([`pause`]) | yes |
//! | POST | `/admin/replay` | the recorded traffic replayed through the posted candidate config ([`replay`]) | yes |
//! | POST | `/admin/config/edit` | preview or apply a route's threshold / budget / TTL change ([`config_edit`]) | yes |
//! | GET | `/admin/rollouts` | routes' candidates: comparison, plan, state, what is in force ([`rollouts`]) | yes |
//! | POST | `/admin/rollouts/{r}/promote`, `/rollback` | promote or roll back a route's candidate by hand, through a reload | yes |
//! | POST, DELETE | `/admin/rollouts/{r}` | post a candidate table for a route (checked, applied through a reload), or withdraw it ([`rollout_post`]) | yes |
//! | GET | `/console/` | the operator console's page and assets ([`console`]); its data comes from the calls above | no |
//!
//! "Token" means `Authorization: Bearer <token>` with the `[admin] token`
//! (or `$SWITCHYARD_ADMIN_TOKEN`); a missing or wrong token gets 401 with
//! `WWW-Authenticate: Bearer`. Without a token configured, the listener
//! must be on a loopback address ([`crate::prepare::check_exposure`]) and every endpoint
//! is open to local callers, but a POST must pass [`cross_site`] (no web
//! page may make changes through the visitor's browser).
//!
//! Every request, with a token or not, must name the listener in its
//! `Host` ([`host_check`], against DNS rebinding). Both refuse with 403.
//!
//! More endpoints are added with [`AdminApp::route`].

pub mod config_edit;
pub mod config_view;
pub mod console;
pub mod cross_site;
pub mod endpoints;
pub mod host_check;
pub mod metrics_page;
pub mod models;
pub mod pause;
pub mod replay;
pub mod rollout_metrics;
pub mod rollout_post;
pub mod rollouts;
pub mod scrape;
pub mod stats;

use crate::auth::bearer_token;
use crate::config::AdminConfig;
use crate::error::GatewayError;
use crate::http_io::{check_head, write_reply};
use crate::reload::Reloader;
use crate::reply::Reply;
use crate::state::AppState;
use async_trait::async_trait;
use http::Method;
use pingora::prelude::{HttpPeer, ProxyHttp, Session};
use pingora::{Error, ErrorType};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The `WWW-Authenticate` realm of the admin API.
pub const REALM: &str = "switchyard-admin";

/// Whether an admin endpoint needs the admin token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone who can reach the listener (health checks, scrapers).
    Public,
    /// Only callers presenting the admin token (when one is configured).
    Token,
}

/// What an admin handler gets: the shared state, the reloader and the
/// path's `{}` captures in order.
pub struct AdminCall {
    /// The gateway's shared state.
    pub state: Arc<AppState>,
    /// The config reloader.
    pub reloader: Arc<Reloader>,
    /// Values of the pattern's `{}` segments.
    pub params: Vec<String>,
    /// The request body (empty for GET; at most [`ADMIN_MAX_BODY`] bytes).
    pub body: bytes::Bytes,
}

/// Largest body an admin request may carry (a posted candidate config).
pub const ADMIN_MAX_BODY: usize = 1 << 20;

/// An admin endpoint's future.
pub type AdminFuture = Pin<Box<dyn Future<Output = Reply> + Send>>;

/// An admin endpoint.
pub type AdminHandler = Arc<dyn Fn(AdminCall) -> AdminFuture + Send + Sync>;

/// Wraps an async function as an [`AdminHandler`], e.g.
/// `handler(|call| async move { Reply::empty(200) })`.
pub fn handler<F, Fut>(f: F) -> AdminHandler
where
    F: Fn(AdminCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send + 'static,
{
    Arc::new(move |call| Box::pin(f(call)))
}

struct Endpoint {
    method: Method,
    pattern: &'static str,
    access: Access,
    handler: AdminHandler,
}

/// The admin app; answers everything in `request_filter`.
pub struct AdminApp {
    state: Arc<AppState>,
    reloader: Arc<Reloader>,
    endpoints: Vec<Endpoint>,
}

impl AdminApp {
    /// The admin app with the built-in endpoints (table above).
    pub fn new(state: Arc<AppState>, reloader: Arc<Reloader>) -> AdminApp {
        let mut app = AdminApp { state, reloader, endpoints: Vec::new() };
        endpoints::register(&mut app);
        app
    }

    /// Adds an endpoint: `pattern` is a path whose `{}` segments match any
    /// one segment (passed to the handler in [`AdminCall::params`]).
    pub fn route(
        &mut self,
        method: Method,
        pattern: &'static str,
        access: Access,
        handler: AdminHandler,
    ) -> &mut AdminApp {
        self.endpoints.push(Endpoint { method, pattern, access, handler });
        self
    }

    /// Answers one admin request: the `Host` check, then the endpoint
    /// with its token (or, without a token, cross-site) check.
    pub async fn answer(
        &self,
        method: &Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
        body: bytes::Bytes,
    ) -> Reply {
        let path = uri.path();
        let admin = {
            let snap = self.state.snapshot.load();
            let server = &snap.config.server;
            if let Err(err) = host_check::check_host(uri, headers, server.admin_listen, &server.admin_hosts) {
                return Reply::error(&err);
            }
            snap.config.admin.clone()
        };
        let mut path_matched = false;
        for endpoint in &self.endpoints {
            let Some(params) = match_path(endpoint.pattern, path) else { continue };
            path_matched = true;
            if endpoint.method != *method {
                continue;
            }
            let checked = match (endpoint.access, admin.token) {
                (Access::Token, Some(_)) => check_token(&admin, headers),
                // No token to check: a change must not come from another site.
                (_, None) if !method.is_safe() => cross_site::check_same_origin(headers, body.is_empty()),
                _ => Ok(()),
            };
            if let Err(err) = checked {
                return Reply::error(&err);
            }
            let call = AdminCall { state: self.state.clone(), reloader: self.reloader.clone(), params, body };
            return (endpoint.handler)(call).await;
        }
        if path_matched {
            return Reply::error(&GatewayError::MethodNotAllowed {
                method: method.to_string(),
                path: path.to_string(),
            });
        }
        Reply::error(&GatewayError::NotFound(format!("no admin endpoint at {method} {path}")))
    }
}

/// The captures of `pattern` in `path`, or `None` when it does not match.
fn match_path(pattern: &str, path: &str) -> Option<Vec<String>> {
    let mut params = Vec::new();
    let mut want = pattern.split('/');
    let mut got = path.split('/');
    loop {
        match (want.next(), got.next()) {
            (None, None) => return Some(params),
            (Some("{}"), Some(segment)) if !segment.is_empty() => params.push(segment.to_string()),
            (Some(w), Some(g)) if w == g => {}
            _ => return None,
        }
    }
}

/// Checks `Authorization: Bearer <token>` against the admin token, in
/// constant time; open when no token is configured.
pub fn check_token(admin: &AdminConfig, headers: &http::HeaderMap) -> Result<(), GatewayError> {
    let Some(expected) = admin.token else { return Ok(()) };
    let message = match bearer_token(headers) {
        Some(given) if expected.matches(given) => return Ok(()),
        Some(_) => "the admin token is not valid",
        None => "the admin API needs `Authorization: Bearer <admin token>`",
    };
    Err(GatewayError::Unauthorized { realm: REALM, message: message.to_string() })
}

#[async_trait]
impl ProxyHttp for AdminApp {
    type CTX = ();

    fn new_ctx(&self) {}

    /// The connection now serves a request; pipelined ones are kept.
    async fn early_request_filter(&self, session: &mut Session, _ctx: &mut ()) -> pingora::Result<()> {
        crate::connections::request_started(session);
        session.as_downstream_mut().set_pipelining_enabled(true);
        Ok(())
    }

    /// Answers every admin request in-process.
    async fn request_filter(&self, session: &mut Session, _ctx: &mut ()) -> pingora::Result<bool> {
        let reply = match check_head(session.req_header()) {
            Ok(()) => match post_body(&self.state, session).await {
                Ok(body) => {
                    let header = session.req_header();
                    self.answer(&header.method, &header.uri, &header.headers, body).await
                }
                Err(e) => Reply::error(&e),
            },
            Err(e) => Reply::error(&e),
        };
        write_reply(session, reply, false).await?;
        Ok(true)
    }

    /// The request is done; its connection is idle.
    async fn logging(&self, session: &mut Session, _e: Option<&Error>, _ctx: &mut ()) {
        crate::connections::request_finished(session);
    }

    /// Never reached: the admin app proxies nothing.
    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> pingora::Result<Box<HttpPeer>> {
        Err(Error::explain(ErrorType::InternalError, "the admin listener proxies nothing"))
    }
}

/// The body of a POST (up to [`ADMIN_MAX_BODY`]); nothing for others.
async fn post_body(state: &AppState, session: &mut Session) -> Result<bytes::Bytes, GatewayError> {
    if session.req_header().method != Method::POST {
        return Ok(bytes::Bytes::new());
    }
    let limits = crate::config::Limits {
        max_body_bytes: ADMIN_MAX_BODY,
        ..state.snapshot.load().config.server.limits.clone()
    };
    crate::http_io::read_body(session, &limits).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::secret::SecretDigest;
    use crate::config::TokenSource;

    #[test]
    fn patterns_capture_segments() {
        assert_eq!(match_path("/admin/stats", "/admin/stats"), Some(vec![]));
        assert_eq!(
            match_path("/admin/models/{}/load", "/admin/models/m1/load"),
            Some(vec!["m1".to_string()])
        );
        assert_eq!(match_path("/admin/models/{}/load", "/admin/models//load"), None);
        assert_eq!(match_path("/admin/models/{}/load", "/admin/models/m1/load/x"), None);
        assert_eq!(match_path("/admin/stats", "/admin/stats/"), None);
    }

    #[test]
    fn token_is_required_when_configured() {
        let admin = AdminConfig {
            token: Some(SecretDigest::of(b"the-admin-token-1234")),
            token_source: TokenSource::Config,
        };
        let mut headers = http::HeaderMap::new();
        assert_eq!(check_token(&admin, &headers).unwrap_err().status(), 401);
        headers.insert("authorization", "Bearer the-admin-token-1235".parse().unwrap());
        assert_eq!(check_token(&admin, &headers).unwrap_err().status(), 401);
        headers.insert("authorization", "Bearer the-admin-token-1234".parse().unwrap());
        assert!(check_token(&admin, &headers).is_ok());
        let open = AdminConfig { token: None, token_source: TokenSource::None };
        assert!(check_token(&open, &http::HeaderMap::new()).is_ok());
    }
}
