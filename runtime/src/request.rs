//! What callers hand to [`crate::ModelRepository::infer`] and what they get
//! back.

use std::time::Duration;

use crate::device::DeviceKind;
use crate::tensor::Tensor;

/// One inference call: named inputs (each with the batch dimension first
/// when the model batches) and, optionally, which outputs to return.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InferenceRequest {
    /// Input tensors by graph input name; every model input must be given.
    pub inputs: Vec<(String, Tensor)>,
    /// Outputs to return, in this order; `None` returns all, in graph order.
    pub outputs: Option<Vec<String>>,
}

impl InferenceRequest {
    /// A request with the given inputs and all outputs.
    pub fn new(inputs: Vec<(String, Tensor)>) -> Self {
        InferenceRequest { inputs, outputs: None }
    }
}

/// The result of one inference call, with where and how it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct InferenceResponse {
    /// The model that ran.
    pub model: String,
    /// Its version.
    pub version: u64,
    /// The pool that ran it.
    pub pool: String,
    /// That pool's device.
    pub device: DeviceKind,
    /// The requested outputs (this request's rows only).
    pub outputs: Vec<(String, Tensor)>,
    /// Rows in the executed batch this request was part of.
    pub batch_size: usize,
    /// Time from enqueueing to the start of the batch's execution.
    pub queue_time: Duration,
    /// Time the batch took to execute (including concatenation and split).
    pub exec_time: Duration,
}

impl InferenceResponse {
    /// One answer put together from the answers of parts of one request
    /// run separately (chunks of a large request, length groups of a text
    /// request): the model, version, pool and device of `first`, with the
    /// assembled `outputs` and the parts' batch size and times.
    pub fn assembled(
        first: &InferenceResponse,
        outputs: Vec<(String, Tensor)>,
        batch_size: usize,
        queue_time: Duration,
        exec_time: Duration,
    ) -> InferenceResponse {
        InferenceResponse {
            model: first.model.clone(),
            version: first.version,
            pool: first.pool.clone(),
            device: first.device,
            outputs,
            batch_size,
            queue_time,
            exec_time,
        }
    }

    /// The output named `name`, if returned.
    pub fn output(&self, name: &str) -> Option<&Tensor> {
        self.outputs.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

/// The rows a request declares: the largest leading dimension of its
/// inputs (0 for scalars), read before anything else is done with it.
pub fn request_rows(req: &InferenceRequest) -> usize {
    req.inputs.iter().filter_map(|(_, t)| t.shape().first().copied()).max().unwrap_or(0)
}

/// The outcome of loading a model's sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// Wall time to build every pool's sessions (and warm them up).
    pub cold_start: Duration,
    /// Per pool, in spec order: `Ok` when it serves, else why it does not.
    pub pools: Vec<(String, Result<(), String>)>,
}
