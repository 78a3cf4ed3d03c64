//! Request bodies: raw files, generated V2 infer requests (JSON or Triton
//! binary tensor extension), and dataset rows.

use std::path::Path;
use std::str::FromStr;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::error::{LoadgenError, Result};

/// Header carrying the length of the JSON part of a binary-extension request.
pub const INFERENCE_HEADER_CONTENT_LENGTH: &str = "inference-header-content-length";

/// V2 tensor datatypes the generator can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datatype {
    /// `BOOL`, one byte per element in binary form.
    Bool,
    /// `UINT8`.
    Uint8,
    /// `INT8`.
    Int8,
    /// `INT32`.
    Int32,
    /// `INT64`.
    Int64,
    /// `FP32`.
    Fp32,
    /// `FP64`.
    Fp64,
}

impl Datatype {
    /// The V2 protocol name, e.g. `FP32`.
    pub fn as_str(self) -> &'static str {
        match self {
            Datatype::Bool => "BOOL",
            Datatype::Uint8 => "UINT8",
            Datatype::Int8 => "INT8",
            Datatype::Int32 => "INT32",
            Datatype::Int64 => "INT64",
            Datatype::Fp32 => "FP32",
            Datatype::Fp64 => "FP64",
        }
    }

    /// Bytes per element in the binary tensor encoding.
    pub fn byte_size(self) -> usize {
        match self {
            Datatype::Bool | Datatype::Uint8 | Datatype::Int8 => 1,
            Datatype::Int32 | Datatype::Fp32 => 4,
            Datatype::Int64 | Datatype::Fp64 => 8,
        }
    }

    /// A random value of this type (floats in [0, 16), like the digits data set).
    fn random(self, rng: &mut StdRng) -> f64 {
        match self {
            Datatype::Bool => f64::from(u8::from(rng.random::<bool>())),
            Datatype::Uint8 => f64::from(rng.random::<u8>()),
            Datatype::Int8 => f64::from(rng.random::<i8>()),
            Datatype::Int32 | Datatype::Int64 => f64::from(rng.random_range(0..1000_i32)),
            Datatype::Fp32 | Datatype::Fp64 => rng.random_range(0.0..16.0),
        }
    }
}

impl FromStr for Datatype {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(match s.to_ascii_uppercase().as_str() {
            "BOOL" => Datatype::Bool,
            "UINT8" => Datatype::Uint8,
            "INT8" => Datatype::Int8,
            "INT32" => Datatype::Int32,
            "INT64" => Datatype::Int64,
            "FP32" => Datatype::Fp32,
            "FP64" => Datatype::Fp64,
            other => return Err(format!("unsupported datatype {other:?}")),
        })
    }
}

/// Name and shape of the single input tensor of generated requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    /// Input name, e.g. `X`.
    pub name: String,
    /// Concrete shape, e.g. `[1, 64]`.
    pub shape: Vec<u64>,
}

impl TensorSpec {
    /// Parses `NAME:D1,D2,...`, e.g. `X:1,64`.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |why: &str| LoadgenError::Args(format!("--input-shape {s:?}: {why} (expected NAME:1,64)"));
        let (name, dims) = s.split_once(':').ok_or_else(|| bad("missing ':'"))?;
        if name.is_empty() {
            return Err(bad("empty name"));
        }
        let shape = dims
            .split(',')
            .map(|d| d.trim().parse::<u64>().map_err(|_| bad("dimensions must be non-negative integers")))
            .collect::<Result<Vec<_>>>()?;
        Ok(TensorSpec { name: name.to_string(), shape })
    }

    /// Number of elements (product of the dimensions).
    pub fn elements(&self) -> Result<usize> {
        self.shape
            .iter()
            .try_fold(1_u64, |acc, d| acc.checked_mul(*d))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| LoadgenError::Args(format!("shape {:?} is too large", self.shape)))
    }
}

