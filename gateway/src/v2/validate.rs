//! Checking a decoded request against the signature of the model that
//! will run it.

use switchyard_runtime::signature::ModelSignature;

use super::error::V2Error;
use super::request::DecodedRequest;

/// Checks that `req` fits `signature` of model (route) `model`: every
/// input is known, has the model's datatype and rank, and matches every
/// fixed dimension (`-1` accepts any size); every model input is present;
/// every requested output exists. A one-dimensional input (`[-1]`, e.g. a
/// text model's strings) may also come as `[N, 1]`: the model config shows
/// it as `dims: [1]` with `reshape: {shape: []}`, as Triton does, so
/// `perf_analyzer` sends that; [`squeeze_columns`] then reshapes it.
pub fn check_signature(req: &DecodedRequest, model: &str, signature: &ModelSignature) -> Result<(), V2Error> {
    for (name, tensor) in &req.inputs {
        let Some(spec) = signature.input(name) else {
            return Err(V2Error::UnknownInput { input: name.clone(), model: model.to_owned() });
        };
        if spec.dtype != tensor.dtype() {
            return Err(V2Error::DatatypeMismatch {
                input: name.clone(),
                model: model.to_owned(),
                expected: spec.dtype.v2_name(),
                actual: tensor.dtype().v2_name(),
            });
        }
        let fits = is_column_of(&spec.shape, tensor.shape())
            || spec.shape.len() == tensor.shape().len()
                && spec
                    .shape
                    .iter()
                    .zip(tensor.shape())
                    .all(|(&want, &got)| want < 0 || i64::try_from(got) == Ok(want));
        if !fits {
            return Err(V2Error::InputShape {
                input: name.clone(),
                model: model.to_owned(),
                expected: spec.shape.clone(),
                actual: tensor.shape().to_vec(),
            });
        }
    }
    if let Some(spec) = signature.inputs.iter().find(|spec| req.input(&spec.name).is_none()) {
        return Err(V2Error::MissingInput { input: spec.name.clone(), model: model.to_owned() });
    }
    if let Some(out) = req.outputs.iter().find(|o| signature.output(&o.name).is_none()) {
        return Err(V2Error::UnknownOutput { output: out.name.clone(), model: model.to_owned() });
    }
    Ok(())
}

/// True when `shape` is `[N, 1]` for a `[-1]` input.
fn is_column_of(spec: &[i64], shape: &[usize]) -> bool {
    matches!((spec, shape), ([d], [_, 1]) if *d < 0)
}

/// Reshapes every `[N, 1]` input of a `[-1]` model input to `[N]` (after
/// [`check_signature`]), so both forms run, and are cached, alike.
pub fn squeeze_columns(req: &mut DecodedRequest, signature: &ModelSignature) -> Result<(), V2Error> {
    let inputs = std::mem::take(&mut req.inputs);
    req.inputs = inputs
        .into_iter()
        .map(|(name, tensor)| {
            let column = signature.input(&name).is_some_and(|spec| is_column_of(&spec.shape, tensor.shape()));
            if !column {
                return Ok((name, tensor));
            }
            let shape = tensor.shape().to_vec();
            match tensor.reshape(vec![shape[0]]) {
                Ok(t) => Ok((name, t)),
                Err(e) => Err(V2Error::ShapeMismatch { input: name, shape, reason: e.to_string() }),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v2::limits::DecodeLimits;
    use crate::v2::request::decode_infer_request;
    use bytes::Bytes;
    use switchyard_runtime::signature::TensorSpec;
    use switchyard_runtime::tensor::DataType;

    fn signature() -> ModelSignature {
        ModelSignature {
            inputs: vec![TensorSpec { name: "X".to_owned(), dtype: DataType::F32, shape: vec![-1, 2] }],
            outputs: vec![TensorSpec { name: "Y".to_owned(), dtype: DataType::F32, shape: vec![-1, 1] }],
        }
    }

    fn check(json: &str) -> Result<(), V2Error> {
        let req =
            decode_infer_request(Bytes::copy_from_slice(json.as_bytes()), None, &DecodeLimits::default())?;
        check_signature(&req, "m", &signature())
    }

    #[test]
    fn accepts_matching_request() {
        check(r#"{"inputs":[{"name":"X","shape":[3,2],"datatype":"FP32","data":[1,2,3,4,5,6]}],"outputs":[{"name":"Y"}]}"#)
            .unwrap();
    }

    #[test]
    fn rejects_mismatches() {
        type Check = fn(&V2Error) -> bool;
        let cases: [(&str, Check); 5] = [
            (r#"{"inputs":[{"name":"Z","shape":[1,2],"datatype":"FP32","data":[1,2]}]}"#, |e| {
                matches!(e, V2Error::UnknownInput { .. })
            }),
            (r#"{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP64","data":[1,2]}]}"#, |e| {
                matches!(e, V2Error::DatatypeMismatch { .. })
            }),
            (r#"{"inputs":[{"name":"X","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]}"#, |e| {
                matches!(e, V2Error::InputShape { .. })
            }),
            (r#"{"inputs":[]}"#, |e| matches!(e, V2Error::MissingInput { .. })),
            (
                r#"{"inputs":[{"name":"X","shape":[1,2],"datatype":"FP32","data":[1,2]}],"outputs":[{"name":"W"}]}"#,
                |e| matches!(e, V2Error::UnknownOutput { .. }),
            ),
        ];
        for (json, is_expected) in cases {
            let err = check(json).unwrap_err();
            assert!(is_expected(&err), "{json}: {err}");
            assert_eq!(err.status(), 400);
        }
    }

    #[test]
    fn column_of_strings_fits_a_one_dimensional_input_and_is_squeezed() {
        let sig = ModelSignature {
            inputs: vec![TensorSpec { name: "text".to_owned(), dtype: DataType::Bytes, shape: vec![-1] }],
            outputs: Vec::new(),
        };
        let json = |shape: &str| {
            format!(r#"{{"inputs":[{{"name":"text","shape":{shape},"datatype":"BYTES","data":["a","b"]}}]}}"#)
        };
        let decode =
            |text: String| decode_infer_request(Bytes::from(text), None, &DecodeLimits::default()).unwrap();
        let mut column = decode(json("[2,1]"));
        check_signature(&column, "m", &sig).unwrap();
        squeeze_columns(&mut column, &sig).unwrap();
        let flat = decode(json("[2]"));
        assert_eq!(column.inputs, flat.inputs);
        let err = check_signature(&decode(json("[1,2]")), "m", &sig).unwrap_err();
        assert!(matches!(err, V2Error::InputShape { .. }), "{err}");
    }
}
