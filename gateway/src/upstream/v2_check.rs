//! Checking an upstream model's decoded answer against what was asked and
//! what the model declares, before the answer is used (or cached):
//!
//! 1. every output is in the model's signature, with its datatype;
//! 2. its shape has the signature's rank and every fixed dimension (`-1`
//!    accepts any size). A column and a vector are one thing, as for
//!    inputs: an output declared `[-1]` may come as `[N, 1]` and one
//!    declared `[-1, 1]` as `[N]`; it is given the declared shape;
//! 3. when the model batches (every input's first dimension is `-1`), an
//!    output whose first dimension is `-1` has one row per request row;
//! 4. the outputs asked for are all there; only they are kept, in the
//!    order asked.
//!
//! Anything else is a [`BadResponse`]: the gateway answers 502 and counts
//! it against the address like any garbled answer.

use switchyard_runtime::{InferenceRequest, ModelSignature, Tensor, TensorSpec};

/// Why an upstream's answer is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid V2 response: {0}")]
pub struct BadResponse(pub String);

/// What an answer must fit.
#[derive(Debug, Clone, Copy, Default)]
pub struct Expected<'a> {
    /// The outputs asked for (`None`: all of the model's).
    pub requested: Option<&'a [String]>,
    /// The model's signature, when known.
    pub signature: Option<&'a ModelSignature>,
    /// The request's rows, when the model batches (rule 3).
    pub rows: Option<usize>,
}

impl<'a> Expected<'a> {
    /// What an answer to `request` from a model with `signature` must fit.
    pub fn for_request(request: &'a InferenceRequest, signature: &'a ModelSignature) -> Expected<'a> {
        let batches =
            !signature.inputs.is_empty() && signature.inputs.iter().all(|t| t.shape.first() == Some(&-1));
        let rows = request.inputs.first().and_then(|(_, t)| t.shape().first().copied());
        Expected {
            requested: request.outputs.as_deref(),
            signature: Some(signature),
            rows: rows.filter(|_| batches),
        }
    }

    /// Applies the rules of the module docs to decoded `outputs`.
    pub fn check(&self, outputs: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>, BadResponse> {
        let mut outputs = match self.signature {
            Some(sig) => outputs
                .into_iter()
                .map(|(name, tensor)| {
                    let spec = sig.output(&name).ok_or_else(|| {
                        BadResponse(format!("output '{name}' is not in the model's signature"))
                    })?;
                    let tensor = self.fit(&name, spec, tensor)?;
                    Ok((name, tensor))
                })
                .collect::<Result<Vec<_>, BadResponse>>()?,
            None => outputs,
        };
        let Some(names) = self.requested else { return Ok(outputs) };
        names
            .iter()
            .map(|name| {
                let at = outputs
                    .iter()
                    .position(|(n, _)| n == name)
                    .ok_or_else(|| BadResponse(format!("requested output '{name}' is missing")))?;
                Ok(outputs.swap_remove(at))
            })
            .collect()
    }

    /// Rules 1-3 for one output; the tensor with its declared shape.
    fn fit(&self, name: &str, spec: &TensorSpec, tensor: Tensor) -> Result<Tensor, BadResponse> {
        if spec.dtype != tensor.dtype() {
            return Err(BadResponse(format!(
                "output '{name}' is {}, the model's signature says {}",
                tensor.dtype(),
                spec.dtype
            )));
        }
        let shape = declared_shape(&spec.shape, tensor.shape()).ok_or_else(|| {
            BadResponse(format!(
                "output '{name}' has shape {:?}, the model's signature says {:?}",
                tensor.shape(),
                spec.shape
            ))
        })?;
        if let (Some(rows), Some(-1), Some(&got)) = (self.rows, spec.shape.first(), shape.first()) {
            if got != rows {
                return Err(BadResponse(format!("output '{name}' has {got} row(s), the request has {rows}")));
            }
        }
        if shape == tensor.shape() {
            return Ok(tensor);
        }
        tensor.reshape(shape).map_err(|e| BadResponse(format!("output '{name}': {e}")))
    }
}

/// The shape `got` takes under `spec` (rule 2), or `None` when it does
/// not fit.
fn declared_shape(spec: &[i64], got: &[usize]) -> Option<Vec<usize>> {
    let fits = |spec: &[i64], got: &[usize]| {
        spec.len() == got.len()
            && spec.iter().zip(got).all(|(&want, &n)| want < 0 || i64::try_from(n) == Ok(want))
    };
    if fits(spec, got) {
        return Some(got.to_vec());
    }
    match (spec, got) {
        ([d], [n, 1]) if *d < 0 => Some(vec![*n]),
        ([d, 1], [n]) if *d < 0 => Some(vec![*n, 1]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_runtime::DataType;

    fn signature() -> ModelSignature {
        let spec = |name: &str, dtype, shape: Vec<i64>| TensorSpec { name: name.into(), dtype, shape };
        ModelSignature {
            inputs: vec![spec("X", DataType::F32, vec![-1, 4])],
            outputs: vec![spec("label", DataType::I64, vec![-1]), spec("p", DataType::F32, vec![-1, 2])],
        }
    }

    fn request(rows: usize) -> InferenceRequest {
        InferenceRequest::new(vec![(
            "X".into(),
            Tensor::from_f32(vec![rows, 4], &vec![0.0; rows * 4]).unwrap(),
        )])
    }

    fn answer(label: Vec<usize>, p: Vec<usize>) -> Vec<(String, Tensor)> {
        let n: usize = label.iter().product();
        let m: usize = p.iter().product();
        let label =
            Tensor::new(DataType::I64, label, switchyard_runtime::TensorData::Fixed(vec![0u8; n * 8].into()));
        vec![("label".into(), label.unwrap()), ("p".into(), Tensor::from_f32(p, &vec![0.5; m]).unwrap())]
    }

    #[test]
    fn rows_dimensions_and_ranks_are_checked() {
        let sig = signature();
        let req = request(2);
        let expected = Expected::for_request(&req, &sig);
        assert_eq!(expected.rows, Some(2));
        assert!(expected.check(answer(vec![2], vec![2, 2])).is_ok());
        let err = |outputs| expected.check(outputs).unwrap_err().0;
        assert!(err(answer(vec![3], vec![3, 2])).contains("3 row(s), the request has 2"));
        assert!(err(answer(vec![2], vec![2, 3])).contains("[2, 3], the model's signature says [-1, 2]"));
        assert!(err(answer(vec![2, 1, 1], vec![2, 2])).contains("label"));
        assert!(err(answer(vec![], vec![2, 2])).contains("label"), "a scalar is not a column");
    }

    #[test]
    fn a_column_takes_the_declared_vector_shape() {
        let sig = signature();
        let req = request(2);
        let outputs = Expected::for_request(&req, &sig).check(answer(vec![2, 1], vec![2, 2])).unwrap();
        assert_eq!(outputs[0].1.shape(), [2]);
    }

    #[test]
    fn a_model_that_does_not_batch_has_no_row_rule() {
        let mut sig = signature();
        sig.inputs[0].shape = vec![2, 4];
        let req = request(2);
        let expected = Expected::for_request(&req, &sig);
        assert_eq!(expected.rows, None);
        assert!(expected.check(answer(vec![5], vec![5, 2])).is_ok());
    }
}