/// One ready-to-send body and the headers that go with it. Cloning is cheap
/// (`Bytes` and `HeaderValue` are reference counted).
#[derive(Debug, Clone)]
pub struct PreparedBody {
    /// The request body.
    pub body: Bytes,
    /// Headers implied by the body (content type, binary header length).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// Options for V2 request encoding.
#[derive(Debug, Clone, Copy)]
pub struct Encoding {
    /// Tensor datatype.
    pub datatype: Datatype,
    /// Use the Triton binary tensor extension.
    pub binary: bool,
    /// Ask for binary outputs.
    pub binary_output: bool,
}

#[derive(Serialize)]
struct InferRequest<'a> {
    inputs: [InputTensor<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<RequestParameters>,
}

#[derive(Serialize)]
struct RequestParameters {
    binary_data_output: bool,
}

#[derive(Serialize)]
struct InputTensor<'a> {
    name: &'a str,
    shape: &'a [u64],
    datatype: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<InputParameters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<TensorData>,
}

#[derive(Serialize)]
struct InputParameters {
    binary_data_size: usize,
}

#[derive(Serialize)]
#[serde(untagged)]
enum TensorData {
    Bool(Vec<bool>),
    Int(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl TensorData {
    fn new(datatype: Datatype, values: &[f64]) -> Self {
        match datatype {
            Datatype::Bool => TensorData::Bool(values.iter().map(|v| *v != 0.0).collect()),
            Datatype::Uint8 | Datatype::Int8 | Datatype::Int32 | Datatype::Int64 => {
                TensorData::Int(values.iter().map(|v| *v as i64).collect())
            }
            Datatype::Fp32 => TensorData::F32(values.iter().map(|v| *v as f32).collect()),
            Datatype::Fp64 => TensorData::F64(values.to_vec()),
        }
    }
}

/// Appends the little-endian binary encoding of `values` to `out`.
fn push_le(out: &mut Vec<u8>, datatype: Datatype, values: &[f64]) {
    out.reserve(values.len() * datatype.byte_size());
    for &v in values {
        match datatype {
            Datatype::Bool => out.push(u8::from(v != 0.0)),
            Datatype::Uint8 => out.push(v as u8),
            Datatype::Int8 => out.extend_from_slice(&(v as i8).to_le_bytes()),
            Datatype::Int32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            Datatype::Int64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
            Datatype::Fp32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            Datatype::Fp64 => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
}

fn header_value(n: usize) -> HeaderValue {
    HeaderValue::from(n)
}

/// Encodes one V2 infer request with a single input tensor.
pub fn encode_v2(spec: &TensorSpec, enc: Encoding, values: &[f64]) -> Result<PreparedBody> {
    let expected = spec.elements()?;
    if values.len() != expected {
        return Err(LoadgenError::Args(format!(
            "tensor {} has shape {:?} ({expected} elements) but {} values",
            spec.name,
            spec.shape,
            values.len()
        )));
    }
    let parameters = enc.binary_output.then_some(RequestParameters { binary_data_output: true });
    let json_err = |e: serde_json::Error| LoadgenError::Args(format!("encoding request: {e}"));
    if enc.binary {
        let size = expected * enc.datatype.byte_size();
        let request = InferRequest {
            inputs: [InputTensor {
                name: &spec.name,
                shape: &spec.shape,
                datatype: enc.datatype.as_str(),
                parameters: Some(InputParameters { binary_data_size: size }),
                data: None,
            }],
            parameters,
        };
        let mut body = serde_json::to_vec(&request).map_err(json_err)?;
        let header_len = body.len();
        push_le(&mut body, enc.datatype, values);
        Ok(PreparedBody {
            body: Bytes::from(body),
            headers: vec![
                (CONTENT_TYPE, HeaderValue::from_static("application/octet-stream")),
                (HeaderName::from_static(INFERENCE_HEADER_CONTENT_LENGTH), header_value(header_len)),
            ],
        })
    } else {
        let request = InferRequest {
            inputs: [InputTensor {
                name: &spec.name,
                shape: &spec.shape,
                datatype: enc.datatype.as_str(),
                parameters: None,
                data: Some(TensorData::new(enc.datatype, values)),
            }],
            parameters,
        };
        let body = serde_json::to_vec(&request).map_err(json_err)?;
        Ok(PreparedBody {
            body: Bytes::from(body),
            headers: vec![(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        })
    }
}

/// Generates `distinct` different requests with random data from `seed`.
pub fn generate(spec: &TensorSpec, enc: Encoding, distinct: usize, seed: u64) -> Result<Vec<PreparedBody>> {
    let n = spec.elements()?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(n);
    (0..distinct.max(1))
        .map(|_| {
            values.clear();
            values.extend((0..n).map(|_| enc.datatype.random(&mut rng)));
            encode_v2(spec, enc, &values)
        })
        .collect()
}

/// Reads a raw body file, sent unchanged with `Content-Type: application/json`
/// unless a `--header` overrides it.
pub fn from_file(path: &Path) -> Result<Vec<PreparedBody>> {
    let data = std::fs::read(path).map_err(|source| LoadgenError::Io { path: path.to_path_buf(), source })?;
    Ok(vec![PreparedBody {
        body: Bytes::from(data),
        headers: vec![(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
    }])
}

/// Reads `{"NAME": [[v, ...], ...], ...}` and encodes each row (at most
/// `limit`) as a request for input `NAME` with shape `[1, row length]`.
/// `key` picks NAME; by default it is the only key holding an array of arrays
/// (other keys, such as labels or a description, are ignored).
pub fn from_dataset(
    path: &Path,
    key: Option<&str>,
    enc: Encoding,
    limit: Option<usize>,
) -> Result<Vec<PreparedBody>> {
    let bad = |reason: String| LoadgenError::Dataset { path: path.to_path_buf(), reason };
    let text = std::fs::read(path).map_err(|source| LoadgenError::Io { path: path.to_path_buf(), source })?;
    let value: serde_json::Value = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
    let obj = value.as_object().ok_or_else(|| bad("top level must be an object".into()))?;
    let (name, rows) = match key {
        Some(k) => obj.get_key_value(k).ok_or_else(|| bad(format!("no key {k:?}")))?,
        None => {
            let is_rows =
                |v: &serde_json::Value| v.as_array().and_then(|a| a.first()).is_some_and(|r| r.is_array());
            let mut candidates = obj.iter().filter(|(_, v)| is_rows(v));
            match (candidates.next(), candidates.next()) {
                (Some(entry), None) => entry,
                _ => {
                    return Err(bad(
                        "expected exactly one key holding rows; pick one with --dataset-input".into()
                    ))
                }
            }
        }
    };
    let rows = rows.as_array().ok_or_else(|| bad(format!("{name:?} must be an array of rows")))?;
    let take = limit.unwrap_or(rows.len()).min(rows.len());
    if take == 0 {
        return Err(bad("no rows".into()));
    }
    let mut out = Vec::with_capacity(take);
    let mut values = Vec::new();
    for (i, row) in rows.iter().take(take).enumerate() {
        let row = row.as_array().ok_or_else(|| bad(format!("row {i} is not an array")))?;
        values.clear();
        for v in row {
            values.push(v.as_f64().ok_or_else(|| bad(format!("row {i} has a non-number")))?);
        }
        let spec = TensorSpec { name: name.clone(), shape: vec![1, values.len() as u64] };
        out.push(encode_v2(&spec, enc, &values)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(binary: bool) -> Encoding {
        Encoding { datatype: Datatype::Fp32, binary, binary_output: false }
    }

    #[test]
    fn parse_spec() {
        let s = TensorSpec::parse("X:1,64").unwrap();
        assert_eq!(s, TensorSpec { name: "X".into(), shape: vec![1, 64] });
        assert_eq!(s.elements().unwrap(), 64);
        assert!(TensorSpec::parse("X").is_err());
        assert!(TensorSpec::parse(":1").is_err());
        assert!(TensorSpec::parse("X:1,a").is_err());
    }

    #[test]
    fn json_body() {
        let spec = TensorSpec::parse("X:1,3").unwrap();
        let b = encode_v2(&spec, enc(false), &[1.0, 2.5, 0.1]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&b.body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"inputs": [{"name": "X", "shape": [1, 3], "datatype": "FP32", "data": [1.0, 2.5, 0.1]}]})
        );
        // f32 values are printed in their shortest form.
        assert!(std::str::from_utf8(&b.body).unwrap().contains("[1.0,2.5,0.1]"));
        assert_eq!(b.headers, vec![(CONTENT_TYPE, HeaderValue::from_static("application/json"))]);
    }

    #[test]
    fn binary_body_layout() {
        let spec = TensorSpec::parse("X:1,4").unwrap();
        let values = [1.0, -2.0, 0.5, 16.0];
        let b = encode_v2(&spec, Encoding { binary_output: true, ..enc(true) }, &values).unwrap();
        let len_header = b
            .headers
            .iter()
            .find(|(k, _)| k.as_str() == INFERENCE_HEADER_CONTENT_LENGTH)
            .map(|(_, v)| v.to_str().unwrap().parse::<usize>().unwrap())
            .unwrap();
        assert_eq!(b.body.len(), len_header + 16);
        let header: serde_json::Value = serde_json::from_slice(&b.body[..len_header]).unwrap();
        assert_eq!(
            header,
            serde_json::json!({
                "inputs": [{"name": "X", "shape": [1, 4], "datatype": "FP32",
                            "parameters": {"binary_data_size": 16}}],
                "parameters": {"binary_data_output": true}
            })
        );
        let tensor: Vec<f32> =
            b.body[len_header..].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(tensor, vec![1.0, -2.0, 0.5, 16.0]);
    }

    #[test]
    fn binary_int64_and_bool() {
        let spec = TensorSpec::parse("ids:2").unwrap();
        let e = Encoding { datatype: Datatype::Int64, binary: true, binary_output: false };
        let b = encode_v2(&spec, e, &[7.0, -1.0]).unwrap();
        let tail = &b.body[b.body.len() - 16..];
        assert_eq!(&tail[..8], &7_i64.to_le_bytes());
        assert_eq!(&tail[8..], &(-1_i64).to_le_bytes());
        let e = Encoding { datatype: Datatype::Bool, binary: true, binary_output: false };
        let b = encode_v2(&spec, e, &[1.0, 0.0]).unwrap();
        assert_eq!(&b.body[b.body.len() - 2..], &[1, 0]);
    }

    #[test]
    fn wrong_element_count() {
        let spec = TensorSpec::parse("X:2,2").unwrap();
        assert!(encode_v2(&spec, enc(false), &[1.0]).is_err());
    }

    #[test]
    fn generate_is_seeded_and_distinct() {
        let spec = TensorSpec::parse("X:1,64").unwrap();
        let a = generate(&spec, enc(true), 3, 7).unwrap();
        let b = generate(&spec, enc(true), 3, 7).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(
            a.iter().map(|p| &p.body).collect::<Vec<_>>(),
            b.iter().map(|p| &p.body).collect::<Vec<_>>()
        );
        assert_ne!(a[0].body, a[1].body);
        let one = generate(&spec, enc(false), 1, 7).unwrap();
        assert_eq!(one.len(), 1);
    }

    #[test]
    fn dataset_rows() {
        let dir = std::env::temp_dir().join(format!("loadgen-ds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ds.json");
        std::fs::write(&path, r#"{"X": [[1, 2, 3], [4, 5, 6], [7, 8, 9]]}"#).unwrap();
        let rows = from_dataset(&path, None, enc(false), Some(2)).unwrap();
        assert_eq!(rows.len(), 2);
        let v: serde_json::Value = serde_json::from_slice(&rows[1].body).unwrap();
        assert_eq!(v["inputs"][0]["shape"], serde_json::json!([1, 3]));
        assert_eq!(v["inputs"][0]["data"], serde_json::json!([4.0, 5.0, 6.0]));
        std::fs::write(&path, r#"{"X": [[1]], "Y": [[2]]}"#).unwrap();
        assert!(from_dataset(&path, None, enc(false), None).is_err());
        assert_eq!(from_dataset(&path, Some("Y"), enc(false), None).unwrap().len(), 1);
        std::fs::write(
            &path,
            r#"{"description": "d", "X_shape": [2, 2], "X": [[1, 2], [3, 4]], "y": [0, 1]}"#,
        )
        .unwrap();
        assert_eq!(from_dataset(&path, None, enc(true), None).unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
