//! Response encoding: golden bytes, round trips through a parser that
//! follows `tritonclient`'s `InferResult`, and float exactness.

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::Value;
use switchyard_runtime::tensor::{element_count, DataType, Tensor, TensorData, ALL_DATA_TYPES};

use crate::v2::binary::decode_binary;
use crate::v2::json_data::parse_json_data;
use crate::v2::response::{
    encode_infer_response, InferResponseParts, CONTENT_TYPE_BINARY, CONTENT_TYPE_JSON,
};

/// Reads a response as `tritonclient.http.InferResult` does: the JSON is
/// `body[..header_len]`; each output with `parameters.binary_data_size`
/// takes the next that many bytes of the rest; others carry `data`.
fn parse_like_tritonclient(body: &[u8], header_len: Option<usize>) -> (Value, Vec<(String, Tensor)>) {
    let header_len = header_len.unwrap_or(body.len());
    let json_text = std::str::from_utf8(&body[..header_len]).unwrap();
    let header: Value = serde_json::from_str(json_text).unwrap();
    let buffer = Bytes::copy_from_slice(&body[header_len..]);
    let mut offset = 0;
    let mut outputs = Vec::new();
    for out in header["outputs"].as_array().unwrap() {
        let name = out["name"].as_str().unwrap().to_owned();
        let dtype = DataType::from_v2_name(out["datatype"].as_str().unwrap()).unwrap();
        let shape: Vec<usize> =
            out["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        let count = element_count(&shape).unwrap();
        let data = match out["parameters"]["binary_data_size"].as_u64() {
            Some(size) => {
                let size = size as usize;
                let slice = buffer.slice(offset..offset + size);
                offset += size;
                decode_binary(&name, dtype, &shape, count, slice).unwrap()
            }
            None => {
                let raw = RawValue::from_string(out["data"].to_string()).unwrap();
                parse_json_data(&name, dtype, &shape, count, &raw).unwrap()
            }
        };
        outputs.push((name, Tensor::new(dtype, shape, data).unwrap()));
    }
    assert_eq!(offset, buffer.len(), "every binary byte is claimed by an output");
    (header, outputs)
}

/// A small tensor of each datatype with awkward values.
fn tensor_of(dtype: DataType) -> Tensor {
    let fixed =
        |bytes: Vec<u8>, n: usize| Tensor::new(dtype, vec![1, n], TensorData::Fixed(Bytes::from(bytes)));
    let t = match dtype {
        DataType::Bool => fixed(vec![1, 0, 1], 3),
        DataType::U8 | DataType::I8 => fixed(vec![0, 0x80, 0xff], 3),
        DataType::U16 | DataType::I16 => fixed(vec![0xff, 0xff, 0, 0x80, 1, 0], 3),
        DataType::U32 | DataType::I32 => {
            fixed([u32::MAX, 1 << 31, 7].iter().flat_map(|v| v.to_le_bytes()).collect(), 3)
        }
        DataType::U64 | DataType::I64 => {
            fixed([u64::MAX, 1 << 63, 7].iter().flat_map(|v| v.to_le_bytes()).collect(), 3)
        }
        // FP16: 0.1, -65504, smallest subnormal. BF16: 0.1, -max, 1.0.
        DataType::F16 => fixed([0x2e66u16, 0xfbff, 0x0001].iter().flat_map(|v| v.to_le_bytes()).collect(), 3),
        DataType::BF16 => {
            fixed([0x3dcdu16, 0xff7f, 0x3f80].iter().flat_map(|v| v.to_le_bytes()).collect(), 3)
        }
        DataType::F32 => {
            let v = [0.1f32, -0.0, f32::MAX, f32::from_bits(1), 1.0 / 3.0];
            fixed(v.iter().flat_map(|v| v.to_le_bytes()).collect(), 5)
        }
        DataType::F64 => {
            let v = [0.1f64, f64::MIN_POSITIVE, -1e300, 1.0 / 3.0];
            fixed(v.iter().flat_map(|v| v.to_le_bytes()).collect(), 4)
        }
        DataType::Bytes => Tensor::new(
            dtype,
            vec![1, 3],
            TensorData::Strings(vec![
                Bytes::new(),
                Bytes::from_static(b"a\"b\n"),
                Bytes::from("\u{e9}".as_bytes().to_vec()),
            ]),
        ),
    };
    t.unwrap()
}

fn parts(outputs: Vec<(String, Tensor, bool)>) -> InferResponseParts {
    InferResponseParts {
        model_name: "m".to_owned(),
        model_version: Some("1".to_owned()),
        id: Some("42".to_owned()),
        parameters: Default::default(),
        outputs,
    }
}

#[test]
fn golden_binary_response() {
    let out0 = Tensor::from_f32(vec![1, 2], &[1.0, 2.0]).unwrap();
    let out1 = Tensor::new(
        DataType::I32,
        vec![2],
        TensorData::Fixed(Bytes::from([3i32, -4].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())),
    )
    .unwrap();
    let out2 =
        Tensor::new(DataType::Bytes, vec![1], TensorData::Strings(vec![Bytes::from_static(b"ok")])).unwrap();
    let encoded = encode_infer_response(&parts(vec![
        ("OUT0".to_owned(), out0, true),
        ("OUT1".to_owned(), out1, false),
        ("OUT2".to_owned(), out2, true),
    ]));
    let json = concat!(
        r#"{"model_name":"m","model_version":"1","id":"42","outputs":["#,
        r#"{"name":"OUT0","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},"#,
        r#"{"name":"OUT1","datatype":"INT32","shape":[2],"data":[3,-4]},"#,
        r#"{"name":"OUT2","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]}"#
    );
    let mut expected = json.as_bytes().to_vec();
    expected.extend_from_slice(&[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
    expected.extend_from_slice(&[2, 0, 0, 0, b'o', b'k']);
    assert_eq!(encoded.body.as_ref(), expected.as_slice());
    assert_eq!(encoded.header_len, Some(json.len()));
    assert_eq!(encoded.content_type, CONTENT_TYPE_BINARY);

    let (_, outputs) = parse_like_tritonclient(&encoded.body, encoded.header_len);
    assert_eq!(outputs[0].1.to_f32_vec(), Some(vec![1.0, 2.0]));
    assert_eq!(outputs[2].1.data(), &TensorData::Strings(vec![Bytes::from_static(b"ok")]));
}

#[test]
fn golden_json_response() {
    let out = Tensor::from_f32(vec![1, 3], &[0.5, -1.0, 0.1]).unwrap();
    let mut resp = parts(vec![("probabilities".to_owned(), out, false)]);
    resp.model_version = None;
    resp.id = None;
    resp.parameters.insert("x-switchyard-model".to_owned(), Value::from("digits-cheap"));
    let encoded = encode_infer_response(&resp);
    assert_eq!(
        std::str::from_utf8(&encoded.body).unwrap(),
        r#"{"model_name":"m","parameters":{"x-switchyard-model":"digits-cheap"},"outputs":[{"name":"probabilities","datatype":"FP32","shape":[1,3],"data":[0.5,-1.0,0.1]}]}"#
    );
    assert_eq!(encoded.header_len, None);
    assert_eq!(encoded.content_type, CONTENT_TYPE_JSON);
}

#[test]
fn every_datatype_round_trips_as_json_and_binary() {
    for binary in [false, true] {
        let outputs: Vec<(String, Tensor, bool)> =
            ALL_DATA_TYPES.iter().map(|&d| (d.v2_name().to_lowercase(), tensor_of(d), binary)).collect();
        let encoded = encode_infer_response(&parts(outputs.clone()));
        assert_eq!(encoded.header_len.is_some(), binary);
        let (header, decoded) = parse_like_tritonclient(&encoded.body, encoded.header_len);
        assert_eq!(header["model_name"], "m");
        assert_eq!(header["id"], "42");
        assert_eq!(decoded.len(), outputs.len());
        for ((name, want, _), (got_name, got)) in outputs.iter().zip(&decoded) {
            assert_eq!(name, got_name);
            assert_eq!(want, got, "{name} binary={binary}");
        }
    }
}

#[test]
fn mixed_binary_and_json_outputs_keep_order() {
    let outputs: Vec<(String, Tensor, bool)> = ALL_DATA_TYPES
        .iter()
        .enumerate()
        .map(|(i, &d)| (format!("o{i}"), tensor_of(d), i % 2 == 0))
        .collect();
    let encoded = encode_infer_response(&parts(outputs.clone()));
    let (header, decoded) = parse_like_tritonclient(&encoded.body, encoded.header_len);
    for (i, ((_, want, binary), (_, got))) in outputs.iter().zip(&decoded).enumerate() {
        assert_eq!(want, got);
        assert_eq!(header["outputs"][i]["parameters"]["binary_data_size"].is_u64(), *binary);
        assert_eq!(header["outputs"][i]["data"].is_array(), !*binary);
    }
}

#[test]
fn non_finite_floats_are_null_in_json() {
    let out = Tensor::from_f32(vec![3], &[f32::NAN, f32::INFINITY, 1.0]).unwrap();
    let encoded = encode_infer_response(&parts(vec![("y".to_owned(), out, false)]));
    let header: Value = serde_json::from_slice(&encoded.body).unwrap();
    assert_eq!(header["outputs"][0]["data"], serde_json::json!([null, null, 1.0]));
}

#[test]
fn non_utf8_bytes_output_goes_binary() {
    let out =
        Tensor::new(DataType::Bytes, vec![1], TensorData::Strings(vec![Bytes::from_static(&[0xff, 0])]))
            .unwrap();
    let encoded = encode_infer_response(&parts(vec![("y".to_owned(), out.clone(), false)]));
    assert!(encoded.header_len.is_some());
    let (_, decoded) = parse_like_tritonclient(&encoded.body, encoded.header_len);
    assert_eq!(decoded[0].1, out);
}

#[test]
fn empty_binary_output() {
    let out = Tensor::from_f32(vec![0, 4], &[]).unwrap();
    let encoded = encode_infer_response(&parts(vec![("y".to_owned(), out.clone(), true)]));
    assert_eq!(encoded.header_len, Some(encoded.body.len()));
    let (header, decoded) = parse_like_tritonclient(&encoded.body, encoded.header_len);
    assert_eq!(header["outputs"][0]["parameters"]["binary_data_size"], 0);
    assert_eq!(decoded[0].1, out);
}
