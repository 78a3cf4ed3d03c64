//! One recorded call as a JSON line (format version 1; see the module
//! docs of [`crate::record`]). Encoded on the writer thread.

use crate::error::GatewayError;
use base64::Engine;
use router_policies::{Device, Reason};
use serde_json::{json, Value};
use switchyard_protocol::answer::Answer;
use switchyard_protocol::v2::binary::encode_bytes_elements;
use switchyard_protocol::v2::Parameters;
use switchyard_runtime::tensor::TensorData;
use switchyard_runtime::Tensor;

/// The format version written in every line (`"v"`).
pub const FORMAT_VERSION: u64 = 1;

/// How a recorded call ended.
#[derive(Debug, Clone)]
pub enum Ending {
    /// Answered, from `cache` (`hit-l1`, `miss`, ...).
    Answered {
        /// How the answer was reached.
        answer: Decision,
        /// The cache outcome.
        cache: &'static str,
    },
    /// Failed with this HTTP status and error label.
    Failed {
        /// HTTP status (gRPC: the status the same failure has over REST).
        status: u16,
        /// The error's label.
        label: &'static str,
    },
}

/// What a record keeps of an answer: how it was reached, not its outputs
/// (a queued record holds no more memory than its inputs).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The model that answered.
    pub model: String,
    /// Its version.
    pub version: u64,
    /// The pool that ran it.
    pub pool: String,
    /// The pool's device.
    pub device: Device,
    /// Why this model and pool.
    pub reason: Reason,
    /// Rows of the batch that ran it.
    pub batch_size: usize,
    /// Whether the answer was degraded.
    pub degraded: bool,
    /// The cheap model's confidence when a cascade judged it.
    pub confidence: Option<f32>,
}

impl From<&Answer> for Decision {
    fn from(answer: &Answer) -> Decision {
        Decision {
            model: answer.model.clone(),
            version: answer.version,
            pool: answer.pool.clone(),
            device: answer.device,
            reason: answer.reason,
            batch_size: answer.batch_size,
            degraded: answer.degraded,
            confidence: answer.confidence,
        }
    }
}

impl Ending {
    /// The ending of a call that produced `result`.
    pub fn of(result: &Result<(std::sync::Arc<Answer>, &'static str), &GatewayError>) -> Ending {
        match result {
            Ok((answer, cache)) => Ending::Answered { answer: Decision::from(&**answer), cache },
            Err(e) => Ending::Failed { status: e.status(), label: e.label() },
        }
    }
}

/// One recorded inference call.
#[derive(Debug, Clone)]
pub struct TrafficRecord {
    /// The route.
    pub route: String,
    /// Arrival, milliseconds since the Unix epoch.
    pub arrived_ms: u64,
    /// `rest`, `grpc` or `openai`.
    pub protocol: &'static str,
    /// The request `id`.
    pub id: Option<String>,
    /// The tenant, hashed ([`hash_tenant`]).
    pub tenant: Option<String>,
    /// Inputs as decoded.
    pub inputs: Vec<(String, Tensor)>,
    /// Requested outputs (empty: all).
    pub outputs: Vec<String>,
    /// Request parameters.
    pub parameters: Parameters,
    /// The request's budget in ms.
    pub budget_ms: u64,
    /// Arrival to answer (or failure), microseconds.
    pub latency_us: u64,
    /// How it ended.
    pub ending: Ending,
}

/// A tenant as recorded: the first 16 hex digits of its BLAKE3 hash, so
/// lines from one tenant group together without naming it.
pub fn hash_tenant(tenant: &str) -> String {
    blake3::hash(tenant.as_bytes()).to_hex()[..16].to_string()
}

/// Bytes of a tensor's data in Triton's binary layout.
fn binary_len(tensor: &Tensor) -> usize {
    match tensor.data() {
        TensorData::Fixed(bytes) => bytes.len(),
        TensorData::Strings(items) => {
            items.iter().map(|s| s.len().saturating_add(4)).fold(0, usize::saturating_add)
        }
    }
}

/// Bytes of the strings and keys in a JSON value, at any depth (at least
/// what its text takes, at most a fraction of what it holds in memory).
fn json_text_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(json_text_len).fold(0, usize::saturating_add),
        Value::Object(map) => {
            map.iter().map(|(k, v)| k.len().saturating_add(json_text_len(v))).fold(0, usize::saturating_add)
        }
        _ => 1,
    }
}

