//! Decide and execute: which model, on which pool, answers an inference
//! request. [`execute`] is the one seam between the V2 handler (which
//! decodes and encodes) and everything that chooses and runs models; the
//! cache wraps it, routing policies live behind it.

use crate::config::Config;
use crate::error::GatewayError;
use crate::handlers::target::Target;
use crate::state::AppState;
use http::HeaderMap;
use std::time::Instant;
use switchyard_runtime::{InferenceRequest, Tensor};

/// What the handler hands to [`execute`].
pub struct RouteRequest<'a> {
    /// The route or model the client addressed.
    pub target: &'a Target,
    /// Inputs and requested outputs, checked against the signature.
    pub request: InferenceRequest,
    /// Request headers (budget, cache control).
    pub headers: &'a HeaderMap,
    /// The V2 request-level `parameters` (e.g. `timeout`).
    pub parameters: &'a serde_json::Map<String, serde_json::Value>,
    /// When the gateway received the request; budgets count from here.
    pub received: Instant,
}

/// The final answer to an inference request, and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The model that produced the outputs.
    pub model: String,
    /// Its version.
    pub version: u64,
    /// The device of the pool that ran it (`cpu`, `cuda`).
    pub device: String,
    /// The pool that ran it.
    pub pool: String,
    /// Why this model and pool were chosen (a low-cardinality label).
    pub reason: String,
    /// Rows in the batch that executed it.
    pub batch_size: usize,
    /// The requested outputs, in order.
    pub outputs: Vec<(String, Tensor)>,
}

/// Chooses a model and pool for the request and runs it.
///
/// Until routing policies are wired in, a route answers with its last
/// (most accurate) model on the pool the runtime picks.
pub async fn execute(
    state: &AppState,
    _config: &Config,
    req: RouteRequest<'_>,
) -> Result<Answer, GatewayError> {
    let model = req.target.default_model();
    let response = state.repo.infer(model, None, req.request).await?;
    Ok(Answer {
        model: response.model,
        version: response.version,
        device: response.device.to_string(),
        pool: response.pool,
        reason: "default".to_string(),
        batch_size: response.batch_size,
        outputs: response.outputs,
    })
}
