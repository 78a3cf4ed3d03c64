//! Request decoding: the table of malformed requests, error messages and
//! limits.

use bytes::Bytes;

use super::decode_json;
use crate::v2::error::V2Error;
use crate::v2::limits::DecodeLimits;
use crate::v2::request::decode_infer_request;

type Check = fn(&V2Error) -> bool;

/// A JSON-only malformed request, its expected error and status.
fn json_case(json: &'static str, check: Check, status: u16) -> (Vec<u8>, Option<usize>, Check, u16) {
    (json.as_bytes().to_vec(), None, check, status)
}

/// A request with binary data after the JSON header.
fn binary_case(json: &'static str, binary: &[u8], check: Check) -> (Vec<u8>, Option<usize>, Check, u16) {
    let mut body = json.as_bytes().to_vec();
    body.extend_from_slice(binary);
    (body, Some(json.len()), check, 400)
}

#[test]
fn malformed_requests() {
    use V2Error as E;
    let x = |rest: &str| format!(r#"{{"inputs":[{{"name":"x",{rest}}}]}}"#);
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let cases = vec![
        json_case(r#"{"inputs":["#, |e| matches!(e, E::InvalidJson(_)), 400),
        json_case("[1]", |e| matches!(e, E::InvalidJson(_)), 400),
        json_case(r#"{"inputs":"x"}"#, |e| matches!(e, E::InvalidJson(_)), 400),
        json_case(
            r#"{"inputs":[["x",[1],"FP32"]]}"#,
            |e| matches!(e, E::InvalidField { field: "inputs", .. }),
            400,
        ),
        json_case(
            r#"{"inputs":[],"outputs":[["y"]]}"#,
            |e| matches!(e, E::InvalidField { field: "outputs", .. }),
            400,
        ),
        json_case("{}", |e| matches!(e, E::MissingField { field: "inputs", .. }), 400),
        json_case(
            r#"{"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]}"#,
            |e| matches!(e, E::MissingField { field: "name", .. }),
            400,
        ),
        json_case(
            leak(x(r#""datatype":"FP32","data":[1]"#)),
            |e| matches!(e, E::MissingField { field: "shape", .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"data":[1]"#)),
            |e| matches!(e, E::MissingField { field: "datatype", .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FLOAT32","data":[1]"#)),
            |e| matches!(e, E::UnknownDatatype { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":"3","datatype":"FP32","data":[1]"#)),
            |e| matches!(e, E::InvalidField { field: "shape", .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[-1],"datatype":"FP32","data":[1]"#)),
            |e| matches!(e, E::InvalidField { field: "shape", .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[3],"datatype":"FP32","data":[1,2]"#)),
            |e| matches!(e, E::ShapeMismatch { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[2],"datatype":"FP32","data":[1,2,3]"#)),
            |e| matches!(e, E::ShapeMismatch { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[2,2],"datatype":"FP32","data":[[1,2,3],[4]]"#)),
            |e| matches!(e, E::ShapeMismatch { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[2,2],"datatype":"FP32","data":[[1,2],3,4]"#)),
            |e| matches!(e, E::ShapeMismatch { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[2],"datatype":"FP32","data":[[1],[2]]"#)),
            |e| matches!(e, E::ShapeMismatch { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[2,2,2],"datatype":"FP32","data":[[1,2],[3,4],[5,6],[7,8]]"#)),
            |e| matches!(e, E::ShapeMismatch { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FP32","data":3"#)),
            |e| matches!(e, E::ShapeMismatch { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"UINT8","data":[300]"#)),
            |e| matches!(e, E::InvalidElement { index: 0, .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[2],"datatype":"UINT32","data":[1,-1]"#)),
            |e| matches!(e, E::InvalidElement { index: 1, .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"INT32","data":[1.5]"#)),
            |e| matches!(e, E::InvalidElement { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"INT64","data":[9223372036854775808]"#)),
            |e| matches!(e, E::InvalidElement { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FP32","data":["1.0"]"#)),
            |e| matches!(e, E::InvalidElement { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FP32","data":[1e39]"#)),
            |e| matches!(e, E::InvalidElement { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FP16","data":[70000]"#)),
            |e| matches!(e, E::InvalidElement { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"BOOL","data":[1]"#)),
            |e| matches!(e, E::InvalidElement { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"BYTES","data":[1]"#)),
            |e| matches!(e, E::InvalidElement { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FP32","data":[null]"#)),
            |e| matches!(e, E::InvalidElement { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FP32","data":[{}]"#)),
            |e| matches!(e, E::InvalidElement { .. }),
            400,
        ),
        json_case(leak(x(r#""shape":[1],"datatype":"FP32""#)), |e| matches!(e, E::MissingData { .. }), 400),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}"#)),
            |e| matches!(e, E::ConflictingData { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FP32","parameters":{"binary_data_size":-4}"#)),
            |e| matches!(e, E::InvalidField { field: "binary_data_size", .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1],"datatype":"FP32","parameters":{"shared_memory_region":"r"}"#)),
            |e| matches!(e, E::Unsupported(_)),
            400,
        ),
        json_case(
            leak(x(r#""shape":[9223372036854775807,4],"datatype":"FP32","data":[]"#)),
            |e| matches!(e, E::ShapeOverflow { .. }),
            400,
        ),
        json_case(
            leak(x(r#""shape":[1000000000],"datatype":"FP32","data":[]"#)),
            |e| matches!(e, E::TooLarge(_)),
            413,
        ),
        json_case(
            leak(x(r#""shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"datatype":"FP32","data":[1]"#)),
            |e| matches!(e, E::TooLarge(_)),
            413,
        ),
        json_case(
            r#"{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}"#,
            |e| matches!(e, E::Duplicate { kind: "input", .. }),
            400,
        ),
        json_case(
            r#"{"inputs":[],"outputs":[{"name":"y"},{"name":"y"}]}"#,
            |e| matches!(e, E::Duplicate { kind: "output", .. }),
            400,
        ),
        json_case(
            r#"{"inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":"yes"}}]}"#,
            |e| matches!(e, E::InvalidField { field: "binary_data", .. }),
            400,
        ),
        json_case(
            r#"{"inputs":[],"outputs":[{"name":"y","parameters":{"classification":0}}]}"#,
            |e| matches!(e, E::InvalidField { field: "classification", .. }),
            400,
        ),
        json_case(
            r#"{"inputs":[],"outputs":[{}]}"#,
            |e| matches!(e, E::MissingField { field: "name", .. }),
            400,
        ),
        json_case(
            r#"{"inputs":[],"parameters":{"binary_data_output":1}}"#,
            |e| matches!(e, E::InvalidField { field: "binary_data_output", .. }),
            400,
        ),
        json_case(r#"{"id":7,"inputs":[]}"#, |e| matches!(e, E::InvalidField { field: "id", .. }), 400),
        json_case(
            r#"{"inputs":[],"parameters":[]}"#,
            |e| matches!(e, E::InvalidField { field: "parameters", .. }),
            400,
        ),
        // Binary data without Inference-Header-Content-Length is not JSON.
        (b"{\"inputs\":[]}\x01\x02".to_vec(), None, |e| matches!(e, E::InvalidJson(_)), 400),
        // A declared header length larger than the body.
        (
            b"{\"inputs\":[]}".to_vec(),
            Some(100),
            |e| matches!(e, E::HeaderLength { header_len: 100, body_len: 13 }),
            400,
        ),
        binary_case(
            r#"{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]}"#,
            &[0; 4],
            |e| matches!(e, E::BinaryOverrun { size: 8, remaining: 4, .. }),
        ),
        binary_case(
            r#"{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]}"#,
            &[0; 8],
            |e| matches!(e, E::TrailingBytes { extra: 4 }),
        ),
        binary_case(r#"{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}"#, &[0; 3], |e| {
            matches!(e, E::TrailingBytes { extra: 3 })
        }),
        binary_case(
            r#"{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":4}}]}"#,
            &[0; 4],
            |e| matches!(e, E::BinarySize { expected: 8, actual: 4, .. }),
        ),
        binary_case(
            r#"{"inputs":[{"name":"x","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}]}"#,
            &[5, 0, 0, 0, b'a', b'b'],
            |e| matches!(e, E::BinaryBytes { .. }),
        ),
        binary_case(
            r#"{"inputs":[{"name":"x","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}]}"#,
            &[0, 7],
            |e| matches!(e, E::InvalidElement { index: 1, .. }),
        ),
    ];
    for (body, header_len, check, status) in cases {
        let shown = String::from_utf8_lossy(&body).into_owned();
        let err =
            decode_infer_request(Bytes::from(body), header_len, &DecodeLimits::default()).expect_err(&shown);
        assert!(check(&err), "{shown}: unexpected error {err:?}");
        assert_eq!(err.status(), status, "{shown}: {err}");
        let body: serde_json::Value = serde_json::from_slice(&err.body()).unwrap();
        assert_eq!(body["error"], err.to_string());
    }
}

#[test]
fn messages_name_the_input() {
    let err = decode_json(r#"{"inputs":[{"name":"pixels","shape":[1],"datatype":"UINT8","data":[300]}]}"#)
        .unwrap_err();
    assert_eq!(err.to_string(), "element 0 of input 'pixels' is not a valid UINT8: 300 is out of range");
    let err = decode_json(r#"{"inputs":[{"name":"pixels","shape":[2,2],"datatype":"FP32","data":[1,2,3]}]}"#)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "'data' of input 'pixels' does not match shape [2, 2]: expected 4 elements, got 3"
    );
}

#[test]
fn input_and_total_limits() {
    let limits = DecodeLimits { max_inputs: 1, max_total_elements: 3, ..DecodeLimits::default() };
    let two = r#"{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]},{"name":"b","shape":[1],"datatype":"FP32","data":[1]}]}"#;
    let err = decode_infer_request(Bytes::from_static(two.as_bytes()), None, &limits).unwrap_err();
    assert_eq!(err.status(), 413);
    let limits = DecodeLimits { max_total_elements: 3, ..DecodeLimits::default() };
    let err = decode_infer_request(Bytes::from_static(two.as_bytes()), None, &limits);
    assert!(err.is_ok());
    let four = r#"{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2]},{"name":"b","shape":[2],"datatype":"FP32","data":[1,2]}]}"#;
    let err = decode_infer_request(Bytes::from_static(four.as_bytes()), None, &limits).unwrap_err();
    assert!(matches!(err, V2Error::TooLarge(_)));
}

#[test]
fn lists_past_their_limit_stop_the_reading_with_a_413() {
    let limits =
        DecodeLimits { max_inputs: 2, max_outputs: 2, max_json_values: 40, ..DecodeLimits::default() };
    let decode = |json: String| decode_infer_request(Bytes::from(json), None, &limits);
    let many = |item: &str, n: usize| vec![item; n].join(",");
    // Past the limit the rest is not read: not even the syntax error after it.
    for (json, words) in [
        (format!(r#"{{"inputs":[{}],"id":}}"#, many("{}", 3)), "more than 2 inputs, the limit is 2"),
        (format!(r#"{{"inputs":[],"outputs":[{}"#, many("{}", 3)), "more than 2 requested outputs"),
        (format!(r#"{{"id":[{}],"inputs":[]}}"#, many("0", 40)), "more than 40 JSON values"),
        (format!(r#"{{"parameters":{{"a":[{}]}},"inputs":[]}}"#, many("[]", 40)), "more than 40 JSON values"),
        (
            format!(
                r#"{{"inputs":[{{"name":"x","datatype":"FP32","shape":[{}],"data":[1]}}]}}"#,
                many("1", 40)
            ),
            "more than 40 JSON values",
        ),
        (
            format!(r#"{{"inputs":[],"outputs":[{{"name":"y","parameters":{{"k":[{}]}}}}]}}"#, many("0", 40)),
            "more than 40 JSON values",
        ),
    ] {
        let err = decode(json.clone()).unwrap_err();
        assert_eq!(err.status(), 413, "{json}: {err}");
        assert!(err.to_string().contains(words), "{json}: {err}");
    }
    // At the limits, nothing is refused.
    let two = r#"{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]},{"name":"b","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"p","parameters":{"k":"v"}},{"name":"q"}]}"#;
    let req = decode(two.to_owned()).unwrap();
    assert_eq!(req.outputs[0].parameters["k"], "v");
}

#[test]
fn a_fault_in_an_output_is_still_named_after_the_counting_reader() {
    let err = decode_json(r#"{"inputs":[],"outputs":[{"name":"p","name":"q"}]}"#).unwrap_err();
    let V2Error::InvalidField { field: "outputs", context, reason } = &err else { panic!("{err:?}") };
    assert_eq!(context, "outputs[0]");
    assert!(reason.contains("duplicate field `name`"), "{reason}");
    let err = decode_json(r#"{"inputs":[],"outputs":[{"name":null}]}"#).unwrap_err();
    assert!(matches!(err, V2Error::MissingField { field: "name", .. }), "{err:?}");
}

#[test]
fn an_input_the_model_would_refuse_is_refused_before_its_data_is_decoded() {
    use crate::v2::limits::SignatureLimit;
    use switchyard_runtime::signature::{ModelSignature, TensorSpec};
    use switchyard_runtime::DataType;
    let spec =
        |name: &str, dtype, shape: &[i64]| TensorSpec { name: name.into(), dtype, shape: shape.to_vec() };
    let signature = ModelSignature {
        inputs: vec![spec("X", DataType::F32, &[-1, 4])],
        outputs: vec![spec("p", DataType::F32, &[-1, 2])],
    };
    let limits = DecodeLimits {
        signature: Some(SignatureLimit { model: "m".into(), signature: signature.into() }),
        ..DecodeLimits::default()
    };
    // The data is not valid for its own datatype either: without the
    // signature that is what the decoder meets first.
    for (json, expected) in [
        (r#"{"inputs":[{"name":"X","datatype":"BYTES","shape":[1,3],"data":[1,2,3]}]}"#, "datatype BYTES"),
        (r#"{"inputs":[{"data":[1,2,3],"name":"X","datatype":"BYTES","shape":[1,3]}]}"#, "datatype BYTES"),
        (r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[1,3],"data":["a","b","c"]}]}"#, "shape [1, 3]"),
        (
            r#"{"inputs":[{"name":"Y","datatype":"FP32","shape":[1,4],"data":["a","b","c","d"]}]}"#,
            "unexpected input 'Y'",
        ),
    ] {
        let bytes = Bytes::from_static(json.as_bytes());
        let err = decode_infer_request(bytes.clone(), None, &limits).unwrap_err();
        assert!(err.to_string().contains(expected), "{json}: {err}");
        let unchecked = decode_infer_request(bytes, None, &DecodeLimits::default()).unwrap_err();
        assert!(matches!(unchecked, V2Error::InvalidElement { .. }), "{json}: {unchecked}");
    }
    let fine = r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[2,4],"data":[1,2,3,4,5,6,7,8]}]}"#;
    assert!(decode_infer_request(Bytes::from_static(fine.as_bytes()), None, &limits).is_ok());
}
