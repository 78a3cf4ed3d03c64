//! The answers in OpenAI's shape: the embeddings list
//! (`{"object":"list","data":[{"object":"embedding","index":i,
//! "embedding":[...]}],"model":...,"usage":{...}}`) and the model list
//! (`{"object":"list","data":[{"id","object":"model","created":0,
//! "owned_by":"switchyard"}]}`).

use super::error::OpenAiError;
use super::request::EncodingFormat;
use crate::error::GatewayError;
use base64::Engine;
use serde::Serialize;
use switchyard_runtime::{DataType, Tensor, TensorData};

/// One vector, as the request's `encoding_format` asks.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Vector {
    /// JSON numbers (f32, written in their shortest form).
    Float(Vec<f32>),
    /// Base64 of the little-endian f32 bytes.
    Base64(String),
}

#[derive(Debug, Serialize)]
struct Embedding {
    object: &'static str,
    index: usize,
    embedding: Vector,
}

#[derive(Debug, Serialize)]
struct Usage {
    prompt_tokens: usize,
    total_tokens: usize,
}

#[derive(Debug, Serialize)]
struct EmbeddingList<'a> {
    object: &'static str,
    data: Vec<Embedding>,
    model: &'a str,
    usage: Usage,
}

/// The body of an embeddings answer: one row of `output` (FP32
/// `[rows, dim]`) per text, `model` as the client named it, `tokens` the
/// texts' token count.
pub fn embeddings_body(
    output: &Tensor,
    format: EncodingFormat,
    model: &str,
    tokens: usize,
) -> Result<Vec<u8>, OpenAiError> {
    let (TensorData::Fixed(bytes), DataType::F32, [rows, dim]) =
        (output.data(), output.dtype(), output.shape())
    else {
        return Err(GatewayError::Internal(format!(
            "the embedding output is {} {:?}, not FP32 [rows, dim]",
            output.dtype(),
            output.shape()
        ))
        .into());
    };
    let row_bytes = dim.saturating_mul(4);
    let data = bytes
        .chunks_exact(row_bytes.max(1))
        .take(*rows)
        .enumerate()
        .map(|(index, row)| Embedding { object: "embedding", index, embedding: vector(row, format) })
        .collect();
    let list = EmbeddingList {
        object: "list",
        data,
        model,
        usage: Usage { prompt_tokens: tokens, total_tokens: tokens },
    };
    serde_json::to_vec(&list).map_err(|e| GatewayError::Internal(e.to_string()).into())
}

fn vector(row: &[u8], format: EncodingFormat) -> Vector {
    match format {
        EncodingFormat::Base64 => Vector::Base64(base64::engine::general_purpose::STANDARD.encode(row)),
        EncodingFormat::Float => {
            Vector::Float(row.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
        }
    }
}

#[derive(Debug, Serialize)]
struct ModelEntry<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    owned_by: &'static str,
}

#[derive(Debug, Serialize)]
struct ModelList<'a> {
    object: &'static str,
    data: Vec<ModelEntry<'a>>,
}

/// The body of `GET /v1/models` listing `names`.
pub fn models_body(names: &[&str]) -> Vec<u8> {
    let data = names
        .iter()
        .map(|id| ModelEntry { id, object: "model", created: 0, owned_by: "switchyard" })
        .collect();
    serde_json::to_vec(&ModelList { object: "list", data }).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::Value;

    fn tensor(values: &[f32], shape: Vec<usize>) -> Tensor {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor::new(DataType::F32, shape, TensorData::Fixed(Bytes::from(bytes))).unwrap()
    }

    #[test]
    fn float_and_base64_rows() {
        let t = tensor(&[0.1, -2.5, 3.0, 0.25], vec![2, 2]);
        let body: Value =
            serde_json::from_slice(&embeddings_body(&t, EncodingFormat::Float, "m", 7).unwrap()).unwrap();
        assert_eq!(body["object"], "list");
        assert_eq!(body["model"], "m");
        assert_eq!(body["usage"]["prompt_tokens"], 7);
        assert_eq!(body["data"][1]["index"], 1);
        assert_eq!(body["data"][0]["embedding"][0].as_f64().unwrap() as f32, 0.1f32);
        assert_eq!(body["data"][1]["embedding"][1], 0.25);
        let body: Value =
            serde_json::from_slice(&embeddings_body(&t, EncodingFormat::Base64, "m", 7).unwrap()).unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(body["data"][1]["embedding"].as_str().unwrap())
            .unwrap();
        assert_eq!(raw, [3.0f32.to_le_bytes(), 0.25f32.to_le_bytes()].concat());
    }

    #[test]
    fn a_non_embedding_output_is_an_internal_error() {
        let t = tensor(&[1.0, 2.0], vec![2]);
        assert!(embeddings_body(&t, EncodingFormat::Float, "m", 1).is_err());
    }

    #[test]
    fn model_list() {
        let body: Value = serde_json::from_slice(&models_body(&["a", "b"])).unwrap();
        assert_eq!(body["data"][1]["id"], "b");
        assert_eq!(body["data"][0]["owned_by"], "switchyard");
        assert_eq!(body["data"][0]["created"], 0);
    }
}
