//! Encoding of infer responses: a JSON header, then, with the binary tensor
//! data extension, the bytes of each binary output in order.
//!
//! The JSON is written in one pass by serde straight into the body buffer;
//! tensor `data` arrays are streamed from the raw little-endian bytes (no
//! `serde_json::Value` tree), floats in the shortest form that parses back
//! to the same value.

use bytes::Bytes;
use serde::ser::{Error as _, SerializeSeq};
use serde::{Serialize, Serializer};
use switchyard_runtime::tensor::{DataType, Tensor, TensorData};

use super::binary::{binary_size, encode_bytes_elements};
use super::error::error_body;
use super::float16::{bf16_bits_to_f32, f16_bits_to_f32};
use super::response_parameters::ResponseParameters;

/// The HTTP header that gives the length of the JSON part of a body with
/// binary tensor data.
pub const INFERENCE_HEADER_CONTENT_LENGTH: &str = "Inference-Header-Content-Length";
/// Content type of an all-JSON body.
pub const CONTENT_TYPE_JSON: &str = "application/json";
/// Content type of a body with binary tensor data after the JSON.
pub const CONTENT_TYPE_BINARY: &str = "application/octet-stream";

/// What an infer response says.
#[derive(Debug, Clone, PartialEq)]
pub struct InferResponseParts {
    /// `model_name`: the name the client called (the route).
    pub model_name: String,
    /// `model_version`, omitted when `None`.
    pub model_version: Option<String>,
    /// The request's `id`, echoed; omitted when `None`.
    pub id: Option<String>,
    /// Response `parameters` (the answer's explanation and what a front
    /// end adds); omitted when empty.
    pub parameters: ResponseParameters,
    /// Outputs in order: name, tensor, and whether to send it as binary.
    pub outputs: Vec<(String, Tensor, bool)>,
}

/// An encoded response body and the headers that describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBody {
    /// The body.
    pub body: Bytes,
    /// Length of the JSON part when any output is binary: send it as
    /// [`INFERENCE_HEADER_CONTENT_LENGTH`] (`tritonclient` requires it).
    pub header_len: Option<usize>,
    /// [`CONTENT_TYPE_BINARY`] when `header_len` is set, else
    /// [`CONTENT_TYPE_JSON`].
    pub content_type: &'static str,
}

#[derive(Serialize)]
struct Header<'a> {
    model_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "ResponseParameters::is_empty")]
    parameters: &'a ResponseParameters,
    outputs: Vec<OutputHeader<'a>>,
}

#[derive(Serialize)]
struct OutputHeader<'a> {
    name: &'a str,
    datatype: &'static str,
    shape: &'a [usize],
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<BinaryParameters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<JsonData<'a>>,
}

#[derive(Serialize)]
struct BinaryParameters {
    binary_data_size: usize,
}

/// A tensor's elements as a flat JSON array.
/// A tensor's elements as a flat JSON array, the V2 `data` field: numbers
/// (`NaN`/infinite floats as `null`, `FP16`/`BF16` as their exact values),
/// booleans, or strings (`BYTES`, which must be UTF-8: serializing fails
/// otherwise). Used for JSON outputs, and by the gateway's upstream client
/// for servers that read only JSON tensors.
pub struct JsonData<'a>(pub &'a Tensor);

/// Streams fixed-width little-endian elements of `$ty` through `$map`.
macro_rules! le_elements {
    ($seq:expr, $raw:expr, $ty:ty, $map:expr) => {{
        const N: usize = std::mem::size_of::<$ty>();
        for chunk in $raw.chunks_exact(N) {
            let mut le = [0u8; N];
            le.copy_from_slice(chunk);
            $seq.serialize_element(&$map(<$ty>::from_le_bytes(le)))?;
        }
    }};
}

