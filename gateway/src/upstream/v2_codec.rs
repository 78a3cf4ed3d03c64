//! The client side of the V2 protocol: an [`InferenceRequest`] to a body
//! for an upstream server, and the upstream's response (binary or JSON
//! tensors) back to tensors. A request goes with Triton's binary tensor
//! extension ([`encode_request`]: a small JSON header, then the raw tensor
//! bytes, every output asked for as binary) to a server that has it, and
//! as plain JSON tensors ([`encode_request_json`]) to one that does not.
//!
//! A response is trusted no further than it is checked: it must be a V2
//! response object, every tensor's data must match its declared datatype
//! and shape, and the outputs must fit the request and the model's
//! signature ([`super::v2_check`]: datatypes, shapes, one row per request
//! row, the outputs asked for). Anything else is a [`BadResponse`] (the
//! gateway answers 502).

use super::v2_check::{BadResponse, Expected};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchyard_protocol::v2::binary::{binary_size, decode_binary, encode_bytes_elements};
use switchyard_protocol::v2::json_data::parse_json_data;
use switchyard_protocol::v2::{DecodeLimits, JsonData};
use switchyard_runtime::{DataType, InferenceRequest, Tensor, TensorData};

/// A request body and its `Inference-Header-Content-Length`.
#[derive(Debug, Clone)]
pub struct EncodedRequest {
    /// JSON header followed by the input tensors' bytes, or JSON alone.
    pub body: Bytes,
    /// Length of the JSON header; `None` for a JSON body.
    pub header_len: Option<usize>,
}

/// Encodes `request` with binary inputs, asking for binary outputs.
pub fn encode_request(request: &InferenceRequest) -> EncodedRequest {
    let inputs: Vec<Value> = request
        .inputs
        .iter()
        .map(|(name, t)| {
            json!({
                "name": name,
                "shape": t.shape(),
                "datatype": t.dtype().v2_name(),
                "parameters": { "binary_data_size": binary_size(t.data()) },
            })
        })
        .collect();
    let mut header = json!({ "inputs": inputs, "parameters": { "binary_data_output": true } });
    if let Some(outputs) = &request.outputs {
        header["outputs"] = outputs
            .iter()
            .map(|name| json!({ "name": name, "parameters": { "binary_data": true } }))
            .collect();
    }
    let mut body = serde_json::to_vec(&header).unwrap_or_default();
    let header_len = body.len();
    body.reserve(request.inputs.iter().map(|(_, t)| binary_size(t.data())).sum());
    for (_, tensor) in &request.inputs {
        match tensor.data() {
            TensorData::Fixed(raw) => body.extend_from_slice(raw),
            TensorData::Strings(items) => encode_bytes_elements(items, &mut body),
        }
    }
    EncodedRequest { body: Bytes::from(body), header_len: Some(header_len) }
}

/// Encodes `request` with JSON tensors (every input's `data` a flat
/// array), asking for JSON outputs: for servers without the binary tensor
/// extension. Fails, saying which input, when a `BYTES` element is not
/// UTF-8 (a JSON string cannot carry it).
pub fn encode_request_json(request: &InferenceRequest) -> Result<EncodedRequest, String> {
    let mut inputs = Vec::with_capacity(request.inputs.len());
    for (name, t) in &request.inputs {
        let data = serde_json::to_value(JsonData(t))
            .map_err(|e| format!("input '{name}' cannot be sent as JSON tensors: {e}"))?;
        inputs
            .push(json!({ "name": name, "shape": t.shape(), "datatype": t.dtype().v2_name(), "data": data }));
    }
    let mut body = json!({ "inputs": inputs });
    if let Some(outputs) = &request.outputs {
        body["outputs"] = outputs.iter().map(|name| json!({ "name": name })).collect();
    }
    let body = serde_json::to_vec(&body).map_err(|e| format!("the request cannot be encoded: {e}"))?;
    Ok(EncodedRequest { body: Bytes::from(body), header_len: None })
}

#[derive(Deserialize)]
struct RawResponse<'a> {
    #[serde(borrow)]
    outputs: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct RawOutput<'a> {
    name: String,
    datatype: String,
    shape: Vec<usize>,
    #[serde(default)]
    parameters: Option<serde_json::Map<String, Value>>,
    #[serde(default, borrow)]
    data: Option<&'a RawValue>,
}

/// Decodes a response body into output tensors that fit `expected`: those
/// asked for, in that order, or all of them (in the response's order).
pub fn decode_response(
    body: Bytes,
    header_len: Option<usize>,
    expected: &Expected<'_>,
) -> Result<Vec<(String, Tensor)>, BadResponse> {
    let bad = |m: String| BadResponse(m);
    let header_len = header_len.unwrap_or(body.len());
    let header =
        body.get(..header_len).ok_or_else(|| bad(format!("header length {header_len} exceeds the body")))?;
    let raw: RawResponse<'_> =
        serde_json::from_slice(header).map_err(|e| bad(format!("not a V2 response: {e}")))?;
    let limits = DecodeLimits::default();
    let binary = body.slice(header_len..);
    let mut offset = 0usize;
    let mut outputs: Vec<(String, Tensor)> = Vec::with_capacity(raw.outputs.len());
    for raw_output in raw.outputs {
        let out: RawOutput<'_> =
            serde_json::from_str(raw_output.get()).map_err(|e| bad(format!("bad output object: {e}")))?;
        let dtype = DataType::from_v2_name(&out.datatype)
            .ok_or_else(|| bad(format!("output '{}' has unknown datatype {:?}", out.name, out.datatype)))?;
        let count = limits.check_shape(&out.name, &out.shape).map_err(|e| bad(e.to_string()))?;
        let size = out.parameters.as_ref().and_then(|p| p.get("binary_data_size")).map(Value::as_u64);
        let data = match (out.data, size) {
            (Some(json), None) => parse_json_data(&out.name, dtype, &out.shape, count, json),
            (None, Some(Some(size))) => {
                let size = usize::try_from(size).unwrap_or(usize::MAX);
                let end = offset.checked_add(size).filter(|end| *end <= binary.len()).ok_or_else(|| {
                    bad(format!("output '{}' claims {size} bytes past the end of the body", out.name))
                })?;
                let slice = binary.slice(offset..end);
                offset = end;
                decode_binary(&out.name, dtype, &out.shape, count, slice)
            }
            _ => {
                return Err(bad(format!(
                    "output '{}' has neither data nor a valid binary_data_size",
                    out.name
                )))
            }
        }
        .map_err(|e| bad(e.to_string()))?;
        let tensor = Tensor::new(dtype, out.shape, data).map_err(|e| bad(e.to_string()))?;
        outputs.push((out.name, tensor));
    }
    if offset != binary.len() {
        return Err(bad(format!("{} unexplained bytes after the outputs", binary.len() - offset)));
    }
    expected.check(outputs)
}

#[cfg(test)]
mod tests;
