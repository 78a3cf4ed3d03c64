//! A cascade's confidence: how sure the cheap model is of its answer, read
//! from the output named by the policy's `confidence_output`.
//!
//! - Shape `[N, C]` (class probabilities): each row's confidence is its
//!   largest value.
//! - Shape `[N]` or `[N, 1]` (a score per row): the score itself.
//! - A request of several rows is as confident as its least confident row
//!   (minimum over rows), so one hard row escalates the whole request: the
//!   answer stays one model's, never a mix.
//! - A missing, non-`FP32` or empty output gives NaN, which is never
//!   confident: the cascade escalates rather than trusting a wrong setup.

use switchyard_runtime::Tensor;

/// The confidence of `outputs`' tensor named `name`; NaN when unusable.
pub fn confidence(outputs: &[(String, Tensor)], name: &str) -> f32 {
    let Some((_, tensor)) = outputs.iter().find(|(n, _)| n == name) else { return f32::NAN };
    let Some(values) = tensor.to_f32_vec() else { return f32::NAN };
    let row_len = match tensor.shape() {
        [] | [_] => 1,
        [_, rest @ ..] => rest.iter().product::<usize>(),
    };
    if values.is_empty() || row_len == 0 {
        return f32::NAN;
    }
    values
        .chunks(row_len)
        .map(|row| row.iter().copied().fold(f32::NEG_INFINITY, f32::max))
        .fold(f32::INFINITY, f32::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outputs(shape: Vec<usize>, values: &[f32]) -> Vec<(String, Tensor)> {
        vec![("p".to_string(), Tensor::from_f32(shape, values).unwrap())]
    }

    #[test]
    fn max_per_row_min_over_rows() {
        let o = outputs(vec![2, 3], &[0.1, 0.85, 0.05, 0.5, 0.3, 0.2]);
        assert_eq!(confidence(&o, "p"), 0.5);
        let one = outputs(vec![1, 3], &[0.1, 0.85, 0.05]);
        assert_eq!(confidence(&one, "p"), 0.85);
    }

    #[test]
    fn scores_per_row() {
        assert_eq!(confidence(&outputs(vec![3], &[0.9, 0.7, 0.95]), "p"), 0.7);
    }

    #[test]
    fn missing_or_wrong_type_is_never_confident() {
        assert!(confidence(&outputs(vec![1, 2], &[0.5, 0.5]), "other").is_nan());
        assert!(confidence(&outputs(vec![0, 2], &[]), "p").is_nan());
    }
}