impl Serialize for JsonData<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let tensor = self.0;
        let mut seq = serializer.serialize_seq(Some(tensor.len()))?;
        match tensor.data() {
            TensorData::Strings(items) => {
                for item in items {
                    let text = std::str::from_utf8(item).map_err(S::Error::custom)?;
                    seq.serialize_element(text)?;
                }
            }
            TensorData::Fixed(raw) => match tensor.dtype() {
                DataType::Bool => le_elements!(seq, raw, u8, |b: u8| b != 0),
                DataType::U8 => le_elements!(seq, raw, u8, |v: u8| v),
                DataType::U16 => le_elements!(seq, raw, u16, |v: u16| v),
                DataType::U32 => le_elements!(seq, raw, u32, |v: u32| v),
                DataType::U64 => le_elements!(seq, raw, u64, |v: u64| v),
                DataType::I8 => le_elements!(seq, raw, i8, |v: i8| v),
                DataType::I16 => le_elements!(seq, raw, i16, |v: i16| v),
                DataType::I32 => le_elements!(seq, raw, i32, |v: i32| v),
                DataType::I64 => le_elements!(seq, raw, i64, |v: i64| v),
                DataType::F16 => le_elements!(seq, raw, u16, f16_bits_to_f32),
                DataType::BF16 => le_elements!(seq, raw, u16, bf16_bits_to_f32),
                DataType::F32 => le_elements!(seq, raw, f32, |v: f32| v),
                DataType::F64 => le_elements!(seq, raw, f64, |v: f64| v),
                DataType::Bytes => return Err(S::Error::custom("BYTES tensor with fixed-width data")),
            },
        }
        seq.end()
    }
}

/// Whether an output must go as binary: asked for, or `BYTES` elements
/// that are not UTF-8 and so cannot be JSON strings.
fn sends_binary(tensor: &Tensor, requested: bool) -> bool {
    requested
        || match tensor.data() {
            TensorData::Strings(items) => items.iter().any(|s| std::str::from_utf8(s).is_err()),
            TensorData::Fixed(_) => false,
        }
}

/// Encodes an infer response.
///
/// JSON outputs carry a flat `data` array (`NaN`/infinite floats as
/// `null`; `FP16`/`BF16` as their exact numeric values). Binary outputs
/// carry `parameters.binary_data_size` and their bytes follow the JSON in
/// output order. A `BYTES` output that is not valid UTF-8 is sent as binary
/// even when JSON was asked for, since `tritonclient` reads each output by
/// its own `binary_data_size`.
pub fn encode_infer_response(resp: &InferResponseParts) -> EncodedBody {
    let binary_flags: Vec<bool> =
        resp.outputs.iter().map(|(_, tensor, binary)| sends_binary(tensor, *binary)).collect();
    let mut json_estimate = 256 + resp.model_name.len();
    let mut binary_total = 0usize;
    let mut outputs = Vec::with_capacity(resp.outputs.len());
    for ((name, tensor, _), &binary) in resp.outputs.iter().zip(&binary_flags) {
        json_estimate += 96 + name.len() + 8 * tensor.shape().len();
        let (parameters, data) = if binary {
            let size = binary_size(tensor.data());
            binary_total += size;
            (Some(BinaryParameters { binary_data_size: size }), None)
        } else {
            json_estimate += 16 * tensor.len();
            (None, Some(JsonData(tensor)))
        };
        outputs.push(OutputHeader {
            name,
            datatype: tensor.dtype().v2_name(),
            shape: tensor.shape(),
            parameters,
            data,
        });
    }
    let header = Header {
        model_name: &resp.model_name,
        model_version: resp.model_version.as_deref(),
        id: resp.id.as_deref(),
        parameters: &resp.parameters,
        outputs,
    };
    let mut body = Vec::with_capacity(json_estimate + binary_total);
    if let Err(err) = serde_json::to_writer(&mut body, &header) {
        // Unreachable in practice: writing to a Vec cannot fail and every
        // tensor is representable (non-UTF-8 strings go binary). Keep the
        // function total and the failure visible to the client.
        return EncodedBody {
            body: error_body(&format!("failed to encode the response: {err}")),
            header_len: None,
            content_type: CONTENT_TYPE_JSON,
        };
    }
    if !binary_flags.contains(&true) {
        return EncodedBody { body: Bytes::from(body), header_len: None, content_type: CONTENT_TYPE_JSON };
    }
    let header_len = body.len();
    for ((_, tensor, _), &binary) in resp.outputs.iter().zip(&binary_flags) {
        if binary {
            match tensor.data() {
                TensorData::Fixed(raw) => body.extend_from_slice(raw),
                TensorData::Strings(items) => encode_bytes_elements(items, &mut body),
            }
        }
    }
    EncodedBody { body: Bytes::from(body), header_len: Some(header_len), content_type: CONTENT_TYPE_BINARY }
}
