//! Limits applied while decoding a request, before anything is allocated
//! for its tensors.

use super::error::V2Error;
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
    /// Most inputs in one request.
    pub max_inputs: usize,
    /// Most requested outputs in one request.
    pub max_outputs: usize,
    /// Most dimensions in one shape.
    pub max_rank: usize,
}

impl Default for DecodeLimits {
    /// 16 Mi elements per input, 64 Mi per request, 64 inputs and outputs,
    /// rank 16.
    fn default() -> Self {
        DecodeLimits {
            max_elements: 16 << 20,
            max_total_elements: 64 << 20,
            max_inputs: 64,
            max_outputs: 64,
            max_rank: 16,
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
    fn total_checks() {
        let limits = DecodeLimits { max_total_elements: 10, ..DecodeLimits::default() };
        assert_eq!(limits.add_total(4, 6), Ok(10));
        assert!(limits.add_total(4, 7).is_err());
        assert!(limits.add_total(usize::MAX, 1).is_err());
    }
}
