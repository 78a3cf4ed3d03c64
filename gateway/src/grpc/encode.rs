//! An answer's [`InferResponseParts`] as a gRPC `ModelInferResponse`.
//!
//! Outputs always travel in `raw_output_contents` (one entry per output,
//! in order, Triton's binary layout), as Triton's own server sends them:
//! fixed-width tensors are handed over without a copy, and every client
//! (`tritonclient`'s `as_numpy`, perf_analyzer) reads raw contents.

use super::params::from_json;
use super::proto::model_infer_response::InferOutputTensor;
use super::proto::ModelInferResponse;
use bytes::Bytes;
use switchyard_protocol::v2::binary::encode_bytes_elements;
use switchyard_protocol::v2::InferResponseParts;
use switchyard_runtime::tensor::TensorData;

/// Encodes one response.
pub fn encode_model_infer(parts: InferResponseParts) -> ModelInferResponse {
    let InferResponseParts { model_name, model_version, id, parameters, outputs } = parts;
    let mut tensors = Vec::with_capacity(outputs.len());
    let mut raw = Vec::with_capacity(outputs.len());
    for (name, tensor, _binary) in outputs {
        tensors.push(InferOutputTensor {
            name,
            datatype: tensor.dtype().v2_name().to_string(),
            shape: tensor.shape().iter().map(|&d| i64::try_from(d).unwrap_or(i64::MAX)).collect(),
            parameters: Default::default(),
            contents: None,
        });
        raw.push(match tensor.data() {
            TensorData::Fixed(bytes) => bytes.clone(),
            TensorData::Strings(items) => {
                let mut out = Vec::new();
                encode_bytes_elements(items, &mut out);
                Bytes::from(out)
            }
        });
    }
    ModelInferResponse {
        model_name,
        model_version: model_version.unwrap_or_default(),
        id: id.unwrap_or_default(),
        parameters: from_json(&parameters.to_map()),
        outputs: tensors,
        raw_output_contents: raw,
    }
}
