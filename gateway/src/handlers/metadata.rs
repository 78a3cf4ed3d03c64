//! Server and model metadata, readiness and Triton-style model config.

use crate::error::GatewayError;
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::target::{resolve, signature};
use crate::v2;
use switchyard_runtime::{DeviceKind, ModelSpec};

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
    // Upstream models run on their server: without a local model the
    // route reports no batching (dims include the batch dimension).
    let serving = catalog.local_spec(&target.models).map(|spec| serving_view(&spec)).unwrap_or_default();
    Ok(Reply::json_value(200, &v2::model_config(name, &sig, &serving)))
}

/// What a local model's configuration shows of its batching and pools.
fn serving_view(spec: &ModelSpec) -> v2::ServingView {
    let batching = &spec.batching;
    let batched = batching.max_batch_size > 1;
    let dynamic = batched.then(|| v2::DynamicBatchingView {
        max_queue_delay_us: u64::try_from(batching.max_queue_delay.as_micros()).unwrap_or(u64::MAX),
        preferred_batch_size: batching.max_batch_size,
        max_queue_size: batching.queue_capacity,
    });
    let instance_groups = spec
        .pools
        .iter()
        .filter_map(|pool| match pool.device {
            DeviceKind::Cpu => Some(("KIND_CPU", pool.workers)),
            DeviceKind::Cuda => Some(("KIND_GPU", pool.workers)),
            DeviceKind::Upstream => None,
        })
        .collect();
    v2::ServingView {
        max_batch_size: if batched { batching.max_batch_size } else { 0 },
        dynamic,
        instance_groups,
    }
}
