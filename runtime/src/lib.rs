//! Switchyard's ONNX Runtime execution layer: model repository, device
//! pools with dynamic batching, and pool statistics. Knows nothing of HTTP,
//! Redis or config files.

pub mod signature;
pub mod tensor;

pub use signature::{ModelSignature, TensorSpec};
pub use tensor::{DataType, Tensor, TensorData, TensorError};
