//! Cache keys: blake3 over everything that determines an answer.
//!
//! What is in the key, in this order, each section tagged:
//! 1. the key layout version ([`KEY_LAYOUT`]);
//! 2. the name the client called and whether it is a route;
//! 3. each model the route may use: name, configured `version` and file
//!    path (a version bump or a new file path changes every key, so old
//!    entries are never served for the new model), and the route's
//!    routing policy as configured (a new cascade threshold may change
//!    which model answers);
//! 4. the tenant scope: the tenant of the route's API key (`crate::auth`),
//!    `None` on open routes;
//! 5. each input in request order: name, datatype, shape, and the raw
//!    little-endian bytes (`BYTES`: element count, then each element
//!    length-prefixed), and its parameters except `binary_data_size`;
//! 6. the requested outputs in order: name, `classification` k, other
//!    parameters except `binary_data` (binary or JSON does not change
//!    values); an empty list means "all outputs";
//! 7. the request `parameters` except those in [`NEUTRAL_PARAMETERS`].
//!
//! Not in the key: the request `id`, how tensors were encoded (JSON and
//! binary decode to identical tensors), headers (the latency budget header
//! chooses how fast, not what, a route answers; see the module docs of
//! [`super`]). Unknown parameters are keyed: a custom parameter may change
//! the answer, so keying it is the safe default.
//!
//! Every variable-length field is length-prefixed and every list is
//! count-prefixed, so the byte stream is prefix-free: two different
//! requests never hash the same bytes. The request is destructured, so a
//! new field in [`DecodedRequest`] or [`RequestedOutput`] fails to build
//! until it is either keyed or explicitly ignored here.

use serde_json::Value;
use std::path::Path;
use switchyard_protocol::v2::{DecodedRequest, Parameters, RequestedOutput};
use switchyard_runtime::{Tensor, TensorData};

/// Version of the key layout; change it when the encoding below changes.
pub const KEY_LAYOUT: &[u8] = b"switchyard-cache-key-v1";

/// Request-level `parameters` that do not change the answer: deadlines,
/// scheduling and response encoding.
pub const NEUTRAL_PARAMETERS: &[&str] = &["timeout", "priority", "binary_data_output", "stream"];

/// Input parameters that only describe the wire encoding.
const NEUTRAL_INPUT_PARAMETERS: &[&str] = &["binary_data_size"];

/// Output parameters that only describe the wire encoding; `classification`
/// is keyed through [`RequestedOutput::classification`].
const NEUTRAL_OUTPUT_PARAMETERS: &[&str] = &["binary_data", "classification"];

/// A 256-bit cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    /// Lower-case hex, as used in Redis key names.
    pub fn to_hex(self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }
}

/// One model a route may use, as it enters the key.
#[derive(Debug, Clone, Copy)]
pub struct ModelGeneration<'a> {
    /// Model name.
    pub name: &'a str,
    /// Its configured version.
    pub version: u64,
    /// Its ONNX file.
    pub path: &'a Path,
}

/// Who and what a request addresses, besides its tensors.
#[derive(Debug, Clone)]
pub struct KeyScope<'a> {
    /// The name the client called (route or model).
    pub name: &'a str,
    /// True when `name` is a route.
    pub is_route: bool,
    /// The models that may answer, in route order.
    pub models: Vec<ModelGeneration<'a>>,
    /// The route's fingerprint ([`crate::config::RouteConfig::fingerprint`]):
    /// policy settings and model file identities, rendered canonically (its `Debug`
    /// text); empty for a model addressed directly.
    pub policy: &'a str,
    /// The tenant, when requests are authenticated; `None` otherwise.
    pub tenant: Option<&'a str>,
}

