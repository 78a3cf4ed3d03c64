//! Checking a request against the model's signature before it is queued,
//! so a bad request fails alone with a typed error instead of failing the
//! whole batch it would have joined.

use crate::error::RuntimeError;
use crate::request::InferenceRequest;
use crate::signature::{ModelSignature, TensorSpec};
use crate::tensor::{Tensor, TensorData};

/// A request that fits the model: inputs in graph order, output indices.
#[derive(Debug)]
pub struct Validated {
    /// One tensor per graph input, in graph order.
    pub inputs: Vec<Tensor>,
    /// Rows (size of the batch dimension); 1 for models that do not batch.
    pub rows: usize,
    /// Indices into the signature's outputs, in the order to return them.
    pub outputs: Vec<usize>,
    /// An explicit batching group (a text model's length bucket); `None`
    /// leaves it to the inputs' non-batch dimensions, worked out only when
    /// the request is queued (see [`Self::batch_key`]): a request that runs
    /// inline never needs it.
    pub group: Option<Vec<Vec<usize>>>,
}

impl Validated {
    /// The key requests are batched by (only equal keys share a batch):
    /// the explicit group, else the non-batch dimensions of every input;
    /// empty for a model that does not batch.
    pub fn batch_key(&mut self, batch: bool) -> Vec<Vec<usize>> {
        match self.group.take() {
            Some(group) => group,
            None if batch => {
                self.inputs.iter().map(|t| t.shape().get(1..).unwrap_or_default().to_vec()).collect()
            }
            None => Vec::new(),
        }
    }
}

/// True when every input has a dynamic leading dimension, so requests can
/// be concatenated along it.
pub fn batchable(signature: &ModelSignature) -> bool {
    !signature.inputs.is_empty() && signature.inputs.iter().all(|t| t.shape.first() == Some(&-1))
}

