//! The per-output choices of an infer request applied to an answer's
//! tensors: binary or JSON encoding, and Triton's classification extension
//! (top-k `"value:index"` strings). Shared by every encoder of answers
//! (the plain response and the event stream's events).

use super::classification::classify;
use super::error::V2Error;
use super::request::DecodedRequest;
use switchyard_runtime::Tensor;

/// Applies per-output encoding choices: binary or JSON, and Triton's
/// classification extension (top-k `"value:index"` strings) when asked.
pub fn shape_outputs(
    decoded: &DecodedRequest,
    outputs: Vec<(String, Tensor)>,
    batched: bool,
) -> Result<Vec<(String, Tensor, bool)>, V2Error> {
    outputs
        .into_iter()
        .map(|(name, tensor)| {
            let binary = decoded.output_is_binary(&name);
            let k = decoded.outputs.iter().find(|o| o.name == name).and_then(|o| o.classification);
            let tensor = match k {
                Some(k) => classify(&name, &tensor, k, batched)?,
                None => tensor,
            };
            Ok((name, tensor, binary))
        })
        .collect()
}
