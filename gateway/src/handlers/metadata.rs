//! Server and model metadata, readiness and Triton-style model config.

use crate::error::GatewayError;
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::target::{resolve, signature};
use crate::v2;

/// `GET /v2`
pub fn server() -> Reply {
    Reply::json_value(200, &v2::server_metadata())
}

/// `GET /v2/models/{m}[/versions/{v}]`
pub fn model(
    state: &AppState,
    snap: &Snapshot,
    name: &str,
    version: Option<&str>,
) -> Result<Reply, GatewayError> {
    let catalog = state.catalog(snap);
    let target = resolve(&snap.config, &catalog, name, version)?;
    let sig = signature(&catalog, &target)?;
    let versions = [target.version.to_string()];
    Ok(Reply::json_value(200, &v2::model_metadata(name, &versions, "onnxruntime_onnx", &sig)))
}

/// `GET /v2/models/{m}[/versions/{v}]/ready`: 200 when every model behind
/// the name can serve (loaded, or loadable on demand); 503 otherwise.
pub fn ready(
    state: &AppState,
    snap: &Snapshot,
    name: &str,
    version: Option<&str>,
) -> Result<Reply, GatewayError> {
    let catalog = state.catalog(snap);
    let target = resolve(&snap.config, &catalog, name, version)?;
    let failed = target.models.iter().any(|m| !catalog.can_serve(m));
    Ok(Reply::empty(if failed { 503 } else { 200 }))
}

/// `GET /v2/models/{m}[/versions/{v}]/config`, in the shape
/// `perf_analyzer` reads: `max_batch_size`, `input`/`output` with
/// `TYPE_*` datatypes and dims without the batch dimension.
pub fn config(
    state: &AppState,
    snap: &Snapshot,
    name: &str,
    version: Option<&str>,
) -> Result<Reply, GatewayError> {
    let catalog = state.catalog(snap);
    let target = resolve(&snap.config, &catalog, name, version)?;
    let sig = signature(&catalog, &target)?;
    // Upstream models' batching is their server's: without a local model
    // the route reports no batching (dims include the batch dimension).
    let batching = catalog.batching(&target.models).unwrap_or_default();
    let max_batch = if batching.max_batch_size > 1 { batching.max_batch_size } else { 0 };
    let queue_delay_us = u64::try_from(batching.max_queue_delay.as_micros()).unwrap_or(u64::MAX);
    let dynamic = (max_batch > 1).then_some(queue_delay_us);
    Ok(Reply::json_value(200, &v2::model_config(name, &sig, max_batch, dynamic)))
}
