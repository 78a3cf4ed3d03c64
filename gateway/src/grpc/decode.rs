//! A gRPC `ModelInferRequest` to the same [`DecodedRequest`] the REST
//! codec produces, under the same [`DecodeLimits`], so that everything
//! after decoding ([`crate::inference`]) is shared.
//!
//! Tensor data comes either typed (`contents.<type>_contents`, the field of
//! the input's datatype) or raw (`raw_input_contents`, one entry per input,
//! in Triton's binary layout: little-endian, `BYTES` length-prefixed). As
//! in Triton, a request uses raw contents for all its inputs or for none.
//! `FP16` and `BF16` have no typed field: they travel raw.

use super::params::to_json;
use super::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use super::proto::{InferTensorContents, ModelInferRequest};
use bytes::Bytes;
use switchyard_protocol::v2::binary::decode_binary;
use switchyard_protocol::v2::{DecodeLimits, DecodedRequest, Parameters, RequestedOutput, V2Error};
use switchyard_runtime::tensor::{DataType, TensorData};
use switchyard_runtime::Tensor;

/// Decodes `request`'s id, parameters, inputs and requested outputs.
pub fn decode_model_infer(
    request: ModelInferRequest,
    limits: &DecodeLimits,
) -> Result<DecodedRequest, V2Error> {
    let ModelInferRequest { id, parameters, inputs: raw_inputs, outputs, raw_input_contents, .. } = request;
    if raw_inputs.len() > limits.max_inputs {
        return Err(V2Error::TooLarge(format!(
            "{} inputs, the limit is {}",
            raw_inputs.len(),
            limits.max_inputs
        )));
    }
    if !raw_input_contents.is_empty() && raw_input_contents.len() != raw_inputs.len() {
        return Err(V2Error::InvalidField {
            field: "raw_input_contents",
            context: "the request".into(),
            reason: format!(
                "has {} entries for {} inputs; send every input's data raw, or none",
                raw_input_contents.len(),
                raw_inputs.len()
            ),
        });
    }
    let mut raw = raw_input_contents.into_iter();
    let mut inputs: Vec<(String, Tensor)> = Vec::with_capacity(raw_inputs.len());
    let mut input_parameters = Vec::with_capacity(raw_inputs.len());
    let mut total = 0usize;
    for input in raw_inputs {
        let (name, tensor, params) = decode_input(input, raw.next(), limits, &mut total)?;
        if inputs.iter().any(|(n, _)| *n == name) {
            return Err(V2Error::Duplicate { kind: "input", name });
        }
        inputs.push((name, tensor));
        input_parameters.push(params);
    }
    let outputs = decode_outputs(outputs, limits)?;
    Ok(DecodedRequest {
        id: (!id.is_empty()).then_some(id),
        inputs,
        input_parameters,
        outputs,
        binary_data_output: true,
        parameters: to_json(parameters),
    })
}

/// One input: name, checked shape, data typed or raw.
fn decode_input(
    input: InferInputTensor,
    raw: Option<Bytes>,
    limits: &DecodeLimits,
    total: &mut usize,
) -> Result<(String, Tensor, Parameters), V2Error> {
    let InferInputTensor { name, datatype, shape, parameters, contents } = input;
    if name.is_empty() {
        return Err(V2Error::MissingField { field: "name", context: "an input".into() });
    }
    let context = format!("input '{name}'");
    let dtype = DataType::from_v2_name(&datatype)
        .ok_or_else(|| V2Error::UnknownDatatype { input: name.clone(), datatype: datatype.clone() })?;
    if shape.len() > limits.max_rank {
        return Err(V2Error::TooLarge(format!(
            "{context} has {} dimensions, the limit is {}",
            shape.len(),
            limits.max_rank
        )));
    }
    let shape =
        shape.iter().map(|&d| usize::try_from(d)).collect::<Result<Vec<usize>, _>>().map_err(|_| {
            V2Error::InvalidField {
                field: "shape",
                context: context.clone(),
                reason: format!("{shape:?} has a negative dimension"),
            }
        })?;
    let count = limits.check_shape(&name, &shape)?;
    limits.check_rows(&name, &shape)?;
    *total = limits.add_total(*total, count)?;
    let params = to_json(parameters);
    if params.contains_key("shared_memory_region") {
        return Err(V2Error::Unsupported(format!(
            "input '{name}' uses shared memory, which Switchyard does not support; send its data in the request"
        )));
    }
    let data = match (raw, contents) {
        (Some(_), Some(_)) => return Err(V2Error::ConflictingData { input: name }),
        (Some(bytes), None) => decode_binary(&name, dtype, &shape, count, bytes)?,
        (None, Some(contents)) => typed(&name, dtype, count, contents)?,
        (None, None) => return Err(V2Error::MissingData { input: name }),
    };
    let tensor = Tensor::new(dtype, shape.clone(), data).map_err(|e| V2Error::ShapeMismatch {
        input: name.clone(),
        shape,
        reason: e.to_string(),
    })?;
    Ok((name, tensor, params))
}

