//! An upstream model's signature, read from its V2 metadata
//! (`GET /v2/models/{m}[/versions/{v}]`), and the check that it can stand
//! in for a route's other models.
//!
//! Signatures are read from the upstream rather than declared in config:
//! the upstream is the authority on its model, and a model replaced there
//! with another contract is caught (at start-up, or when the health loop
//! reads it again) instead of producing wrong answers.

use super::client::{ExchangeLimits, HttpClient};
use crate::config::UpstreamModelConfig;
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::Full;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;
use switchyard_runtime::{DataType, ModelSignature, TensorSpec};

/// Largest metadata document accepted.
const MAX_METADATA_BYTES: usize = 1 << 20;

#[derive(Deserialize)]
struct RawMetadata {
    inputs: Vec<RawSpec>,
    outputs: Vec<RawSpec>,
}

#[derive(Deserialize)]
struct RawSpec {
    name: String,
    datatype: String,
    shape: Vec<i64>,
}

/// The path of a model's V2 endpoint, `suffix` appended
/// (`/v2/models/m/versions/2/infer`).
pub fn model_path(model: &UpstreamModelConfig, suffix: &str) -> String {
    match &model.version {
        Some(v) => format!("/v2/models/{}/versions/{v}{suffix}", model.remote),
        None => format!("/v2/models/{}{suffix}", model.remote),
    }
}

/// Reads `model`'s signature from the server at `addr` within `timeout`.
pub async fn fetch_signature(
    client: &HttpClient,
    addr: SocketAddr,
    model: &UpstreamModelConfig,
    timeout: Duration,
) -> Result<ModelSignature, String> {
    let uri = client.uri(addr, &model_path(model, ""));
    let request = Request::builder()
        .method(Method::GET)
        .uri(&uri)
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("bad metadata URI {uri}: {e}"))?;
    let limits = ExchangeLimits { first_byte: timeout, total: timeout, max_body: MAX_METADATA_BYTES };
    let exchange = client.exchange(request, limits).await.map_err(|e| format!("GET {uri}: {e}"))?;
    if !exchange.status.is_success() {
        let text = String::from_utf8_lossy(&exchange.body[..exchange.body.len().min(200)]).to_string();
        return Err(format!("GET {uri} answered {}: {text}", exchange.status));
    }
    parse_signature(&exchange.body).map_err(|e| format!("GET {uri}: {e}"))
}

/// Reads the extensions the server at `addr` lists in its V2 server
/// metadata (`GET /v2`) within `timeout`; a server that lists none, or no
/// `extensions` field, has none.
pub async fn fetch_extensions(
    client: &HttpClient,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    #[derive(Deserialize)]
    struct ServerMetadata {
        #[serde(default)]
        extensions: Vec<String>,
    }
    let uri = client.uri(addr, "/v2");
    let request = Request::builder()
        .method(Method::GET)
        .uri(&uri)
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("bad server metadata URI {uri}: {e}"))?;
    let limits = ExchangeLimits { first_byte: timeout, total: timeout, max_body: MAX_METADATA_BYTES };
    let exchange = client.exchange(request, limits).await.map_err(|e| format!("GET {uri}: {e}"))?;
    if !exchange.status.is_success() {
        return Err(format!("GET {uri} answered {}", exchange.status));
    }
    let metadata: ServerMetadata = serde_json::from_slice(&exchange.body)
        .map_err(|e| format!("GET {uri}: not V2 server metadata: {e}"))?;
    Ok(metadata.extensions)
}

/// Parses V2 model metadata into a signature.
pub fn parse_signature(body: &[u8]) -> Result<ModelSignature, String> {
    let raw: RawMetadata = serde_json::from_slice(body).map_err(|e| format!("not V2 model metadata: {e}"))?;
    let convert = |specs: Vec<RawSpec>| -> Result<Vec<TensorSpec>, String> {
        specs
            .into_iter()
            .map(|s| {
                let dtype = DataType::from_v2_name(&s.datatype)
                    .ok_or_else(|| format!("tensor '{}' has unknown datatype {:?}", s.name, s.datatype))?;
                Ok(TensorSpec { name: s.name, dtype, shape: s.shape })
            })
            .collect()
    };
    Ok(ModelSignature { inputs: convert(raw.inputs)?, outputs: convert(raw.outputs)? })
}

/// Whether `remote` can answer requests made for `reference`: the same
/// input and output names with the same datatypes and ranks, and each
/// dimension equal or dynamic (-1) on either side. Servers differ in
/// whether they report a batch dimension as -1 or a number, and in the
/// order they list tensors, so this is looser than equality.
pub fn compatible(reference: &ModelSignature, remote: &ModelSignature) -> Result<(), String> {
    fn side(kind: &str, reference: &[TensorSpec], remote: &[TensorSpec]) -> Result<(), String> {
        if reference.len() != remote.len() {
            return Err(format!("{} {kind}s, the route's models have {}", remote.len(), reference.len()));
        }
        for want in reference {
            let Some(have) = remote.iter().find(|t| t.name == want.name) else {
                return Err(format!("no {kind} '{}'", want.name));
            };
            let dims_match = have.shape.len() == want.shape.len()
                && have.shape.iter().zip(&want.shape).all(|(a, b)| a == b || *a < 0 || *b < 0);
            if have.dtype != want.dtype || !dims_match {
                return Err(format!(
                    "{kind} '{}' is {} {:?}, the route's models have {} {:?}",
                    want.name, have.dtype, have.shape, want.dtype, want.shape
                ));
            }
        }
        Ok(())
    }
    side("input", &reference.inputs, &remote.inputs)?;
    side("output", &reference.outputs, &remote.outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = r#"{"name":"m","versions":["1"],"platform":"onnxruntime_onnx",
        "inputs":[{"name":"X","datatype":"FP32","shape":[-1,64]}],
        "outputs":[{"name":"label","datatype":"INT64","shape":[-1]},
                   {"name":"probabilities","datatype":"FP32","shape":[-1,10]}]}"#;

    #[test]
    fn metadata_parses_and_compatibility_is_per_name() {
        let sig = parse_signature(META.as_bytes()).unwrap();
        assert_eq!(sig.inputs[0].shape, vec![-1, 64]);
        let mut remote = sig.clone();
        remote.outputs.reverse();
        remote.inputs[0].shape = vec![8, 64];
        assert_eq!(compatible(&sig, &remote), Ok(()), "order and a fixed batch size do not matter");
        remote.outputs[0].dtype = DataType::F64;
        let err = compatible(&sig, &remote).unwrap_err();
        assert!(err.contains("probabilities"), "{err}");
        remote.outputs.pop();
        assert!(compatible(&sig, &remote).is_err());
        assert!(parse_signature(b"<html>").is_err());
        assert!(parse_signature(br#"{"inputs":[{"name":"X","datatype":"FLOAT","shape":[1]}],"outputs":[]}"#)
            .is_err());
    }

    #[test]
    fn paths_carry_the_remote_name_and_version() {
        let mut m = UpstreamModelConfig {
            name: "a".into(),
            remote: "b".into(),
            version: None,
            cost: None,
            quality: None,
        };
        assert_eq!(model_path(&m, "/infer"), "/v2/models/b/infer");
        m.version = Some("3".into());
        assert_eq!(model_path(&m, ""), "/v2/models/b/versions/3");
    }
}
