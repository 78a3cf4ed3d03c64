//! `GET /v1/models`: the names `/v1/embeddings` answers that the caller
//! may see: routes whose models are all text models, then text models,
//! each only when it is open or the request presents one of its keys
//! (the access rule of the V2 names, [`crate::auth::AccessTable`]).

use super::embeddings::is_text_model;
use super::response;
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use http::HeaderMap;

/// The model list reply.
pub fn models(snap: &Snapshot, headers: &HeaderMap) -> Reply {
    let config = &snap.config;
    let routes = config
        .routes
        .iter()
        .filter(|r| !r.models.is_empty() && r.models.iter().all(|m| is_text_model(snap, m)))
        .map(|r| r.name.as_str());
    let models = config.models.iter().filter(|m| m.text.is_some()).map(|m| m.name.as_str());
    let visible: Vec<&str> =
        routes.chain(models).filter(|name| snap.access.authorize(config, name, headers).is_ok()).collect();
    Reply::json(200, response::models_body(&visible))
}
