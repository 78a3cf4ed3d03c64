//! A model's input/output contract, read from its ONNX file at
//! registration, so metadata endpoints and route cross-checks work without
//! keeping the model loaded.

use crate::tensor::DataType;

/// One input or output of a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    /// The tensor's name in the ONNX graph (`X`, `probabilities`).
    pub name: String,
    /// Element datatype.
    pub dtype: DataType,
    /// Shape including the batch dimension; `-1` marks a dynamic dimension.
    pub shape: Vec<i64>,
}

/// The inputs and outputs of a model, in graph order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelSignature {
    /// Graph inputs.
    pub inputs: Vec<TensorSpec>,
    /// Graph outputs.
    pub outputs: Vec<TensorSpec>,
}

impl ModelSignature {
    /// The input named `name`, if any.
    pub fn input(&self, name: &str) -> Option<&TensorSpec> {
        self.inputs.iter().find(|t| t.name == name)
    }

    /// The output named `name`, if any.
    pub fn output(&self, name: &str) -> Option<&TensorSpec> {
        self.outputs.iter().find(|t| t.name == name)
    }
}
