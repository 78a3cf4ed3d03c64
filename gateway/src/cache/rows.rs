//! A cache per row: splitting a batched request into its rows and putting
//! an answer back together from rows, for models whose rows are answered
//! independently of each other (`[[models]] rows_independent`, on by
//! default for text models: [`crate::config::Config::rows_independent`]).
//!
//! Each row's key is the whole-request key ([`super::key::request_key`]) of
//! the request cut down to that one row: the same model, version, tenant,
//! output selection and parameters, and the row's bytes (or text). So a
//! row of a batch and a one-row request with the same input share an entry,
//! and a row's entry holds a one-row answer (every output `[1, ...]`).
//! [`super::row_answer`] looks the rows up, computes the missing ones as
//! one smaller batch and stores them one by one; [`assemble`] joins the
//! rows' outputs back in the request's order.

use super::key::{self, CacheKey, KeyScope};
use crate::config::RouteCache;
use std::sync::Arc;
use switchyard_protocol::answer::Answer;
use switchyard_protocol::v2::DecodedRequest;
use switchyard_runtime::{concat_rows, split_rows, Tensor};

/// What the cache does for a request answered row by row, decided before
/// any work is done ([`super::ResponseCache::row_plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowPlan {
    /// Each row's key, in request order (equal rows have equal keys).
    pub keys: Vec<CacheKey>,
    /// The route's TTLs and fleet settings.
    pub policy: RouteCache,
    /// `Cache-Control: no-cache`: compute every row and store it, without lookup.
    pub refresh: bool,
}

/// How many of a request's rows came from the cache: the
/// `x-switchyard-cached-rows` header (`k/n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowsServed {
    /// Rows answered from L1 or L2.
    pub cached: usize,
    /// Rows in the request.
    pub total: usize,
}

impl RowsServed {
    /// The header value, `cached/total`.
    pub fn header_value(self) -> String {
        format!("{}/{}", self.cached, self.total)
    }
}

/// The number of rows of a request that may be cached row by row: every
/// input has at least one dimension and the same leading one, of two rows
/// or more (a one-row request's whole-request key is already its row's).
pub fn batch_rows(request: &DecodedRequest) -> Option<usize> {
    let mut leading = request.inputs.iter().map(|(_, t)| t.shape().first().copied());
    let rows = leading.next()??;
    (rows >= 2 && leading.all(|d| d == Some(rows))).then_some(rows)
}

/// Each input cut into `rows` one-row tensors: `[input][row]`.
pub fn split_inputs(inputs: &[(String, Tensor)], rows: usize) -> Result<Vec<Vec<Tensor>>, String> {
    inputs.iter().map(|(_, tensor)| split_rows(tensor, &vec![1; rows])).collect()
}

/// The key of each row of `request` (of `rows` rows, [`batch_rows`]).
pub fn row_keys(
    scope: &KeyScope<'_>,
    request: &DecodedRequest,
    rows: usize,
) -> Result<Vec<CacheKey>, String> {
    // Destructured so that a new request field is considered here too.
    let DecodedRequest { id: _, inputs, input_parameters, outputs, binary_data_output: _, parameters } =
        request;
    let pieces = split_inputs(inputs, rows)?;
    let mut row = DecodedRequest {
        id: None,
        inputs: Vec::new(),
        input_parameters: input_parameters.clone(),
        outputs: outputs.clone(),
        binary_data_output: false,
        parameters: parameters.clone(),
    };
    let mut keys = Vec::with_capacity(rows);
    for r in 0..rows {
        row.inputs = inputs
            .iter()
            .zip(&pieces)
            .map(|((name, _), cut)| Ok((name.clone(), cut.get(r).ok_or("a row is missing")?.clone())))
            .collect::<Result<_, String>>()?;
        keys.push(key::request_key(scope, &row));
    }
    Ok(keys)
}

/// The inputs of the batch that computes `rows` (indices into the
/// request's rows, in that order): the request's own inputs when every row
/// is computed in order (a full miss copies nothing).
pub fn select_rows(
    inputs: &[(String, Tensor)],
    total: usize,
    rows: &[usize],
) -> Result<Vec<(String, Tensor)>, String> {
    if rows.len() == total && rows.iter().enumerate().all(|(i, &r)| i == r) {
        return Ok(inputs.to_vec());
    }
    let pieces = split_inputs(inputs, total)?;
    inputs
        .iter()
        .zip(&pieces)
        .map(|((name, _), cut)| {
            let chosen: Vec<&Tensor> =
                rows.iter().map(|&r| cut.get(r).ok_or("a row is missing")).collect::<Result<_, _>>()?;
            Ok((name.clone(), concat_rows(&chosen)?))
        })
        .collect()
}

/// `answer` (of `rows` rows) as one answer per row, each output `[1, ...]`.
pub fn split_answer(answer: &Answer, rows: usize) -> Result<Vec<Answer>, String> {
    let mut per_row: Vec<Vec<(String, Tensor)>> = vec![Vec::with_capacity(answer.outputs.len()); rows];
    for (name, tensor) in &answer.outputs {
        let pieces = split_rows(tensor, &vec![1; rows])
            .map_err(|e| format!("output {name:?} cannot be cut into rows: {e}"))?;
        for (row, piece) in per_row.iter_mut().zip(pieces) {
            row.push((name.clone(), piece));
        }
    }
    Ok(per_row.into_iter().map(|outputs| Answer { outputs, ..without_outputs(answer) }).collect())
}

/// The answer to the whole request: `rows[i]` is row `i`'s one-row answer;
/// their outputs are joined in order. Model, device, reason and the other
/// explain fields are `meta`'s (the computed batch's, or the first row's
/// when every row was cached).
pub fn assemble(rows: &[Arc<Answer>], meta: &Answer) -> Result<Answer, String> {
    let first = rows.first().ok_or("no rows to assemble")?;
    let mut outputs = Vec::with_capacity(first.outputs.len());
    for (j, (name, _)) in first.outputs.iter().enumerate() {
        let parts: Vec<&Tensor> = rows
            .iter()
            .map(|row| match row.outputs.get(j) {
                Some((n, t)) if n == name => Ok(t),
                _ => Err(format!("a cached row lacks the output {name:?}")),
            })
            .collect::<Result<_, _>>()?;
        outputs.push((name.clone(), concat_rows(&parts)?));
    }
    Ok(Answer { outputs, ..without_outputs(meta) })
}

/// `answer`'s explain fields, with no outputs.
fn without_outputs(answer: &Answer) -> Answer {
    let Answer {
        model,
        version,
        device,
        pool,
        reason,
        batch_size,
        outputs: _,
        budget_ms,
        degraded,
        confidence,
    } = answer;
    Answer {
        model: model.clone(),
        version: *version,
        device: *device,
        pool: pool.clone(),
        reason: *reason,
        batch_size: *batch_size,
        outputs: Vec::new(),
        budget_ms: *budget_ms,
        degraded: *degraded,
        confidence: *confidence,
    }
}

#[cfg(test)]
mod tests;
