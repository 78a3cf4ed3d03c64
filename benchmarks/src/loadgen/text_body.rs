//! `BYTES` text requests for text models: one sentence per line of a file,
//! `per_request` consecutive lines per request (cycling through the file),
//! as V2 JSON strings or Triton binary `BYTES` (each element a 4-byte
//! little-endian length, then its UTF-8 bytes), or as OpenAI embeddings
//! bodies (`{"model": ..., "input": [...]}`), which Switchyard's
//! `/v1/embeddings`, text-embeddings-inference and Infinity all take, so
//! one load drives the peers with the same texts.

use std::path::Path;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use serde::Serialize;

use super::body::{PreparedBody, INFERENCE_HEADER_CONTENT_LENGTH};
use super::error::{LoadgenError, Result};

/// How text requests are built.
#[derive(Debug, Clone)]
pub struct TextRequests {
    /// Name of the `BYTES` input, e.g. `text`.
    pub input: String,
    /// Sentences per request (the request's shape is `[per_request]`).
    pub per_request: usize,
    /// Triton binary tensor extension instead of JSON strings.
    pub binary: bool,
    /// Ask for binary outputs (`binary_data_output`).
    pub binary_output: bool,
    /// OpenAI embeddings bodies naming this model, instead of V2 bodies.
    pub openai_model: Option<String>,
}

#[derive(Serialize)]
struct OpenAiRequest<'a> {
    model: &'a str,
    input: &'a [&'a str],
}

#[derive(Serialize)]
struct Request<'a> {
    inputs: [Input<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Parameters>,
}

#[derive(Serialize)]
struct Parameters {
    binary_data_output: bool,
}

#[derive(Serialize)]
struct Input<'a> {
    name: &'a str,
    shape: [usize; 1],
    datatype: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<InputParameters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a [&'a str]>,
}

#[derive(Serialize)]
struct InputParameters {
    binary_data_size: usize,
}

/// Encodes one request carrying `texts`.
pub fn encode_texts(req: &TextRequests, texts: &[&str]) -> Result<PreparedBody> {
    if let Some(model) = &req.openai_model {
        let body = serde_json::to_vec(&OpenAiRequest { model, input: texts })
            .map_err(|e| LoadgenError::Args(format!("encoding request: {e}")))?;
        return Ok(PreparedBody {
            body: Bytes::from(body),
            headers: vec![(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        });
    }
    let parameters = req.binary_output.then_some(Parameters { binary_data_output: true });
    let json_err = |e: serde_json::Error| LoadgenError::Args(format!("encoding request: {e}"));
    let mut input =
        Input { name: &req.input, shape: [texts.len()], datatype: "BYTES", parameters: None, data: None };
    if !req.binary {
        input.data = Some(texts);
        let body = serde_json::to_vec(&Request { inputs: [input], parameters }).map_err(json_err)?;
        return Ok(PreparedBody {
            body: Bytes::from(body),
            headers: vec![(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        });
    }
    let size = texts.iter().map(|t| 4 + t.len()).sum();
    input.parameters = Some(InputParameters { binary_data_size: size });
    let mut body = serde_json::to_vec(&Request { inputs: [input], parameters }).map_err(json_err)?;
    let header_len = body.len();
    for t in texts {
        let len = u32::try_from(t.len()).map_err(|_| LoadgenError::Args("a text is over 4 GiB".into()))?;
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(t.as_bytes());
    }
    Ok(PreparedBody {
        body: Bytes::from(body),
        headers: vec![
            (CONTENT_TYPE, HeaderValue::from_static("application/octet-stream")),
            (HeaderName::from_static(INFERENCE_HEADER_CONTENT_LENGTH), HeaderValue::from(header_len)),
        ],
    })
}

/// Reads the non-empty lines of `path` and builds `distinct` requests (by
/// default one per line), request `i` holding lines `i*k .. i*k+k` (mod the
/// line count), where k is `per_request`.
pub fn from_text_file(path: &Path, req: &TextRequests, distinct: Option<usize>) -> Result<Vec<PreparedBody>> {
    let bad = |reason: String| LoadgenError::Dataset { path: path.to_path_buf(), reason };
    let text = std::fs::read_to_string(path)
        .map_err(|source| LoadgenError::Io { path: path.to_path_buf(), source })?;
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.is_empty() {
        return Err(bad("no non-empty lines".into()));
    }
    if req.per_request == 0 {
        return Err(LoadgenError::Args("--texts-per-request must be at least 1".into()));
    }
    let count = distinct.unwrap_or(lines.len()).max(1);
    (0..count)
        .map(|i| {
            let texts: Vec<&str> =
                (0..req.per_request).map(|j| lines[(i * req.per_request + j) % lines.len()]).collect();
            encode_texts(req, &texts)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn req(binary: bool, per_request: usize) -> TextRequests {
        TextRequests { input: "text".into(), per_request, binary, binary_output: false, openai_model: None }
    }

    #[test]
    fn openai_bodies() {
        let r = TextRequests { openai_model: Some("minilm-l6".into()), ..req(false, 2) };
        let b = encode_texts(&r, &["a", "b"]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&b.body).unwrap();
        assert_eq!(v, serde_json::json!({"model": "minilm-l6", "input": ["a", "b"]}));
    }

    #[test]
    fn json_strings() {
        let b = encode_texts(&req(false, 2), &["héllo", "a \"quoted\" line"]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&b.body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES",
                                           "data": ["héllo", "a \"quoted\" line"]}]})
        );
    }

    #[test]
    fn binary_bytes_layout() {
        let b = encode_texts(&TextRequests { binary_output: true, ..req(true, 2) }, &["ab", "é"]).unwrap();
        let len: usize = b
            .headers
            .iter()
            .find(|(k, _)| k.as_str() == INFERENCE_HEADER_CONTENT_LENGTH)
            .map(|(_, v)| v.to_str().unwrap().parse().unwrap())
            .unwrap();
        let header: serde_json::Value = serde_json::from_slice(&b.body[..len]).unwrap();
        assert_eq!(header["inputs"][0]["parameters"]["binary_data_size"], 4 + 2 + 4 + 2);
        assert_eq!(header["parameters"]["binary_data_output"], true);
        assert_eq!(&b.body[len..], b"\x02\x00\x00\x00ab\x02\x00\x00\x00\xc3\xa9");
    }

    #[test]
    fn file_lines_cycle_into_requests() {
        let dir = std::env::temp_dir().join(format!("loadgen-text-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.txt");
        std::fs::write(&path, "one\n\n two \nthree\n").unwrap();
        let bodies = from_text_file(&path, &req(false, 2), None).unwrap();
        let data: Vec<serde_json::Value> = bodies
            .iter()
            .map(|b| {
                serde_json::from_slice::<serde_json::Value>(&b.body).unwrap()["inputs"][0]["data"].clone()
            })
            .collect();
        assert_eq!(
            data,
            vec![
                serde_json::json!(["one", "two"]),
                serde_json::json!(["three", "one"]),
                serde_json::json!(["two", "three"])
            ]
        );
        assert_eq!(from_text_file(&path, &req(false, 1), Some(5)).unwrap().len(), 5);
        std::fs::write(&path, "\n\n").unwrap();
        assert!(from_text_file(&path, &req(false, 1), None).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
