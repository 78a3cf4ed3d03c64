use super::*;
use bytes::Bytes;
use std::path::PathBuf;
use switchyard_protocol::v2::{decode_infer_request, DecodeLimits};
use switchyard_runtime::DataType;

fn scope<'a>(name: &'a str, version: u64, path: &'a Path, tenant: Option<&'a str>) -> KeyScope<'a> {
    KeyScope {
        name,
        is_route: true,
        models: vec![ModelGeneration { name: "m", version, path }],
        policy: "Fixed",
        tenant,
    }
}

fn decode(body: &[u8], header_len: Option<usize>) -> DecodedRequest {
    decode_infer_request(Bytes::copy_from_slice(body), header_len, &DecodeLimits::default()).unwrap()
}

fn json(text: &str) -> DecodedRequest {
    decode(text.as_bytes(), None)
}

fn binary(header: &str, data: &[u8]) -> DecodedRequest {
    let mut body = header.as_bytes().to_vec();
    body.extend_from_slice(data);
    decode(&body, Some(header.len()))
}

fn key(request: &DecodedRequest) -> CacheKey {
    let path = PathBuf::from("/models/m.onnx");
    request_key(&scope("digits", 1, &path, None), request)
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

const BASE: &str =
    r#"{"id":"a","inputs":[{"name":"X","shape":[1,3],"datatype":"FP32","data":[1.0,2.5,-3.0]}]}"#;

#[test]
fn json_and_binary_encodings_share_a_key() {
    let from_json = json(
        r#"{"inputs":[{"name":"X","shape":[1,3],"datatype":"FP32","data":[[1.0,2.5,-3.0]]}],
            "outputs":[{"name":"label"}]}"#,
    );
    let from_binary = binary(
        r#"{"inputs":[{"name":"X","shape":[1,3],"datatype":"FP32","parameters":{"binary_data_size":12}}],
            "outputs":[{"name":"label","parameters":{"binary_data":true}}],
            "parameters":{"binary_data_output":true}}"#,
        &f32_bytes(&[1.0, 2.5, -3.0]),
    );
    assert_eq!(from_json.inputs, from_binary.inputs);
    assert_eq!(key(&from_json), key(&from_binary));
}

