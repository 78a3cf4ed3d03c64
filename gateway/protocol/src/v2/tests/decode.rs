//! Request decoding: every datatype as JSON and binary, layouts,
//! parameters and output flags.

use bytes::Bytes;
use switchyard_runtime::tensor::{DataType, Tensor, TensorData};

use super::decode_json;
use crate::v2::error::V2Error;
use crate::v2::limits::DecodeLimits;
use crate::v2::request::{decode_infer_request, DecodedRequest};

fn decode_with_binary(json: &str, binary: &[u8]) -> Result<DecodedRequest, V2Error> {
    let mut body = json.as_bytes().to_vec();
    body.extend_from_slice(binary);
    decode_infer_request(Bytes::from(body), Some(json.len()), &DecodeLimits::default())
}

fn le<const N: usize, T: Copy>(values: &[T], to_le: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to_le(v)).collect()
}

/// Per datatype: JSON data for shape [3] and the tensor it must give.
fn samples() -> Vec<(DataType, &'static str, TensorData)> {
    let fixed = |v: Vec<u8>| TensorData::Fixed(Bytes::from(v));
    vec![
        (DataType::Bool, "[true,false,true]", fixed(vec![1, 0, 1])),
        (DataType::U8, "[0,255,7]", fixed(vec![0, 255, 7])),
        (DataType::U16, "[0,65535,300]", fixed(le(&[0u16, 65535, 300], u16::to_le_bytes))),
        (DataType::U32, "[0,4294967295,1]", fixed(le(&[0u32, u32::MAX, 1], u32::to_le_bytes))),
        (DataType::U64, "[0,18446744073709551615,1]", fixed(le(&[0u64, u64::MAX, 1], u64::to_le_bytes))),
        (DataType::I8, "[-128,127,0]", fixed(le(&[-128i8, 127, 0], i8::to_le_bytes))),
        (DataType::I16, "[-32768,32767,-1]", fixed(le(&[i16::MIN, i16::MAX, -1], i16::to_le_bytes))),
        (
            DataType::I32,
            "[-2147483648,2147483647,2.0]",
            fixed(le(&[i32::MIN, i32::MAX, 2], i32::to_le_bytes)),
        ),
        (
            DataType::I64,
            "[-9223372036854775808,9223372036854775807,-1]",
            fixed(le(&[i64::MIN, i64::MAX, -1], i64::to_le_bytes)),
        ),
        (DataType::F16, "[1.0,-2.5,65504]", fixed(le(&[0x3c00u16, 0xc100, 0x7bff], u16::to_le_bytes))),
        (DataType::BF16, "[1.0,-1.5,0.1]", fixed(le(&[0x3f80u16, 0xbfc0, 0x3dcd], u16::to_le_bytes))),
        (
            DataType::F32,
            "[1.5,-0.1,3.4028234663852886e38]",
            fixed(le(&[1.5f32, -0.1, f32::MAX], f32::to_le_bytes)),
        ),
        (DataType::F64, "[0.1,-1e300,5]", fixed(le(&[0.1f64, -1e300, 5.0], f64::to_le_bytes))),
        (
            DataType::Bytes,
            r#"["","h\u00e9llo","a\"b"]"#,
            TensorData::Strings(vec![
                Bytes::new(),
                Bytes::from("h\u{e9}llo".as_bytes().to_vec()),
                Bytes::from_static(b"a\"b"),
            ]),
        ),
    ]
}

/// The binary layout of `data`.
fn binary_of(data: &TensorData) -> Vec<u8> {
    match data {
        TensorData::Fixed(raw) => raw.to_vec(),
        TensorData::Strings(items) => {
            let mut out = Vec::new();
            crate::v2::binary::encode_bytes_elements(items, &mut out);
            out
        }
    }
}

