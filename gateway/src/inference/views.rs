//! The metadata documents every front end shows for a name (a route or a
//! model): its V2 metadata, its Triton model configuration and whether it
//! is ready. REST sends them as JSON ([`crate::handlers::metadata`]); gRPC
//! sends the same documents as protobuf ([`crate::grpc`]).

use crate::error::GatewayError;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::target::{resolve, signature};
use serde_json::Value;
use switchyard_protocol::v2::{self, ServingView};

/// The V2 model metadata of `name` (`GET /v2/models/{m}`).
pub fn model_metadata(
    state: &AppState,
    snap: &Snapshot,
    name: &str,
    version: Option<&str>,
) -> Result<Value, GatewayError> {
    let catalog = state.catalog(snap);
    let target = resolve(&snap.config, &catalog, name, version)?;
    let sig = signature(&catalog, &target)?;
    let versions = [target.version.to_string()];
    Ok(v2::model_metadata(name, &versions, v2::metadata::ONNX_PLATFORM, &sig))
}

/// Triton's model configuration of `name` (`GET /v2/models/{m}/config`).
/// Upstream models run on their server: without a local model the route
/// reports no batching (dims include the batch dimension).
pub fn model_config(
    state: &AppState,
    snap: &Snapshot,
    name: &str,
    version: Option<&str>,
) -> Result<Value, GatewayError> {
    let catalog = state.catalog(snap);
    let target = resolve(&snap.config, &catalog, name, version)?;
    let sig = signature(&catalog, &target)?;
    let serving = catalog.local_spec(&target.models).map(|spec| ServingView::of(&spec)).unwrap_or_default();
    Ok(v2::model_config(name, &sig, &serving))
}

/// Whether every model behind `name` can serve (loaded, or loadable on
/// demand); an unknown name is 404.
pub fn model_ready(
    state: &AppState,
    snap: &Snapshot,
    name: &str,
    version: Option<&str>,
) -> Result<bool, GatewayError> {
    let catalog = state.catalog(snap);
    let target = resolve(&snap.config, &catalog, name, version)?;
    Ok(target.models.iter().all(|m| catalog.can_serve(m)))
}
