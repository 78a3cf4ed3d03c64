//! The inference call of a `ModelInferRequest`, shared by `ModelInfer`
//! and each request of `ModelStreamInfer`, and the parameters the gRPC
//! front end adds to or takes off requests and responses.

use super::decode::decode_model_infer;
use super::proto::ModelInferRequest;
use crate::error::GatewayError;
use crate::inference::{self, Call};
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::target::resolve;
use http::HeaderMap;
use std::time::Instant;

/// A version string as the REST path would carry it (`""`: none).
pub fn version(v: &str) -> Option<&str> {
    (!v.is_empty()).then_some(v)
}

/// The response parameter that says where an answer came from (the REST
/// `x-cache` header's values: `hit-l1`, `hit-l2`, `miss`, `partial`, `bypass`).
pub const CACHE_PARAMETER: &str = "x-cache";

/// The response parameter that says, for a batch cached row by row, how
/// many rows came from the cache (`k/n`, as REST's `x-switchyard-cached-rows`).
pub const CACHED_ROWS_PARAMETER: &str = "x-switchyard-cached-rows";

/// The request parameter tritonclient sets to ask for a final flag (taken
/// off the request: it is about the stream, not the inference).
pub const EMPTY_FINAL_PARAMETER: &str = "triton_enable_empty_final_response";

/// The response parameter that marks a request's last response.
pub const FINAL_PARAMETER: &str = "triton_final_response";

/// Decodes and checks one `ModelInferRequest` into an inference call
/// (shared by `ModelInfer` and each request of `ModelStreamInfer`).
pub(super) fn infer_call<'h>(
    state: &AppState,
    snap: &Snapshot,
    headers: &'h HeaderMap,
    tenant: Option<&'h str>,
    message: ModelInferRequest,
    received: Instant,
    stream: bool,
) -> Result<Call<'h>, GatewayError> {
    let target =
        resolve(&snap.config, &state.catalog(snap), &message.model_name, version(&message.model_version))?;
    let (limits, signature) = inference::decode_limits(state, snap, &target)?;
    let mut decoded = {
        let _parse = crate::telemetry::spans::parse().entered();
        let mut decoded = decode_model_infer(message, &limits)?;
        inference::check_decoded(snap, &target, &signature, &mut decoded)?;
        decoded
    };
    decoded.parameters.remove(EMPTY_FINAL_PARAMETER);
    let sampled = state.recorders.draw(target.route(&snap.config).and_then(|r| r.record.as_ref()));
    Ok(Call { target, decoded, headers, tenant, received, stream, sampled, protocol: "grpc" })
}
