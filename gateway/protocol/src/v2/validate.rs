//! Checking a decoded request against the signature of the model that
//! will run it.

use switchyard_runtime::signature::ModelSignature;

use super::error::V2Error;
use super::input_check::{check_input, column_reshape};
use super::request::DecodedRequest;

/// Checks that `req` fits `signature` of model (route) `model`: every
/// input is known, has the model's datatype and rank, and matches every
/// fixed dimension (`-1` accepts any size); every model input is present;
/// every requested output exists.
///
/// A column and a vector are one thing: an input declared `[-1, 1]` (a
/// text model's strings, one per row) may come as `[N]`, and one declared
/// `[-1]` as `[N, 1]` (the config shows it as `dims: [1]` with `reshape:
/// {shape: []}`, as Triton does, which `perf_analyzer` sends);
/// [`reshape_columns`] then gives it the declared shape.
pub fn check_signature(req: &DecodedRequest, model: &str, signature: &ModelSignature) -> Result<(), V2Error> {
    for (name, tensor) in &req.inputs {
        check_input(name, tensor.dtype(), tensor.shape(), model, signature)?;
    }
    if let Some(spec) = signature.inputs.iter().find(|spec| req.input(&spec.name).is_none()) {
        return Err(V2Error::MissingInput { input: spec.name.clone(), model: model.to_owned() });
    }
    if let Some(out) = req.outputs.iter().find(|o| signature.output(&o.name).is_none()) {
        return Err(V2Error::UnknownOutput { output: out.name.clone(), model: model.to_owned() });
    }
    Ok(())
}

/// Gives every input sent as a column or a vector the shape the model
/// declares (after [`check_signature`]), so both forms run, and are
/// cached, alike.
pub fn reshape_columns(req: &mut DecodedRequest, signature: &ModelSignature) -> Result<(), V2Error> {
    let inputs = std::mem::take(&mut req.inputs);
    req.inputs = inputs
        .into_iter()
        .map(|(name, tensor)| {
            let Some(target) =
                signature.input(&name).and_then(|spec| column_reshape(&spec.shape, tensor.shape()))
            else {
                return Ok((name, tensor));
            };
            let shape = tensor.shape().to_vec();
            match tensor.reshape(target) {
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
    fn columns_and_vectors_take_the_declared_shape() {
        let sig = |shape: Vec<i64>| ModelSignature {
            inputs: vec![TensorSpec { name: "text".to_owned(), dtype: DataType::Bytes, shape }],
            outputs: Vec::new(),
        };
        let json = |shape: &str| {
            format!(r#"{{"inputs":[{{"name":"text","shape":{shape},"datatype":"BYTES","data":["a","b"]}}]}}"#)
        };
        let decode =
            |text: String| decode_infer_request(Bytes::from(text), None, &DecodeLimits::default()).unwrap();
        for (declared, other, same) in [(vec![-1], "[2,1]", "[2]"), (vec![-1, 1], "[2]", "[2,1]")] {
            let sig = sig(declared);
            let mut reshaped = decode(json(other));
            check_signature(&reshaped, "m", &sig).unwrap();
            reshape_columns(&mut reshaped, &sig).unwrap();
            assert_eq!(reshaped.inputs, decode(json(same)).inputs);
            let err = check_signature(&decode(json("[1,2]")), "m", &sig).unwrap_err();
            assert!(matches!(err, V2Error::InputShape { .. }), "{err}");
        }
    }
}
