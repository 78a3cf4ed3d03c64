//! One function per endpoint, and [`dispatch`], which maps a method and
//! path to it. Handlers take plain values and return a [`Reply`], so they
//! are independent of the HTTP server.
//!
//! | method | path | handler |
//! |---|---|---|
//! | GET | `/v2` | server metadata |
//! | GET | `/v2/health/live`, `/v2/health/ready` | liveness, readiness |
//! | GET | `/v2/models/{m}[/versions/{v}]` | model metadata |
//! | GET | `.../ready` | model readiness |
//! | GET | `.../config` | Triton-style model configuration |
//! | POST | `.../infer` | inference |
//! | GET | `/v2/models[/{m}[/versions/{v}]]/stats` | Triton's statistics |

pub mod infer;
pub mod metadata;

use crate::endpoint::{parse_path, Endpoint};
use crate::error::GatewayError;
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::stream::Response;
use bytes::Bytes;
use http::{HeaderMap, Method};

/// The parts of a request a handler needs.
pub struct Request<'a> {
    /// HTTP method.
    pub method: &'a Method,
    /// Path without the query string.
    pub path: &'a str,
    /// Request headers.
    pub headers: &'a HeaderMap,
    /// The whole body (empty for GET).
    pub body: Bytes,
    /// When the request arrived; latency budgets count from here.
    pub received: std::time::Instant,
    /// The subject CN of the client certificate its TLS connection
    /// presented and the listener verified (`client_ca`), if any.
    pub cert_cn: Option<std::sync::Arc<str>>,
}

/// Answers one request against one config snapshot: a complete reply,
/// or an event stream for a streamed infer call. Names protected by API
/// keys ([`crate::auth`]) answer 401 without a valid key.
pub async fn dispatch<'a>(state: &'a AppState, snap: &'a Snapshot, req: Request<'_>) -> Response<'a> {
    let Some(endpoint) = parse_path(req.path) else {
        return Reply::error(&GatewayError::NotFound(format!("no endpoint at {}", req.path))).into();
    };
    if *req.method != endpoint.method() && !(*req.method == Method::HEAD && endpoint.method() == Method::GET)
    {
        return Reply::error(&GatewayError::MethodNotAllowed {
            method: req.method.to_string(),
            path: req.path.to_string(),
        })
        .with_header(http::header::ALLOW, endpoint.method().to_string())
        .into();
    }
    let tenant = match endpoint.model_name() {
        Some(name) => {
            match snap.access.authorize_peer(&snap.config, name, req.headers, req.cert_cn.as_deref()) {
                Ok(tenant) => tenant,
                Err(err) => return Reply::error(&err).into(),
            }
        }
        None => None,
    };
    let result = match endpoint {
        Endpoint::ServerMetadata => Ok(metadata::server()),
        Endpoint::Live => Ok(Reply::empty(200)),
        Endpoint::Ready => Ok(Reply::empty(if state.lifecycle.is_draining() { 503 } else { 200 })),
        Endpoint::ModelMetadata(name, version) => metadata::model(state, snap, name, version),
        Endpoint::ModelReady(name, version) => metadata::ready(state, snap, name, version),
        Endpoint::ModelConfig(name, version) => metadata::config(state, snap, name, version),
        Endpoint::ModelStatistics(name, version) => {
            metadata::statistics(state, snap, name, version, req.headers)
        }
        Endpoint::Infer(name, version) => {
            return infer::infer(state, snap, name, version, req, tenant.as_deref())
                .await
                .unwrap_or_else(|e| Reply::from(e).into());
        }
    };
    result.unwrap_or_else(Reply::from).into()
}