#[test]
fn bytes_tensors_in_json_and_binary_share_a_key() {
    let from_json = json(r#"{"inputs":[{"name":"S","shape":[2],"datatype":"BYTES","data":["ab","c"]}]}"#);
    let mut data = Vec::new();
    for s in [&b"ab"[..], b"c"] {
        data.extend_from_slice(&(s.len() as u32).to_le_bytes());
        data.extend_from_slice(s);
    }
    let from_binary = binary(
        r#"{"inputs":[{"name":"S","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":11}}]}"#,
        &data,
    );
    assert_eq!(key(&from_json), key(&from_binary));
}

#[test]
fn id_and_neutral_parameters_do_not_change_the_key() {
    let base = key(&json(BASE));
    assert_eq!(base, key(&json(&BASE.replace(r#""id":"a""#, r#""id":"zzz""#))));
    assert_eq!(base, key(&json(&BASE.replace(r#""id":"a","#, ""))));
    let neutral = BASE.replace(
        r#""id":"a","#,
        r#""parameters":{"timeout":5,"priority":2,"stream":false,"binary_data_output":true},"#,
    );
    assert_eq!(base, key(&json(&neutral)));
}

#[test]
fn what_changes_the_answer_changes_the_key() {
    let request = json(BASE);
    let path = PathBuf::from("/models/m.onnx");
    let other_path = PathBuf::from("/models/m2.onnx");
    let base = request_key(&scope("digits", 1, &path, None), &request);
    let variants = [
        request_key(&scope("digits2", 1, &path, None), &request),
        request_key(&scope("digits", 2, &path, None), &request),
        request_key(&scope("digits", 1, &other_path, None), &request),
        request_key(&scope("digits", 1, &path, Some("tenant-a")), &request),
        request_key(&KeyScope { is_route: false, ..scope("digits", 1, &path, None) }, &request),
        request_key(&KeyScope { policy: "Cascade(0.8)", ..scope("digits", 1, &path, None) }, &request),
    ];
    for (i, v) in variants.iter().enumerate() {
        assert_ne!(base, *v, "scope variant {i}");
    }
    let tenant_a = request_key(&scope("digits", 1, &path, Some("a")), &request);
    let tenant_b = request_key(&scope("digits", 1, &path, Some("b")), &request);
    assert_ne!(tenant_a, tenant_b);

    let bodies = [
        BASE.replace("2.5", "2.25"),                                          // input bytes
        BASE.replace(r#""name":"X""#, r#""name":"Y""#),                       // input name
        BASE.replace("[1,3]", "[3]"),                                         // shape, same bytes
        BASE.replace(r#""id":"a","#, r#""outputs":[{"name":"label"}],"#),     // requested outputs
        BASE.replace(r#""id":"a","#, r#""parameters":{"temperature":0.5},"#), // custom parameter
    ];
    for (i, body) in bodies.iter().enumerate() {
        assert_ne!(base, key(&json(body)), "body variant {i}: {body}");
    }
}

#[test]
fn dtype_is_keyed_even_when_the_bytes_agree() {
    let bytes = f32_bytes(&[1.0, 2.0]);
    let header = |dtype: &str| {
        format!(
            r#"{{"inputs":[{{"name":"X","shape":[2],"datatype":"{dtype}","parameters":{{"binary_data_size":8}}}}]}}"#
        )
    };
    let fp32 = binary(&header("FP32"), &bytes);
    let int32 = binary(&header("INT32"), &bytes);
    assert_eq!(fp32.inputs[0].1.raw_bytes(), int32.inputs[0].1.raw_bytes());
    assert_ne!(key(&fp32), key(&int32));
}

#[test]
fn classification_k_and_output_order_are_keyed() {
    let with = |outputs: &str| key(&json(&BASE.replace(r#""id":"a","#, &format!(r#""outputs":{outputs},"#))));
    let k2 = with(r#"[{"name":"p","parameters":{"classification":2}}]"#);
    let k3 = with(r#"[{"name":"p","parameters":{"classification":3}}]"#);
    let raw = with(r#"[{"name":"p"}]"#);
    assert_ne!(k2, k3);
    assert_ne!(k2, raw);
    assert_ne!(with(r#"[{"name":"a"},{"name":"b"}]"#), with(r#"[{"name":"b"},{"name":"a"}]"#));
}

#[test]
fn encoding_is_prefix_free() {
    // Same concatenated bytes, split differently: must differ.
    let strings = |items: &[&str]| {
        let data: Vec<Bytes> = items.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect();
        let tensor = Tensor::new(DataType::Bytes, vec![items.len()], TensorData::Strings(data)).unwrap();
        DecodedRequest {
            id: None,
            inputs: vec![("x".into(), tensor)],
            input_parameters: vec![Parameters::new()],
            outputs: vec![],
            binary_data_output: false,
            parameters: Parameters::new(),
        }
    };
    assert_ne!(key(&strings(&["ab", "c"])), key(&strings(&["a", "bc"])));
    let path = PathBuf::from("p");
    let request = strings(&["z"]);
    assert_ne!(
        request_key(&scope("ab", 1, &path, Some("c")), &request),
        request_key(&scope("a", 1, &path, Some("bc")), &request),
    );
    let params = |text: &str| key(&json(&BASE.replace(r#""id":"a","#, text)));
    assert_ne!(params(r#""parameters":{"a":"bc"},"#), params(r#""parameters":{"ab":"c"},"#));
    assert_ne!(params(r#""parameters":{"a":[1,[2]]},"#), params(r#""parameters":{"a":[[1],2]},"#));
}

#[test]
fn parameter_order_does_not_matter() {
    let a = key(&json(&BASE.replace(r#""id":"a","#, r#""parameters":{"x":1,"y":{"p":1,"q":2}},"#)));
    let b = key(&json(&BASE.replace(r#""id":"a","#, r#""parameters":{"y":{"q":2,"p":1},"x":1},"#)));
    assert_eq!(a, b);
    assert_eq!(a.to_hex().len(), 64);
}