/// Computes the key of `request` within `scope`.
pub fn request_key(scope: &KeyScope<'_>, request: &DecodedRequest) -> CacheKey {
    let KeyScope { name, is_route, models, policy, tenant } = scope;
    // `id` and `binary_data_output` do not change the answer.
    let DecodedRequest { id: _, inputs, input_parameters, outputs, binary_data_output: _, parameters } =
        request;
    let mut w = KeyWriter(blake3::Hasher::new());
    w.bytes(KEY_LAYOUT);
    w.tag(b'R');
    w.str(name);
    w.tag(u8::from(*is_route));
    w.tag(b'M');
    w.count(models.len());
    for ModelGeneration { name, version, path } in models {
        w.str(name);
        w.u64(*version);
        w.bytes(path.as_os_str().as_encoded_bytes());
    }
    w.str(policy);
    w.tag(b'T');
    w.opt_str(*tenant);
    w.tag(b'I');
    w.count(inputs.len());
    let no_parameters = Parameters::new();
    for (i, (input_name, tensor)) in inputs.iter().enumerate() {
        w.str(input_name);
        w.tensor(tensor);
        w.parameters(input_parameters.get(i).unwrap_or(&no_parameters), NEUTRAL_INPUT_PARAMETERS);
    }
    w.tag(b'O');
    w.count(outputs.len());
    for RequestedOutput { name, binary: _, classification, parameters } in outputs {
        w.str(name);
        match classification {
            None => w.tag(0),
            Some(k) => {
                w.tag(1);
                w.count(*k);
            }
        }
        w.parameters(parameters, NEUTRAL_OUTPUT_PARAMETERS);
    }
    w.tag(b'P');
    w.parameters(parameters, NEUTRAL_PARAMETERS);
    CacheKey(*w.0.finalize().as_bytes())
}

/// Writes tagged, length-prefixed fields into the hasher.
struct KeyWriter(blake3::Hasher);

impl KeyWriter {
    fn tag(&mut self, tag: u8) {
        self.0.update(&[tag]);
    }

    fn u64(&mut self, value: u64) {
        self.0.update(&value.to_le_bytes());
    }

    fn count(&mut self, n: usize) {
        self.u64(n as u64);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.update(bytes);
    }

    fn str(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    fn opt_str(&mut self, text: Option<&str>) {
        match text {
            None => self.tag(0),
            Some(t) => {
                self.tag(1);
                self.str(t);
            }
        }
    }

    fn tensor(&mut self, tensor: &Tensor) {
        self.str(tensor.dtype().v2_name());
        self.count(tensor.shape().len());
        for &dim in tensor.shape() {
            self.count(dim);
        }
        match tensor.data() {
            TensorData::Fixed(bytes) => {
                self.tag(b'F');
                self.bytes(bytes);
            }
            TensorData::Strings(items) => {
                self.tag(b'S');
                self.count(items.len());
                for item in items {
                    self.bytes(item);
                }
            }
        }
    }

    /// Parameters in sorted key order, without the `neutral` ones.
    fn parameters(&mut self, parameters: &Parameters, neutral: &[&str]) {
        let mut keyed: Vec<(&String, &Value)> =
            parameters.iter().filter(|(k, _)| !neutral.contains(&k.as_str())).collect();
        keyed.sort_by(|a, b| a.0.cmp(b.0));
        self.count(keyed.len());
        for (k, v) in keyed {
            self.str(k);
            self.value(v);
        }
    }

    /// A JSON value, canonically: objects in sorted key order.
    fn value(&mut self, value: &Value) {
        match value {
            Value::Null => self.tag(b'n'),
            Value::Bool(b) => {
                self.tag(b'b');
                self.tag(u8::from(*b));
            }
            Value::Number(n) => {
                self.tag(b'#');
                self.str(&n.to_string());
            }
            Value::String(s) => {
                self.tag(b's');
                self.str(s);
            }
            Value::Array(items) => {
                self.tag(b'a');
                self.count(items.len());
                for item in items {
                    self.value(item);
                }
            }
            Value::Object(map) => {
                self.tag(b'o');
                self.parameters(map, &[]);
            }
        }
    }
}

#[cfg(test)]
mod tests;