/// Memory of one small value besides its text (a `Value` and its share
/// of the map or array that holds it), for [`TrafficRecord::held_bytes`].
const VALUE_OVERHEAD: usize = 64;

/// A tensor's data in Triton's binary layout, base64.
fn data_b64(tensor: &Tensor) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    match tensor.data() {
        TensorData::Fixed(bytes) => engine.encode(bytes),
        TensorData::Strings(items) => {
            let mut out = Vec::new();
            encode_bytes_elements(items, &mut out);
            engine.encode(out)
        }
    }
}

impl TrafficRecord {
    /// A lower bound of the bytes of [`Self::to_line`]: the inputs' data in
    /// base64 and the text of the id and parameters. A record whose bound
    /// passes its route's `max_line_bytes` is dropped before it is queued
    /// or encoded.
    pub fn line_floor(&self) -> usize {
        let inputs = self.inputs.iter().map(|(name, t)| {
            // base64: 4 characters per 3 bytes, the last group padded.
            binary_len(t).div_ceil(3).saturating_mul(4).saturating_add(name.len())
        });
        let parameters = self.parameters.iter().map(|(k, v)| k.len().saturating_add(json_text_len(v)));
        inputs.chain(parameters).fold(self.id.as_ref().map_or(0, String::len), usize::saturating_add)
    }

    /// About the memory the record holds while queued (after
    /// [`Self::detach`]): its inputs' data, each string's handle, the id
    /// and the parameters. What bounds the writer's queue.
    pub fn held_bytes(&self) -> usize {
        let inputs = self.inputs.iter().map(|(name, t)| {
            let handles = match t.data() {
                TensorData::Fixed(_) => 0,
                TensorData::Strings(items) => items.len().saturating_mul(std::mem::size_of::<bytes::Bytes>()),
            };
            binary_len(t).saturating_add(handles).saturating_add(name.len())
        });
        let values = self.parameters.len().saturating_add(1).saturating_mul(VALUE_OVERHEAD);
        let parameters = self.parameters.iter().map(|(k, v)| k.len().saturating_add(json_text_len(v)));
        inputs.chain(parameters).fold(values, usize::saturating_add)
    }

    /// The record with its inputs' data in buffers of its own: an input
    /// decoded from binary data is a slice of the whole request body, which
    /// a queued record would otherwise keep alive (and [`Self::held_bytes`]
    /// would not see).
    pub fn detach(mut self) -> TrafficRecord {
        for (_, tensor) in &mut self.inputs {
            let data = match tensor.data() {
                TensorData::Fixed(bytes) => TensorData::Fixed(bytes::Bytes::copy_from_slice(bytes)),
                TensorData::Strings(items) => {
                    TensorData::Strings(items.iter().map(|s| bytes::Bytes::copy_from_slice(s)).collect())
                }
            };
            // The same datatype, shape and element count: this cannot fail.
            if let Ok(copy) = Tensor::new(tensor.dtype(), tensor.shape().to_vec(), data) {
                *tensor = copy;
            }
        }
        self
    }

    /// The record as one JSON line, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        let inputs: Vec<Value> = self
            .inputs
            .iter()
            .map(|(name, t)| {
                json!({ "name": name, "datatype": t.dtype().v2_name(), "shape": t.shape(), "data_b64": data_b64(t) })
            })
            .collect();
        let (answer, error) = match &self.ending {
            Ending::Answered { answer, cache } => (
                json!({
                    "model": answer.model,
                    "version": answer.version,
                    "pool": answer.pool,
                    "device": answer.device.as_str(),
                    "reason": answer.reason.as_str(),
                    "batch_size": answer.batch_size,
                    "degraded": answer.degraded,
                    "cache": cache,
                    "confidence": answer.confidence,
                }),
                Value::Null,
            ),
            Ending::Failed { status, label } => (Value::Null, json!({ "status": status, "error": label })),
        };
        let line = json!({
            "v": FORMAT_VERSION,
            "route": self.route,
            "arrived_ms": self.arrived_ms,
            "protocol": self.protocol,
            "id": self.id,
            "tenant": self.tenant,
            "inputs": inputs,
            "outputs": self.outputs,
            "parameters": self.parameters,
            "budget_ms": self.budget_ms,
            "latency_us": self.latency_us,
            "answer": answer,
            "error": error,
        });
        let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

#[cfg(test)]
mod tests;
