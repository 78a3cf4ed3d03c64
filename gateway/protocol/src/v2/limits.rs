//! Limits applied while decoding a request, before anything is allocated
//! for its tensors.

use std::sync::Arc;

use super::error::V2Error;
use switchyard_runtime::signature::ModelSignature;
use switchyard_runtime::tensor::element_count;

/// Bounds on what one infer request may declare.
///
/// Shapes are checked against these limits before any buffer is sized from
/// them, so a hostile shape costs nothing. Exceeding a limit is a 413; a
/// shape whose element count overflows `usize` is a 400 (it cannot be valid
/// under any limits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Most elements in one input tensor.
    pub max_elements: usize,
    /// Most elements over all inputs of a request.
    pub max_total_elements: usize,
    /// Most inputs in one request; the reader stops at the first one past
    /// it, so a long list costs nothing ([`super::bounded`]).
    pub max_inputs: usize,
    /// Most requested outputs in one request (counted as `max_inputs`).
    pub max_outputs: usize,
    /// Most JSON values in a request's fields besides tensor data (`id`,
    /// `parameters`, inputs' and outputs' names, datatypes, shapes and
    /// parameters), nested values included; the reader stops at the first
    /// one past it ([`super::bounded`]).
    pub max_json_values: usize,
    /// Most dimensions in one shape.
    pub max_rank: usize,
    /// Most rows (leading dimension) of any input; `None` = no such limit
    /// (e.g. a model that does not batch).
    pub max_rows: Option<RowLimit>,
    /// The model the request is for: each input's name, datatype and
    /// shape are checked against its signature before the input's data is
    /// decoded, so data the model would refuse costs nothing (a
    /// `BYTES` element takes 32 bytes of memory for 3 of JSON text).
    /// `None`: checked after decoding only ([`super::check_signature`]).
    pub signature: Option<SignatureLimit>,
}

/// The signature a request's inputs must fit, and the name clients call
/// the model by (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureLimit {
    /// The model (route) name, as in [`super::check_signature`].
    pub model: String,
    /// Its signature.
    pub signature: Arc<ModelSignature>,
}

/// A bound on the rows of one request, with what sets it (for the 413
/// message, so a client or operator knows which setting to change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowLimit {
    /// Most rows.
    pub max: usize,
    /// What sets it, e.g. `model 'synth-heavy' (models[].limits.max_rows)`.
    pub source: String,
}

impl Default for DecodeLimits {
    /// 16 Mi elements per input, 64 Mi per request, 64 inputs and outputs,
    /// 16 Ki JSON values besides tensor data, rank 16, rows unlimited.
    fn default() -> Self {
        DecodeLimits {
            max_elements: 16 << 20,
            max_total_elements: 64 << 20,
            max_inputs: 64,
            max_outputs: 64,
            max_json_values: 16 << 10,
            max_rank: 16,
            max_rows: None,
            signature: None,
        }
    }
}

impl DecodeLimits {
    /// Checks a declared shape of input `input`; returns its element count.
    pub fn check_shape(&self, input: &str, shape: &[usize]) -> Result<usize, V2Error> {
        if shape.len() > self.max_rank {
            return Err(V2Error::TooLarge(format!(
                "input '{input}' has {} dimensions, the limit is {}",
                shape.len(),
                self.max_rank
            )));
        }
        let Some(count) = element_count(shape) else {
            return Err(V2Error::ShapeOverflow { input: input.to_owned(), shape: shape.to_vec() });
        };
        if count > self.max_elements {
            return Err(V2Error::TooLarge(format!(
                "input '{input}' with shape {shape:?} has {count} elements, the limit is {}",
                self.max_elements
            )));
        }
        Ok(count)
    }

    /// Checks input `input` of `dtype` and `shape` against
    /// [`Self::signature`], when there is one.
    pub fn check_signature(
        &self,
        input: &str,
        dtype: switchyard_runtime::DataType,
        shape: &[usize],
    ) -> Result<(), V2Error> {
        match &self.signature {
            Some(limit) => {
                super::input_check::check_input(input, dtype, shape, &limit.model, &limit.signature)
            }
            None => Ok(()),
        }
    }

    /// Checks the rows (leading dimension) a shape of input `input`
    /// declares against [`Self::max_rows`].
    pub fn check_rows(&self, input: &str, shape: &[usize]) -> Result<(), V2Error> {
        match (&self.max_rows, shape.first()) {
            (Some(limit), Some(&rows)) if rows > limit.max => Err(V2Error::TooLarge(format!(
                "input '{input}' has {rows} rows; {} accepts at most {} rows per request",
                limit.source, limit.max
            ))),
            _ => Ok(()),
        }
    }

    /// Adds `count` elements to a running request total, checking the
    /// request-wide limit.
    pub fn add_total(&self, total: usize, count: usize) -> Result<usize, V2Error> {
        match total.checked_add(count) {
            Some(sum) if sum <= self.max_total_elements => Ok(sum),
            _ => Err(V2Error::TooLarge(format!(
                "the request's inputs have more than {} elements in all",
                self.max_total_elements
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_checks() {
        let limits = DecodeLimits { max_elements: 100, max_rank: 3, ..DecodeLimits::default() };
        assert_eq!(limits.check_shape("x", &[2, 50]), Ok(100));
        assert_eq!(limits.check_shape("x", &[]), Ok(1));
        assert_eq!(limits.check_shape("x", &[2, 51]).map_err(|e| e.status()), Err(413));
        assert_eq!(limits.check_shape("x", &[1, 1, 1, 1]).map_err(|e| e.status()), Err(413));
        let overflow = limits.check_shape("x", &[usize::MAX, 2]);
        assert!(matches!(overflow, Err(V2Error::ShapeOverflow { .. })));
    }

    #[test]
    fn row_checks() {
        let mut limits = DecodeLimits::default();
        assert_eq!(limits.check_rows("x", &[1_000_000, 1]), Ok(()));
        limits.max_rows = Some(RowLimit { max: 8, source: "model 'm' (models[].limits.max_rows)".into() });
        assert_eq!(limits.check_rows("x", &[8, 64]), Ok(()));
        assert_eq!(limits.check_rows("x", &[]), Ok(()));
        let e = limits.check_rows("x", &[9, 64]).unwrap_err();
        assert_eq!(e.status(), 413);
        assert!(
            e.to_string().contains("9 rows") && e.to_string().contains("models[].limits.max_rows"),
            "{e}"
        );
    }

    #[test]
    fn total_checks() {
        let limits = DecodeLimits { max_total_elements: 10, ..DecodeLimits::default() };
        assert_eq!(limits.add_total(4, 6), Ok(10));
        assert!(limits.add_total(4, 7).is_err());
        assert!(limits.add_total(usize::MAX, 1).is_err());
    }
}