fn names(specs: &[TensorSpec]) -> String {
    specs.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// Validates `req` for `model`; `batch` says whether the model batches
/// (see [`batchable`]), which requires all inputs to agree on their rows.
pub fn validate(
    model: &str,
    signature: &ModelSignature,
    batch: bool,
    req: InferenceRequest,
) -> Result<Validated, RuntimeError> {
    let inputs = inputs_in_graph_order(model, signature, req.inputs)?;
    let rows = rows(model, signature, batch, &inputs)?;
    let outputs = output_indices(model, signature, req.outputs)?;
    Ok(Validated { inputs, rows, outputs, group: None })
}

/// The request's tensors, each checked against its input's spec, in graph
/// order. Requests usually name the inputs in graph order already: then
/// they are taken as they come; otherwise each is put in its slot.
fn inputs_in_graph_order(
    model: &str,
    signature: &ModelSignature,
    given: Vec<(String, Tensor)>,
) -> Result<Vec<Tensor>, RuntimeError> {
    let in_order = given.len() == signature.inputs.len()
        && given.iter().zip(&signature.inputs).all(|((name, _), spec)| *name == spec.name);
    if in_order {
        let mut inputs = Vec::with_capacity(given.len());
        for ((_, tensor), spec) in given.into_iter().zip(&signature.inputs) {
            check_tensor(model, spec, &tensor)?;
            inputs.push(tensor);
        }
        return Ok(inputs);
    }
    let mut slots: Vec<Option<Tensor>> = vec![None; signature.inputs.len()];
    for (name, tensor) in given {
        let Some(index) = signature.inputs.iter().position(|t| t.name == name) else {
            return Err(RuntimeError::UnknownInput {
                model: model.into(),
                input: name,
                expected: names(&signature.inputs),
            });
        };
        if slots[index].is_some() {
            return Err(RuntimeError::DuplicateInput { model: model.into(), input: name });
        }
        check_tensor(model, &signature.inputs[index], &tensor)?;
        slots[index] = Some(tensor);
    }
    let mut inputs = Vec::with_capacity(slots.len());
    for (slot, spec) in slots.into_iter().zip(&signature.inputs) {
        let tensor =
            slot.ok_or_else(|| RuntimeError::MissingInput { model: model.into(), input: spec.name.clone() })?;
        inputs.push(tensor);
    }
    Ok(inputs)
}

fn check_tensor(model: &str, spec: &TensorSpec, tensor: &Tensor) -> Result<(), RuntimeError> {
    if tensor.dtype() != spec.dtype {
        return Err(RuntimeError::WrongDtype {
            model: model.into(),
            input: spec.name.clone(),
            expected: spec.dtype,
            actual: tensor.dtype(),
        });
    }
    let fits = tensor.shape().len() == spec.shape.len()
        && spec.shape.iter().zip(tensor.shape()).all(|(&want, &got)| want < 0 || want as u64 == got as u64);
    if !fits {
        return Err(RuntimeError::WrongShape {
            model: model.into(),
            input: spec.name.clone(),
            expected: format!("{:?} (-1 = any size)", spec.shape),
            actual: tensor.shape().to_vec(),
        });
    }
    if let TensorData::Strings(items) = tensor.data() {
        if items.iter().any(|s| std::str::from_utf8(s).is_err()) {
            return Err(RuntimeError::InvalidData {
                model: model.into(),
                input: spec.name.clone(),
                reason: "BYTES elements must be UTF-8 text for ONNX string tensors".into(),
            });
        }
    }
    Ok(())
}

fn rows(
    model: &str,
    signature: &ModelSignature,
    batch: bool,
    inputs: &[Tensor],
) -> Result<usize, RuntimeError> {
    let first = inputs.first().and_then(|t| t.shape().first().copied()).unwrap_or(1);
    if !batch {
        return Ok(first.max(1));
    }
    for (tensor, spec) in inputs.iter().zip(&signature.inputs) {
        let got = tensor.shape().first().copied().unwrap_or(0);
        if got == 0 || got != first {
            return Err(RuntimeError::WrongShape {
                model: model.into(),
                input: spec.name.clone(),
                expected: format!("a batch dimension of at least 1, equal across inputs ({first})"),
                actual: tensor.shape().to_vec(),
            });
        }
    }
    Ok(first)
}

fn output_indices(
    model: &str,
    signature: &ModelSignature,
    requested: Option<Vec<String>>,
) -> Result<Vec<usize>, RuntimeError> {
    let Some(requested) = requested else {
        return Ok((0..signature.outputs.len()).collect());
    };
    let mut indices = Vec::with_capacity(requested.len());
    for name in requested {
        let Some(index) = signature.outputs.iter().position(|t| t.name == name) else {
            return Err(RuntimeError::UnknownOutput {
                model: model.into(),
                output: name,
                expected: names(&signature.outputs),
            });
        };
        if !indices.contains(&index) {
            indices.push(index);
        }
    }
    Ok(indices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DataType;

    fn sig() -> ModelSignature {
        ModelSignature {
            inputs: vec![TensorSpec { name: "X".into(), dtype: DataType::F32, shape: vec![-1, 4] }],
            outputs: vec![
                TensorSpec { name: "label".into(), dtype: DataType::I64, shape: vec![-1] },
                TensorSpec { name: "p".into(), dtype: DataType::F32, shape: vec![-1, 2] },
            ],
        }
    }

    fn req(shape: Vec<usize>) -> InferenceRequest {
        let n: usize = shape.iter().product();
        InferenceRequest::new(vec![("X".into(), Tensor::from_f32(shape, &vec![0.0; n]).unwrap())])
    }

    #[test]
    fn accepts_good_request() {
        let v = validate("m", &sig(), true, req(vec![3, 4])).unwrap();
        assert_eq!(v.rows, 3);
        assert_eq!(v.outputs, vec![0, 1]);
        let mut v = v;
        assert_eq!(v.batch_key(true), vec![vec![4]]);
    }

    #[test]
    fn rejects_bad_shapes_and_names() {
        assert!(matches!(validate("m", &sig(), true, req(vec![3, 5])), Err(RuntimeError::WrongShape { .. })));
        assert!(matches!(validate("m", &sig(), true, req(vec![4])), Err(RuntimeError::WrongShape { .. })));
        assert!(matches!(validate("m", &sig(), true, req(vec![0, 4])), Err(RuntimeError::WrongShape { .. })));
        let mut r = req(vec![1, 4]);
        r.outputs = Some(vec!["nope".into()]);
        assert!(matches!(validate("m", &sig(), true, r), Err(RuntimeError::UnknownOutput { .. })));
        assert!(matches!(
            validate("m", &sig(), true, InferenceRequest::default()),
            Err(RuntimeError::MissingInput { .. })
        ));
    }
}
