//! A text request run as one request per length bucket, and the answers
//! put back together in the request's row order.
//!
//! Why: every text of a request is padded to the request's longest, and a
//! transformer's work grows with the padded length, so a request mixing
//! short and long texts pays for the long ones on every row (32 sentences
//! of 7 to 28 tokens run as 32 x 30 tokens, half of them padding). Split
//! by length bucket ([`super::TextEncoder::encode_grouped`]: the short
//! ones in bucket 16, the others in 32), each group is padded to its own
//! longest and queued as a request of its own (groups of other requests
//! in the same bucket batch with it, as before), and the answer is
//! assembled row by row ([`join`]). The groups run concurrently; the
//! answer is ready when the last one is.
//!
//! Only for models whose every output has fixed dimensions after the batch
//! dimension ([`joinable`]: a pooled embedding `[-1, 384]`): an output
//! that varies with the sequence (`[-1, -1, 384]` hidden states) differs
//! in shape between groups and is run as one request.

use crate::batch::scatter;
use crate::error::RuntimeError;
use crate::request::{InferenceRequest, InferenceResponse};
use crate::signature::ModelSignature;

/// One length bucket's rows of a text request, encoded.
#[derive(Debug)]
pub struct RowGroup {
    /// The rows' positions in the request, increasing.
    pub rows: Vec<usize>,
    /// Their token tensors, padded to the group's longest text.
    pub request: InferenceRequest,
}

/// Whether answers of `graph` can be assembled row by row: every output
/// has a batch dimension and fixed dimensions after it.
pub fn joinable(graph: &ModelSignature) -> bool {
    !graph.outputs.is_empty()
        && graph.outputs.iter().all(|o| o.shape.len() >= 2 && o.shape[1..].iter().all(|&d| d > 0))
}

/// The groups' answers (`parts`: each group's rows and answer) as the
/// answer of the whole request of `total` rows, in its row order. The
/// answer reports the largest batch a group ran in, the longest queue
/// time, and the sum of the execution times.
pub fn join(
    model: &str,
    total: usize,
    parts: Vec<(Vec<usize>, InferenceResponse)>,
) -> Result<InferenceResponse, RuntimeError> {
    let internal = |reason: String| RuntimeError::Execution { model: model.to_string(), reason };
    let Some((_, first)) = parts.first() else {
        return Err(internal("a grouped request had no groups".into()));
    };
    let mut outputs = Vec::with_capacity(first.outputs.len());
    for (i, (name, _)) in first.outputs.iter().enumerate() {
        let mut pieces = Vec::with_capacity(parts.len());
        for (rows, answer) in &parts {
            let tensor = answer
                .outputs
                .get(i)
                .map(|(_, t)| t)
                .ok_or_else(|| internal(format!("a group lacks output '{name}'")))?;
            pieces.push((rows.as_slice(), tensor));
        }
        outputs.push((
            name.clone(),
            scatter(&pieces, total).map_err(|e| internal(format!("output '{name}': {e}")))?,
        ));
    }
    Ok(InferenceResponse::assembled(
        first,
        outputs,
        parts.iter().map(|(_, p)| p.batch_size).max().unwrap_or(0),
        parts.iter().map(|(_, p)| p.queue_time).max().unwrap_or_default(),
        parts.iter().map(|(_, p)| p.exec_time).sum(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::TensorSpec;
    use crate::tensor::{DataType, Tensor};
    use std::time::Duration;

    fn graph(shapes: &[Vec<i64>]) -> ModelSignature {
        ModelSignature {
            inputs: vec![],
            outputs: shapes
                .iter()
                .enumerate()
                .map(|(i, s)| TensorSpec { name: format!("o{i}"), dtype: DataType::F32, shape: s.clone() })
                .collect(),
        }
    }

    #[test]
    fn only_fixed_row_shapes_are_joinable() {
        assert!(joinable(&graph(&[vec![-1, 384]])));
        assert!(joinable(&graph(&[vec![-1, 384], vec![-1, 2, 3]])));
        assert!(!joinable(&graph(&[vec![-1, -1, 384]])), "a hidden state varies with the group's length");
        assert!(!joinable(&graph(&[vec![-1]])), "no dimension to hold a row");
        assert!(!joinable(&graph(&[])));
    }

    #[test]
    fn answers_are_put_back_in_row_order() {
        let answer = |values: &[f32], queue_ms: u64| InferenceResponse {
            model: "m".into(),
            version: 1,
            pool: "cpu".into(),
            device: crate::device::DeviceKind::Cpu,
            outputs: vec![("e".into(), Tensor::from_f32(vec![values.len() / 2, 2], values).unwrap())],
            batch_size: values.len() / 2,
            queue_time: Duration::from_millis(queue_ms),
            exec_time: Duration::from_millis(5),
        };
        let parts = vec![
            (vec![0, 2], answer(&[0.0, 0.5, 2.0, 2.5], 3)),
            (vec![1, 3], answer(&[1.0, 1.5, 3.0, 3.5], 7)),
        ];
        let joined = join("m", 4, parts).unwrap();
        let expected = Tensor::from_f32(vec![4, 2], &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]).unwrap();
        assert_eq!(joined.outputs, vec![("e".to_string(), expected)]);
        assert_eq!(
            (joined.batch_size, joined.queue_time, joined.exec_time),
            (2, Duration::from_millis(7), Duration::from_millis(10))
        );
        assert!(join("m", 4, vec![]).is_err());
    }
}