/// The typed contents of an input of `dtype` with `count` elements: the
/// field of its datatype must hold exactly `count` values, every other
/// field must be empty.
fn typed(name: &str, dtype: DataType, count: usize, c: InferTensorContents) -> Result<TensorData, V2Error> {
    let lengths = [
        ("bool_contents", c.bool_contents.len()),
        ("int_contents", c.int_contents.len()),
        ("int64_contents", c.int64_contents.len()),
        ("uint_contents", c.uint_contents.len()),
        ("uint64_contents", c.uint64_contents.len()),
        ("fp32_contents", c.fp32_contents.len()),
        ("fp64_contents", c.fp64_contents.len()),
        ("bytes_contents", c.bytes_contents.len()),
    ];
    let Some(field) = contents_field(dtype) else {
        return Err(V2Error::Unsupported(format!(
            "input '{name}' is {}, which has no typed contents field; send it in raw_input_contents",
            dtype.v2_name()
        )));
    };
    for (other, len) in lengths {
        if other != field && len > 0 {
            return Err(V2Error::InvalidField {
                field: "contents",
                context: format!("input '{name}'"),
                reason: format!("a {} input takes its data in {field}, not {other}", dtype.v2_name()),
            });
        }
    }
    let given = lengths.iter().find(|(f, _)| *f == field).map_or(0, |(_, len)| *len);
    if given != count {
        return Err(V2Error::ShapeMismatch {
            input: name.to_owned(),
            shape: Vec::new(),
            reason: format!("{field} has {given} elements, the shape needs {count}"),
        });
    }
    let out_of_range = |index: usize| V2Error::InvalidElement {
        input: name.to_owned(),
        datatype: dtype.v2_name(),
        index,
        reason: "out of range".into(),
    };
    Ok(match dtype {
        DataType::Bool => fixed(c.bool_contents.iter().map(|&b| [u8::from(b)])),
        DataType::I8 => {
            fixed(narrow::<i8, _>(&c.int_contents, out_of_range)?.iter().map(|v| v.to_le_bytes()))
        }
        DataType::I16 => {
            fixed(narrow::<i16, _>(&c.int_contents, out_of_range)?.iter().map(|v| v.to_le_bytes()))
        }
        DataType::I32 => fixed(c.int_contents.iter().map(|v| v.to_le_bytes())),
        DataType::I64 => fixed(c.int64_contents.iter().map(|v| v.to_le_bytes())),
        DataType::U8 => {
            fixed(narrow::<u8, _>(&c.uint_contents, out_of_range)?.iter().map(|v| v.to_le_bytes()))
        }
        DataType::U16 => {
            fixed(narrow::<u16, _>(&c.uint_contents, out_of_range)?.iter().map(|v| v.to_le_bytes()))
        }
        DataType::U32 => fixed(c.uint_contents.iter().map(|v| v.to_le_bytes())),
        DataType::U64 => fixed(c.uint64_contents.iter().map(|v| v.to_le_bytes())),
        DataType::F32 => fixed(c.fp32_contents.iter().map(|v| v.to_le_bytes())),
        DataType::F64 => fixed(c.fp64_contents.iter().map(|v| v.to_le_bytes())),
        DataType::Bytes => TensorData::Strings(c.bytes_contents),
        DataType::F16 | DataType::BF16 => return Err(V2Error::Unsupported(dtype.v2_name().to_string())),
    })
}

/// The typed field that carries `dtype`'s elements; `None` for the
/// datatypes that only travel raw.
pub fn contents_field(dtype: DataType) -> Option<&'static str> {
    Some(match dtype {
        DataType::Bool => "bool_contents",
        DataType::I8 | DataType::I16 | DataType::I32 => "int_contents",
        DataType::I64 => "int64_contents",
        DataType::U8 | DataType::U16 | DataType::U32 => "uint_contents",
        DataType::U64 => "uint64_contents",
        DataType::F32 => "fp32_contents",
        DataType::F64 => "fp64_contents",
        DataType::Bytes => "bytes_contents",
        DataType::F16 | DataType::BF16 => return None,
    })
}

