//! What a request to the V2 REST API asks for, read from its path and
//! headers before anything else is done: which endpoint ([`parse_path`];
//! [`parse_openai_path`] for the OpenAI-compatible API)
//! and whether the answer should be an event stream ([`wants_stream`]).
//! Shared by the handlers, the cache (whose exact-repeat path never answers
//! a stream) and the metrics (which label requests by endpoint).

use http::header::ACCEPT;
use http::{HeaderMap, Method};
use serde_json::Value;
use switchyard_protocol::v2::{Parameters, V2Error};

/// The `Content-Type` of an event stream (server-sent events).
pub const EVENT_STREAM: &str = "text/event-stream";

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
    /// `GET /v2/models[/{m}[/versions/{v}]]/stats` (Triton's statistics
    /// extension): every model's when no name is given. As in Triton,
    /// `/v2/models/stats` is this, never the metadata of a model `stats`.
    ModelStatistics(Option<&'a str>, Option<&'a str>),
}

impl Endpoint<'_> {
    /// The route or model name the endpoint addresses, if any.
    pub fn model_name(&self) -> Option<&str> {
        match self {
            Endpoint::ModelMetadata(name, _)
            | Endpoint::ModelReady(name, _)
            | Endpoint::ModelConfig(name, _)
            | Endpoint::Infer(name, _)
            | Endpoint::ModelStatistics(Some(name), _) => Some(name),
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
        "/models/stats" => return Some(Endpoint::ModelStatistics(None, None)),
        _ => {}
    }
    // At most four segments, gathered without allocating (every request's
    // path is parsed here).
    let mut parts = [""; 4];
    let mut count = 0;
    for segment in rest.strip_prefix("/models/")?.split('/') {
        *parts.get_mut(count)? = segment;
        count += 1;
    }
    let (name, version, action) = match &parts[..count] {
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
        Some("stats") => Some(Endpoint::ModelStatistics(Some(name), version)),
        Some(_) => None,
    }
}

/// What a path of the OpenAI-compatible API ([`crate::openai`]) asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenAiEndpoint {
    /// `POST /v1/embeddings`
    Embeddings,
    /// `GET /v1/models`
    Models,
}

impl OpenAiEndpoint {
    /// The method this endpoint answers.
    pub fn method(self) -> Method {
        match self {
            OpenAiEndpoint::Embeddings => Method::POST,
            OpenAiEndpoint::Models => Method::GET,
        }
    }

    /// The `endpoint` label of its requests in metrics.
    pub fn label(self) -> &'static str {
        match self {
            OpenAiEndpoint::Embeddings => "openai_embeddings",
            OpenAiEndpoint::Models => "openai_models",
        }
    }
}

/// Parses a path of the OpenAI-compatible API (a trailing `/` allowed);
/// `None` when it is not one.
pub fn parse_openai_path(path: &str) -> Option<OpenAiEndpoint> {
    match path.strip_suffix('/').unwrap_or(path) {
        "/v1/embeddings" => Some(OpenAiEndpoint::Embeddings),
        "/v1/models" => Some(OpenAiEndpoint::Models),
        _ => None,
    }
}

/// True when the client asks for a stream: `Accept` lists
/// `text/event-stream`, or `parameters.stream` is `true` (any other
/// non-boolean value is a 400).
pub fn wants_stream(headers: &HeaderMap, parameters: &Parameters) -> Result<bool, V2Error> {
    let asked = match parameters.get("stream") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => {
            return Err(V2Error::InvalidField {
                field: "stream",
                context: "the request parameters".into(),
                reason: "must be true or false".into(),
            })
        }
    };
    Ok(asked || accepts_event_stream(headers))
}

/// True when an `Accept` header lists `text/event-stream` (parameters and
/// case ignored; `q=0` means "not acceptable").
pub fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let refused = parts.any(|p| p.replace(' ', "").eq_ignore_ascii_case("q=0"));
        media.eq_ignore_ascii_case(EVENT_STREAM) && !refused
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn accept(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_static(value));
        h
    }

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
        assert_eq!(parse_path("/v2/models/stats"), Some(Endpoint::ModelStatistics(None, None)));
        assert_eq!(parse_path("/v2/models/m/stats"), Some(Endpoint::ModelStatistics(Some("m"), None)));
        assert_eq!(
            parse_path("/v2/models/m/versions/2/stats"),
            Some(Endpoint::ModelStatistics(Some("m"), Some("2")))
        );
        assert_eq!(parse_path("/v2/models/m/bogus"), None);
        assert_eq!(parse_path("/v2/models/"), None);
        assert_eq!(parse_path("/v3/models/m"), None);
        assert_eq!(parse_path("/v2/models/m/versions/1/infer/x"), None);
    }

    #[test]
    fn parses_openai_paths() {
        assert_eq!(parse_openai_path("/v1/embeddings"), Some(OpenAiEndpoint::Embeddings));
        assert_eq!(parse_openai_path("/v1/models/"), Some(OpenAiEndpoint::Models));
        assert_eq!(parse_openai_path("/v1/models/minilm"), None);
        assert_eq!(parse_openai_path("/v2/models"), None);
        assert_eq!(OpenAiEndpoint::Embeddings.method(), Method::POST);
    }

    #[test]
    fn accept_header_or_parameter_asks_for_a_stream() {
        let none = Parameters::new();
        assert!(wants_stream(&accept("text/event-stream"), &none).unwrap());
        assert!(wants_stream(&accept("application/json, Text/Event-Stream;q=0.5"), &none).unwrap());
        assert!(!wants_stream(&accept("text/event-stream;q=0"), &none).unwrap());
        assert!(!wants_stream(&accept("application/json"), &none).unwrap());
        assert!(!wants_stream(&HeaderMap::new(), &none).unwrap());
        let mut p = Parameters::new();
        p.insert("stream".into(), true.into());
        assert!(wants_stream(&HeaderMap::new(), &p).unwrap());
        p.insert("stream".into(), "yes".into());
        assert_eq!(wants_stream(&HeaderMap::new(), &p).unwrap_err().status(), 400);
    }
}
