//! Server and model metadata, readiness, Triton-style model config and
//! statistics.

use crate::error::GatewayError;
use crate::inference::{statistics as stats, views};
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use http::HeaderMap;
use switchyard_protocol::v2;

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
    Ok(Reply::json_value(200, &views::model_metadata(state, snap, name, version)?))
}

/// `GET /v2/models/{m}[/versions/{v}]/ready`: 200 when every model behind
/// the name can serve (loaded, or loadable on demand); 503 otherwise.
pub fn ready(
    state: &AppState,
    snap: &Snapshot,
    name: &str,
    version: Option<&str>,
) -> Result<Reply, GatewayError> {
    let ready = views::model_ready(state, snap, name, version)?;
    Ok(Reply::empty(if ready { 200 } else { 503 }))
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
    Ok(Reply::json_value(200, &views::model_config(state, snap, name, version)?))
}

/// `GET /v2/models[/{m}[/versions/{v}]]/stats`: Triton's statistics
/// document, the numbers gRPC's `ModelStatistics` answers; models the
/// request may not see are left out.
pub fn statistics(
    state: &AppState,
    snap: &Snapshot,
    name: Option<&str>,
    version: Option<&str>,
    headers: &HeaderMap,
) -> Result<Reply, GatewayError> {
    Ok(Reply::json_value(200, &stats::model_statistics(state, snap, name, version, headers)?))
}