/// Little-endian elements concatenated into one buffer.
fn fixed<const N: usize>(elements: impl Iterator<Item = [u8; N]>) -> TensorData {
    let mut out = Vec::with_capacity(elements.size_hint().0 * N);
    for element in elements {
        out.extend_from_slice(&element);
    }
    TensorData::Fixed(Bytes::from(out))
}

/// Values of a wider wire type narrowed to `T`; the index of the first
/// that does not fit is an error.
fn narrow<T: TryFrom<W>, W: Copy>(values: &[W], err: impl Fn(usize) -> V2Error) -> Result<Vec<T>, V2Error> {
    values.iter().enumerate().map(|(i, &v)| T::try_from(v).map_err(|_| err(i))).collect()
}

/// The requested outputs; a `classification` parameter asks for the top k.
fn decode_outputs(
    outputs: Vec<InferRequestedOutputTensor>,
    limits: &DecodeLimits,
) -> Result<Vec<RequestedOutput>, V2Error> {
    if outputs.len() > limits.max_outputs {
        return Err(V2Error::TooLarge(format!(
            "{} requested outputs, the limit is {}",
            outputs.len(),
            limits.max_outputs
        )));
    }
    let mut decoded: Vec<RequestedOutput> = Vec::with_capacity(outputs.len());
    for output in outputs {
        let name = output.name;
        if decoded.iter().any(|o| o.name == name) {
            return Err(V2Error::Duplicate { kind: "output", name });
        }
        let parameters = to_json(output.parameters);
        let classification = match parameters.get("classification") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(k) if k > 0 => Some(usize::try_from(k).unwrap_or(usize::MAX)),
                _ => {
                    return Err(V2Error::InvalidField {
                        field: "classification",
                        context: format!("output '{name}'"),
                        reason: "must be a positive integer".into(),
                    })
                }
            },
        };
        decoded.push(RequestedOutput { name, binary: true, classification, parameters });
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::proto::InferParameter;
    use serde_json::Value;

    fn input(
        name: &str,
        datatype: &str,
        shape: &[i64],
        contents: Option<InferTensorContents>,
    ) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: datatype.into(),
            shape: shape.to_vec(),
            parameters: Default::default(),
            contents,
        }
    }

    fn request(inputs: Vec<InferInputTensor>, raw: Vec<Bytes>) -> ModelInferRequest {
        ModelInferRequest { model_name: "m".into(), inputs, raw_input_contents: raw, ..Default::default() }
    }

    fn decode(req: ModelInferRequest) -> Result<DecodedRequest, V2Error> {
        decode_model_infer(req, &DecodeLimits::default())
    }

    #[test]
    fn typed_and_raw_contents_give_the_same_tensor() {
        let typed = InferTensorContents { fp32_contents: vec![1.0, -2.5, 3.0, 0.0], ..Default::default() };
        let a = decode(request(vec![input("X", "FP32", &[2, 2], Some(typed))], vec![])).unwrap();
        let raw: Vec<u8> = [1.0f32, -2.5, 3.0, 0.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let b = decode(request(vec![input("X", "FP32", &[2, 2], None)], vec![Bytes::from(raw)])).unwrap();
        assert_eq!(a.inputs, b.inputs);
        let words =
            InferTensorContents { bytes_contents: vec![Bytes::from_static(b"hi")], ..Default::default() };
        let s = decode(request(vec![input("t", "BYTES", &[1], Some(words))], vec![])).unwrap();
        assert_eq!(s.inputs[0].1.data(), &TensorData::Strings(vec![Bytes::from_static(b"hi")]));
    }

    #[test]
    fn narrow_integer_types_are_range_checked() {
        let fits = InferTensorContents { int_contents: vec![-128, 127], ..Default::default() };
        let ok = decode(request(vec![input("i", "INT8", &[2], Some(fits))], vec![])).unwrap();
        assert_eq!(ok.inputs[0].1.raw_bytes().unwrap().as_ref(), &[0x80, 0x7f]);
        let over = InferTensorContents { int_contents: vec![1, 128], ..Default::default() };
        let err = decode(request(vec![input("i", "INT8", &[2], Some(over))], vec![])).unwrap_err();
        assert!(matches!(err, V2Error::InvalidElement { index: 1, .. }), "{err}");
        let big = InferTensorContents { uint_contents: vec![65_536], ..Default::default() };
        assert!(decode(request(vec![input("u", "UINT16", &[1], Some(big))], vec![])).is_err());
    }

    #[test]
    fn contents_must_match_the_datatype_and_the_shape() {
        let wrong_field = InferTensorContents { int64_contents: vec![1, 2], ..Default::default() };
        let err = decode(request(vec![input("X", "FP32", &[2], Some(wrong_field))], vec![])).unwrap_err();
        assert!(err.to_string().contains("fp32_contents"), "{err}");
        let short = InferTensorContents { fp32_contents: vec![1.0], ..Default::default() };
        let err = decode(request(vec![input("X", "FP32", &[2], Some(short))], vec![])).unwrap_err();
        assert!(err.to_string().contains("1 elements, the shape needs 2"), "{err}");
        let half = InferTensorContents { fp32_contents: vec![1.0], ..Default::default() };
        let err = decode(request(vec![input("h", "FP16", &[1], Some(half))], vec![])).unwrap_err();
        assert!(err.to_string().contains("raw_input_contents"), "{err}");
        let fp16 =
            decode(request(vec![input("h", "FP16", &[2], None)], vec![Bytes::from_static(&[0, 60, 0, 64])]));
        assert_eq!(fp16.unwrap().inputs[0].1.len(), 2, "FP16 travels raw");
    }

    #[test]
    fn raw_contents_cover_every_input_or_none_and_match_their_size() {
        let two = vec![input("a", "FP32", &[1], None), input("b", "FP32", &[1], None)];
        let err = decode(request(two, vec![Bytes::from_static(&[0; 4])])).unwrap_err();
        assert!(err.to_string().contains("1 entries for 2 inputs"), "{err}");
        let err = decode(request(vec![input("a", "FP32", &[2], None)], vec![Bytes::from_static(&[0; 4])]))
            .unwrap_err();
        assert!(matches!(err, V2Error::BinarySize { expected: 8, actual: 4, .. }), "{err}");
        let both = InferTensorContents { fp32_contents: vec![1.0], ..Default::default() };
        let err =
            decode(request(vec![input("a", "FP32", &[1], Some(both))], vec![Bytes::from_static(&[0; 4])]));
        assert!(matches!(err, Err(V2Error::ConflictingData { .. })));
        assert!(matches!(
            decode(request(vec![input("a", "FP32", &[1], None)], vec![])),
            Err(V2Error::MissingData { .. })
        ));
    }

    #[test]
    fn shapes_and_counts_are_bounded_like_rest() {
        let limits = DecodeLimits::default();
        let err = decode(request(vec![input("a", "FP32", &[-1], None)], vec![Bytes::new()])).unwrap_err();
        assert_eq!(err.status(), 400, "{err}");
        let huge = i64::try_from(limits.max_elements).unwrap() + 1;
        let err = decode(request(vec![input("a", "FP32", &[huge], None)], vec![Bytes::new()])).unwrap_err();
        assert_eq!(err.status(), 413, "{err}");
        let deep = vec![1i64; limits.max_rank + 1];
        assert_eq!(
            decode(request(vec![input("a", "FP32", &deep, None)], vec![Bytes::new()])).unwrap_err().status(),
            413
        );
        let dup = vec![input("a", "FP32", &[0], None), input("a", "FP32", &[0], None)];
        assert!(matches!(
            decode(request(dup, vec![Bytes::new(), Bytes::new()])),
            Err(V2Error::Duplicate { .. })
        ));
    }

    #[test]
    fn parameters_and_outputs_carry_over() {
        let mut req = request(vec![input("X", "FP32", &[0], None)], vec![Bytes::new()]);
        req.id = "req-1".into();
        let timeout = InferParameter {
            parameter_choice: Some(super::super::proto::infer_parameter::ParameterChoice::Int64Param(5000)),
        };
        req.parameters.insert("timeout".into(), timeout.clone());
        let mut classify = InferRequestedOutputTensor { name: "probabilities".into(), ..Default::default() };
        classify.parameters.insert(
            "classification".into(),
            InferParameter {
                parameter_choice: Some(super::super::proto::infer_parameter::ParameterChoice::Int64Param(3)),
            },
        );
        req.outputs = vec![classify];
        let decoded = decode(req).unwrap();
        assert_eq!(decoded.id.as_deref(), Some("req-1"));
        assert_eq!(decoded.parameters["timeout"], Value::from(5000));
        assert_eq!(decoded.outputs[0].classification, Some(3));
    }
}
