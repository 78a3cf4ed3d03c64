//! The client codec against the gateway's own server codec: what one side
//! writes, the other reads back unchanged; garbage is refused.

use super::*;
use crate::upstream::v2_check::Expected;
use switchyard_runtime::ModelSignature;

fn requested(names: &[String]) -> Expected<'_> {
    Expected { requested: Some(names), ..Expected::default() }
}
use switchyard_protocol::v2::{decode_infer_request, encode_infer_response, InferResponseParts};
use switchyard_runtime::{DataType, TensorSpec};

fn tensors() -> Vec<(String, Tensor)> {
    let strings = vec![Bytes::from_static(b"ab"), Bytes::from_static(b""), Bytes::from_static(b"xyz")];
    vec![
        ("X".to_string(), Tensor::from_f32(vec![2, 3], &[1.0, -2.5, 3.25, 0.0, 7.0, 1e-3]).unwrap()),
        ("S".to_string(), Tensor::new(DataType::Bytes, vec![3], TensorData::Strings(strings)).unwrap()),
    ]
}

#[test]
fn requests_decode_to_the_same_tensors_on_a_v2_server() {
    let request = InferenceRequest { inputs: tensors(), outputs: Some(vec!["label".into()]) };
    let encoded = encode_request(&request);
    let decoded = decode_infer_request(encoded.body, encoded.header_len, &DecodeLimits::default()).unwrap();
    assert_eq!(decoded.inputs, request.inputs);
    assert_eq!(decoded.outputs.len(), 1);
    assert!(decoded.outputs[0].binary, "outputs are asked for as binary");
    let all = encode_request(&InferenceRequest::new(tensors()));
    let decoded = decode_infer_request(all.body, all.header_len, &DecodeLimits::default()).unwrap();
    assert!(decoded.outputs.is_empty() && decoded.binary_data_output);
}

fn response(binary: bool) -> switchyard_protocol::v2::EncodedBody {
    let outputs = tensors().into_iter().map(|(n, t)| (n, t, binary)).collect();
    encode_infer_response(&InferResponseParts {
        model_name: "m".into(),
        model_version: Some("1".into()),
        id: None,
        parameters: Default::default(),
        outputs,
    })
}

#[test]
fn binary_and_json_responses_decode() {
    for binary in [true, false] {
        let encoded = response(binary);
        let outputs = decode_response(encoded.body, encoded.header_len, &Expected::default()).unwrap();
        assert_eq!(outputs, tensors(), "binary = {binary}");
    }
    let encoded = response(true);
    let wanted = vec!["S".to_string(), "X".to_string()];
    let outputs = decode_response(encoded.body, encoded.header_len, &requested(&wanted)).unwrap();
    assert_eq!(outputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["S", "X"]);
}

#[test]
fn garbage_and_mismatches_are_bad_responses() {
    let cases: Vec<(Bytes, Option<usize>)> = vec![
        (Bytes::from_static(b"<html>502 Bad Gateway</html>"), None),
        (Bytes::from_static(b"{\"outputs\": 3}"), None),
        (
            Bytes::from_static(
                b"{\"outputs\":[{\"name\":\"X\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1]}]}",
            ),
            None,
        ),
        (
            Bytes::from_static(
                b"{\"outputs\":[{\"name\":\"X\",\"datatype\":\"FP99\",\"shape\":[1],\"data\":[1]}]}",
            ),
            None,
        ),
        (Bytes::from_static(b"{}"), Some(50)),
    ];
    for (body, len) in cases {
        let text = String::from_utf8_lossy(&body).to_string();
        assert!(decode_response(body, len, &Expected::default()).is_err(), "{text}");
    }
    // Truncated binary data.
    let encoded = response(true);
    let cut = encoded.body.slice(..encoded.body.len() - 3);
    assert!(decode_response(cut, encoded.header_len, &Expected::default()).is_err());
    // A missing requested output.
    let encoded = response(true);
    let err =
        decode_response(encoded.body, encoded.header_len, &requested(&["label".to_string()])).unwrap_err();
    assert!(err.0.contains("label"), "{err}");
    // A datatype the signature contradicts.
    let spec = |name: &str, dtype| TensorSpec { name: name.into(), dtype, shape: vec![-1] };
    let sig = ModelSignature {
        inputs: vec![],
        outputs: vec![spec("X", DataType::I64), spec("S", DataType::Bytes)],
    };
    let encoded = response(true);
    let expected = Expected { signature: Some(&sig), ..Expected::default() };
    let err = decode_response(encoded.body, encoded.header_len, &expected).unwrap_err();
    assert!(err.0.contains("signature"), "{err}");
}

#[test]
fn json_requests_decode_to_the_same_tensors_on_a_v2_server() {
    let request = InferenceRequest { inputs: tensors(), outputs: Some(vec!["label".into()]) };
    let encoded = encode_request_json(&request).unwrap();
    assert_eq!(encoded.header_len, None);
    let text: Value = serde_json::from_slice(&encoded.body).unwrap();
    assert_eq!(text["inputs"][0]["data"], json!([1.0, -2.5, 3.25, 0.0, 7.0, 0.001f32 as f64]));
    assert_eq!(text["inputs"][1]["data"], json!(["ab", "", "xyz"]));
    let decoded = decode_infer_request(encoded.body, None, &DecodeLimits::default()).unwrap();
    assert_eq!(decoded.inputs, request.inputs);
    assert_eq!(decoded.outputs.len(), 1);
    assert!(!decoded.outputs[0].binary && !decoded.binary_data_output, "outputs are asked for as JSON");
}

#[test]
fn bytes_that_are_not_utf8_cannot_go_as_json_tensors() {
    let bad = vec![Bytes::from_static(b"\xff\xfe")];
    let inputs =
        vec![("S".to_string(), Tensor::new(DataType::Bytes, vec![1], TensorData::Strings(bad)).unwrap())];
    let err = encode_request_json(&InferenceRequest::new(inputs)).unwrap_err();
    assert!(err.contains("input 'S'"), "{err}");
}