#[test]
fn every_datatype_json_binary_and_nested_agree() {
    for (dtype, json_data, expected) in samples() {
        let name = dtype.v2_name();
        let want = Tensor::new(dtype, vec![3], expected.clone()).unwrap();

        let flat =
            format!(r#"{{"inputs":[{{"name":"x","shape":[3],"datatype":"{name}","data":{json_data}}}]}}"#);
        let from_json = decode_json(&flat).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(from_json.input("x"), Some(&want), "{name} JSON");

        let raw = binary_of(&expected);
        let header = format!(
            r#"{{"inputs":[{{"name":"x","shape":[3],"datatype":"{name}","parameters":{{"binary_data_size":{}}}}}]}}"#,
            raw.len()
        );
        let from_binary = decode_with_binary(&header, &raw).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(from_binary.inputs, from_json.inputs, "{name} binary == JSON");

        let nested = format!(
            r#"{{"inputs":[{{"name":"x","shape":[1,3],"datatype":"{name}","data":[{json_data}]}}]}}"#
        );
        let from_nested = decode_json(&nested).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want_nested = Tensor::new(dtype, vec![1, 3], expected).unwrap();
        assert_eq!(from_nested.input("x"), Some(&want_nested), "{name} nested");
    }
}

#[test]
fn nested_and_flat_layouts() {
    let flat =
        decode_json(r#"{"inputs":[{"name":"x","shape":[2,3],"datatype":"INT32","data":[1,2,3,4,5,6]}]}"#);
    let nested =
        decode_json(r#"{"inputs":[{"name":"x","shape":[2,3],"datatype":"INT32","data":[[1,2,3],[4,5,6]]}]}"#);
    let deep = decode_json(
        r#"{"inputs":[{"name":"x","shape":[2,1,3],"datatype":"INT32","data":[[[1,2,3]],[[4,5,6]]]}]}"#,
    );
    let (flat, nested, deep) = (flat.unwrap(), nested.unwrap(), deep.unwrap());
    assert_eq!(flat.inputs, nested.inputs);
    assert_eq!(flat.input("x").unwrap().raw_bytes(), deep.input("x").unwrap().raw_bytes());
    assert_eq!(deep.input("x").unwrap().shape(), &[2, 1, 3]);
}

#[test]
fn scalars_and_empty_tensors() {
    let scalar = decode_json(r#"{"inputs":[{"name":"s","shape":[],"datatype":"FP64","data":2.5}]}"#).unwrap();
    assert_eq!(scalar.input("s").unwrap().raw_bytes().unwrap().as_ref(), &2.5f64.to_le_bytes());
    let boxed =
        decode_json(r#"{"inputs":[{"name":"s","shape":[],"datatype":"FP64","data":[2.5]}]}"#).unwrap();
    assert_eq!(scalar.inputs, boxed.inputs);
    let empty =
        decode_json(r#"{"inputs":[{"name":"e","shape":[0,4],"datatype":"FP32","data":[]}]}"#).unwrap();
    assert!(empty.input("e").unwrap().is_empty());
    let header =
        r#"{"inputs":[{"name":"e","shape":[0],"datatype":"BYTES","parameters":{"binary_data_size":0}}]}"#;
    let empty_bin = decode_with_binary(header, &[]).unwrap();
    assert_eq!(empty_bin.input("e").unwrap().data(), &TensorData::Strings(Vec::new()));
}

/// JSON has one number type: the protocol's integers (shape dimensions,
/// `binary_data_size`, `classification`) may be written `2.0` or `2e0`, as
/// JSON Schema's `integer` (and Schemathesis) allows; fractions, negatives
/// and values past `u64` stay 400s.
#[test]
fn integral_numbers_with_fraction_or_exponent() {
    let plain = decode_json(
        r#"{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2]}],"outputs":[{"name":"y","parameters":{"classification":3}}]}"#,
    )
    .unwrap();
    let written = decode_json(
        r#"{"inputs":[{"name":"x","shape":[1.0,2e0],"datatype":"FP32","data":[1,2]}],"outputs":[{"name":"y","parameters":{"classification":3.0}}]}"#,
    )
    .unwrap();
    assert_eq!(written.inputs, plain.inputs);
    assert_eq!(written.outputs[0].classification, Some(3));
    let header =
        r#"{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8.0}}]}"#;
    let binary = decode_with_binary(header, &le(&[1.0f32, 2.0], f32::to_le_bytes)).unwrap();
    assert_eq!(binary.input("x").unwrap().to_f32_vec(), Some(vec![1.0, 2.0]));
    for bad in ["1.5", "-1", "-1.0", "1e20", "18446744073709551616.0", "\"2\"", "null"] {
        let shape = format!(r#"{{"inputs":[{{"name":"x","shape":[{bad}],"datatype":"FP32","data":[1]}}]}}"#);
        let err = decode_json(&shape).unwrap_err();
        assert!(matches!(err, V2Error::InvalidField { field: "shape", .. }), "{bad}: {err}");
        let classification =
            format!(r#"{{"inputs":[],"outputs":[{{"name":"y","parameters":{{"classification":{bad}}}}}]}}"#);
        let err = decode_json(&classification).unwrap_err();
        assert!(matches!(err, V2Error::InvalidField { field: "classification", .. }), "{bad}: {err}");
    }
    let zero = decode_json(r#"{"inputs":[],"outputs":[{"name":"y","parameters":{"classification":0.0}}]}"#);
    assert!(matches!(zero.unwrap_err(), V2Error::InvalidField { field: "classification", .. }));
}

#[test]
fn tritonclient_style_mixed_request() {
    // As tritonclient builds it: id, parameters, binary inputs in order,
    // a JSON input in between, outputs with binary_data flags.
    let a: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut c = Vec::new();
    crate::v2::binary::encode_bytes_elements(&[Bytes::from_static(b"hi")], &mut c);
    let header = format!(
        concat!(
            r#"{{"id":"7","parameters":{{"timeout":5000,"binary_data_output":true}},"inputs":["#,
            r#"{{"name":"a","shape":[1,2],"datatype":"FP32","parameters":{{"binary_data_size":{}}}}},"#,
            r#"{{"name":"b","shape":[1],"datatype":"INT64","data":[9]}},"#,
            r#"{{"name":"c","shape":[1],"datatype":"BYTES","parameters":{{"binary_data_size":{}}}}}],"#,
            r#""outputs":[{{"name":"y","parameters":{{"binary_data":false}}}},{{"name":"z","parameters":{{"classification":3}}}}]}}"#
        ),
        a.len(),
        c.len()
    );
    let mut binary = a.clone();
    binary.extend_from_slice(&c);
    let req = decode_with_binary(&header, &binary).unwrap();
    assert_eq!(req.id.as_deref(), Some("7"));
    assert!(req.binary_data_output);
    assert_eq!(req.parameters.get("timeout"), Some(&serde_json::json!(5000)));
    assert_eq!(req.input("a").unwrap().to_f32_vec(), Some(vec![1.0, 2.0]));
    assert_eq!(req.input("b").unwrap().to_i64_vec(), Some(vec![9]));
    assert_eq!(req.input("c").unwrap().data(), &TensorData::Strings(vec![Bytes::from_static(b"hi")]));
    assert_eq!(req.input_parameters[0].get("binary_data_size"), Some(&serde_json::json!(8)));
    assert!(req.input_parameters[1].is_empty());
    assert_eq!(req.outputs.len(), 2);
    assert!(!req.outputs[0].binary);
    assert!(req.outputs[1].binary);
    assert_eq!(req.outputs[1].classification, Some(3));
    assert!(!req.output_is_binary("y"));
    assert!(req.output_is_binary("z"));
    assert!(req.output_is_binary("unlisted"));
}

#[test]
fn defaults_without_parameters() {
    let req = decode_json(r#"{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}"#).unwrap();
    assert_eq!(req.id, None);
    assert!(!req.binary_data_output);
    assert!(req.outputs.is_empty());
    assert!(req.parameters.is_empty());
    assert!(!req.output_is_binary("anything"));
}
