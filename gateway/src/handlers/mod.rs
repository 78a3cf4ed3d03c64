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

pub mod infer;
pub mod limits;
pub mod metadata;
pub mod target;

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
}

/// What a path asks for, once parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum Endpoint<'a> {
    /// `GET /v2`
    ServerMetadata,
    /// `GET /v2/health/live`
    Live,
    /// `GET /v2/health/ready`
    Ready,
    /// `GET /v2/models/{m}[/versions/{v}]`
    ModelMetadata(&'a str, Option<&'a str>),
    /// `GET /v2/models/{m}[/versions/{v}]/ready`
    ModelReady(&'a str, Option<&'a str>),
    /// `GET /v2/models/{m}[/versions/{v}]/config`
    ModelConfig(&'a str, Option<&'a str>),
    /// `POST /v2/models/{m}[/versions/{v}]/infer`
    Infer(&'a str, Option<&'a str>),
}

impl Endpoint<'_> {
    /// The route or model name the endpoint addresses, if any.
    pub fn model_name(&self) -> Option<&str> {
        match self {
            Endpoint::ModelMetadata(name, _)
            | Endpoint::ModelReady(name, _)
            | Endpoint::ModelConfig(name, _)
            | Endpoint::Infer(name, _) => Some(name),
            _ => None,
        }
    }

    /// The method this endpoint answers.
    pub fn method(&self) -> Method {
        match self {
            Endpoint::Infer(..) => Method::POST,
            _ => Method::GET,
        }
    }
}

/// Parses a V2 path; `None` when it is not one.
pub fn parse_path(path: &str) -> Option<Endpoint<'_>> {
    let rest = path.strip_prefix("/v2")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    match rest {
        "" => return Some(Endpoint::ServerMetadata),
        "/health/live" => return Some(Endpoint::Live),
        "/health/ready" => return Some(Endpoint::Ready),
        _ => {}
    }
    let parts: Vec<&str> = rest.strip_prefix("/models/")?.split('/').collect();
    let (name, version, action) = match parts.as_slice() {
        [name] => (*name, None, None),
        [name, action] => (*name, None, Some(*action)),
        [name, "versions", v] => (*name, Some(*v), None),
        [name, "versions", v, action] => (*name, Some(*v), Some(*action)),
        _ => return None,
    };
    if name.is_empty() {
        return None;
    }
    match action {
        None => Some(Endpoint::ModelMetadata(name, version)),
        Some("ready") => Some(Endpoint::ModelReady(name, version)),
        Some("config") => Some(Endpoint::ModelConfig(name, version)),
        Some("infer") => Some(Endpoint::Infer(name, version)),
        Some(_) => None,
    }
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
        .with_header("allow", endpoint.method().to_string())
        .into();
    }
    let tenant = match endpoint.model_name() {
        Some(name) => match snap.access.authorize(&snap.config, name, req.headers) {
            Ok(tenant) => tenant,
            Err(err) => return Reply::error(&err).into(),
        },
        None => None,
    };
    let result = match endpoint {
        Endpoint::ServerMetadata => Ok(metadata::server()),
        Endpoint::Live => Ok(Reply::empty(200)),
        Endpoint::Ready => Ok(Reply::empty(if state.lifecycle.is_draining() { 503 } else { 200 })),
        Endpoint::ModelMetadata(name, version) => metadata::model(state, snap, name, version),
        Endpoint::ModelReady(name, version) => metadata::ready(state, snap, name, version),
        Endpoint::ModelConfig(name, version) => metadata::config(state, snap, name, version),
        Endpoint::Infer(name, version) => {
            return infer::infer(state, snap, name, version, req, tenant.as_deref())
                .await
                .unwrap_or_else(|e| Reply::from(e).into());
        }
    };
    result.unwrap_or_else(Reply::from).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_v2_paths() {
        assert_eq!(parse_path("/v2"), Some(Endpoint::ServerMetadata));
        assert_eq!(parse_path("/v2/"), Some(Endpoint::ServerMetadata));
        assert_eq!(parse_path("/v2/health/ready"), Some(Endpoint::Ready));
        assert_eq!(parse_path("/v2/models/m"), Some(Endpoint::ModelMetadata("m", None)));
        assert_eq!(parse_path("/v2/models/m/versions/3"), Some(Endpoint::ModelMetadata("m", Some("3"))));
        assert_eq!(parse_path("/v2/models/m/versions/3/infer"), Some(Endpoint::Infer("m", Some("3"))));
        assert_eq!(parse_path("/v2/models/m/config"), Some(Endpoint::ModelConfig("m", None)));
        assert_eq!(parse_path("/v2/models/m/ready"), Some(Endpoint::ModelReady("m", None)));
        assert_eq!(parse_path("/v2/models/m/bogus"), None);
        assert_eq!(parse_path("/v2/models/"), None);
        assert_eq!(parse_path("/v3/models/m"), None);
        assert_eq!(parse_path("/v2/models/m/versions/1/infer/x"), None);
    }
}
