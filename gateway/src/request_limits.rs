//! Per-request limits the infer front ends (REST and SSE) apply on top of the runtime's
//! own: the rows one request may carry (its models' `limits.max_rows`,
//! checked while the body is decoded, before any tensor is built), and the
//! size of the response (`server.max_response_bytes`), checked from the
//! output signature before any model runs and from the actual outputs
//! before they are encoded. Both answer 413 with a message naming the
//! setting to raise.

use crate::config::Config;
use crate::error::GatewayError;
use crate::target::Target;
use switchyard_protocol::v2::{size, DecodedRequest, RowLimit};
use switchyard_runtime::{DataType, ModelSignature, Tensor};

/// The row limit of `target`: the smallest `max_rows` of its local models
/// (an upstream model enforces its own). `None` when the signature has no
/// batch dimension, or no model is local.
pub fn row_limit(config: &Config, target: &Target, signature: &ModelSignature) -> Option<RowLimit> {
    if !batches(signature) {
        return None;
    }
    let (model, max) = target
        .models
        .iter()
        .filter_map(|name| config.models.iter().find(|m| &m.name == name))
        .map(|spec| (spec.name.as_str(), spec.max_rows()))
        .min_by_key(|(_, max)| *max)?;
    let source = if target.is_route {
        format!("route '{}' (its model '{model}': models[].limits.max_rows)", target.public_name)
    } else {
        format!("model '{model}' (models[].limits.max_rows)")
    };
    Some(RowLimit { max, source })
}

/// Refuses a request whose response could exceed `limit`, judged from the
/// signature: each requested fixed-width output with known dimensions,
/// times the request's rows. Outputs of unknown size (`BYTES`, dynamic
/// dimensions, classification) are left to [`check_response`].
pub fn check_planned_response(
    limit: usize,
    signature: &ModelSignature,
    decoded: &DecodedRequest,
) -> Result<(), GatewayError> {
    let rows = decoded.inputs.first().and_then(|(_, t)| t.shape().first().copied()).unwrap_or(1);
    let batched = batches(signature);
    let mut bound = 0usize;
    for spec in &signature.outputs {
        let asked = decoded.outputs.iter().find(|o| o.name == spec.name);
        if (!decoded.outputs.is_empty() && asked.is_none())
            || asked.is_some_and(|o| o.classification.is_some())
            || spec.dtype == DataType::Bytes
        {
            continue;
        }
        let Some(elements) = elements(&spec.shape, batched.then_some(rows)) else { continue };
        let binary = decoded.output_is_binary(&spec.name);
        bound = bound.saturating_add(size::fixed_output_bound(spec.dtype, elements, binary));
    }
    within(bound, limit)
}

/// Refuses a response whose encoding could exceed `limit`, from the
/// outputs about to be encoded (name, tensor, binary).
pub fn check_response(limit: usize, outputs: &[(String, Tensor, bool)]) -> Result<(), GatewayError> {
    within(size::response_bound(outputs), limit)
}

fn within(bytes: usize, limit: usize) -> Result<(), GatewayError> {
    if bytes > limit {
        return Err(GatewayError::ResponseTooLarge { bytes, limit });
    }
    Ok(())
}

/// True when every input has a batch dimension (`-1` first).
fn batches(signature: &ModelSignature) -> bool {
    !signature.inputs.is_empty() && signature.inputs.iter().all(|t| t.shape.first() == Some(&-1))
}

/// Elements of a tensor of `shape`, the batch dimension taken as `rows`;
/// `None` when another dimension is dynamic.
fn elements(shape: &[i64], rows: Option<usize>) -> Option<usize> {
    shape.iter().enumerate().try_fold(1usize, |acc, (i, &d)| match (i, d, rows) {
        (0, -1, Some(rows)) => Some(acc.saturating_mul(rows)),
        (_, d, _) if d >= 0 => Some(acc.saturating_mul(usize::try_from(d).ok()?)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_use_the_rows_and_skip_dynamic_dimensions() {
        assert_eq!(elements(&[-1, 10], Some(4)), Some(40));
        assert_eq!(elements(&[-1], Some(4)), Some(4));
        assert_eq!(elements(&[-1, -1], Some(4)), None);
        assert_eq!(elements(&[3, 2], None), Some(6));
        assert_eq!(elements(&[-1, 2], None), None);
    }
}
