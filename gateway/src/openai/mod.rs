//! The OpenAI-compatible front end: `POST /v1/embeddings` and
//! `GET /v1/models` on the main listener, for the apps that embed text
//! with an OpenAI client (the `openai` SDK, LangChain, LlamaIndex)
//! pointed at the gateway (`base_url = http://host:port/v1`).
//!
//! Like the gRPC service, it is a decoder in front of [`crate::inference`]:
//! the JSON body becomes the V2 request of a text model (a route or a
//! model with a tokenizer), authorised by the route's keys
//! (`Authorization: Bearer`), and runs the one V2 path after decoding
//! (limits, budget, cache, routing, traffic sample). Its answers and
//! errors are in OpenAI's shape ([`error`]), with the statuses the V2
//! path gives.
//!
//! | file | concept |
//! |---|---|
//! | [`request`] | the embeddings body, field by field |
//! | [`embeddings`] | the call: decode, [`crate::inference::run`], token count |
//! | [`models`] | the model list the caller may see |
//! | [`response`] | the answers' JSON |
//! | [`error`] | errors in OpenAI's shape |

pub mod embeddings;
pub mod error;
pub mod models;
pub mod request;
pub mod response;

use crate::endpoint::OpenAiEndpoint;
use crate::error::GatewayError;
use crate::handlers::Request;
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use error::OpenAiError;
use http::Method;

/// Answers one request to `endpoint`. Also returns the route or model the
/// body named, for the request's metric labels.
pub async fn dispatch(
    state: &AppState,
    snap: &Snapshot,
    endpoint: OpenAiEndpoint,
    req: Request<'_>,
) -> (Reply, Option<String>) {
    let method = req.method;
    if *method != endpoint.method() && !(*method == Method::HEAD && endpoint.method() == Method::GET) {
        let err = GatewayError::MethodNotAllowed { method: method.to_string(), path: req.path.to_string() };
        let reply =
            OpenAiError::from(err).reply().with_header(http::header::ALLOW, endpoint.method().to_string());
        return (reply, None);
    }
    match endpoint {
        OpenAiEndpoint::Models => (models::models(snap, req.headers), None),
        OpenAiEndpoint::Embeddings => match request::parse(&req.body) {
            Err(e) => (e.reply(), None),
            Ok(parsed) => {
                let named = Some(parsed.model.clone());
                let reply =
                    embeddings::embeddings(state, snap, &req, parsed).await.unwrap_or_else(|e| e.reply());
                (reply, named)
            }
        },
    }
}
