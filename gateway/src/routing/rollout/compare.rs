//! Whether a candidate's answer agrees with the live one, row by row.
//!
//! The outputs compared are the live answer's (or only `compare.output`);
//! a row agrees when every compared output agrees on it. Per output, by
//! `compare.kind`:
//! - `top_class`: the index of the row's largest value is the same;
//! - `cosine`: the rows' cosine similarity is at least `min_cosine`
//!   (two zero rows agree, one zero row does not);
//! - `exact`: every element is equal, numbers within `tolerance`
//!   (`FP32`, `INT64`; other types byte for byte);
//! - `auto`: `cosine` for an `FP32 [rows, dim]` output of a text model
//!   (an embedding), `top_class` for any other `FP32 [rows, n]` output with
//!   `n > 1` (a classifier's scores), `exact` for the rest (labels, ids,
//!   scalars).
//!
//! An output missing from the candidate, or of another shape or type,
//! makes every row disagree.

use crate::config::candidate_section::{CompareConfig, CompareKind};
use switchyard_runtime::{DataType, Tensor};

/// Per row of the live answer: whether the candidate agrees. `text`: the
/// live model is a text model (its FP32 matrices are embeddings).
pub fn agreement(
    live: &[(String, Tensor)],
    candidate: &[(String, Tensor)],
    compare: &CompareConfig,
    text: bool,
) -> Vec<bool> {
    let compared: Vec<&(String, Tensor)> =
        live.iter().filter(|(name, _)| compare.output.as_ref().is_none_or(|o| o == name)).collect();
    let Some(rows) = compared.first().map(|(_, t)| rows_of(t)) else { return Vec::new() };
    let mut agree = vec![true; rows];
    for (name, l) in compared {
        let c = candidate.iter().find(|(n, _)| n == name).map(|(_, t)| t);
        let per_row = match c {
            Some(c) if c.shape() == l.shape() && c.dtype() == l.dtype() => {
                rows_agree(l, c, kind_for(compare.kind, l, text), compare)
            }
            _ => vec![false; rows],
        };
        for (a, r) in agree.iter_mut().zip(per_row.into_iter().chain(std::iter::repeat(false))) {
            *a &= r;
        }
    }
    agree
}

/// Rows of an output: its first dimension (1 for a scalar).
fn rows_of(t: &Tensor) -> usize {
    t.shape().first().copied().unwrap_or(1)
}

/// The kind `auto` resolves to for `t` (module docs).
fn kind_for(kind: CompareKind, t: &Tensor, text: bool) -> CompareKind {
    if kind != CompareKind::Auto {
        return kind;
    }
    match (t.dtype(), t.shape()) {
        (DataType::F32, [_, n]) if *n > 1 && text => CompareKind::Cosine,
        (DataType::F32, [_, n]) if *n > 1 => CompareKind::TopClass,
        _ => CompareKind::Exact,
    }
}

fn rows_agree(l: &Tensor, c: &Tensor, kind: CompareKind, compare: &CompareConfig) -> Vec<bool> {
    let rows = rows_of(l).max(1);
    let width = l.len() / rows;
    if let (Some(lv), Some(cv)) = (l.to_f32_vec(), c.to_f32_vec()) {
        return chunks(&lv, &cv, width, |a, b| match kind {
            CompareKind::TopClass => argmax(a) == argmax(b),
            CompareKind::Cosine => cosine(a, b) >= compare.min_cosine,
            _ => a.iter().zip(b).all(|(x, y)| f64::from((x - y).abs()) <= compare.tolerance),
        });
    }
    if let (Some(lv), Some(cv)) = (l.to_i64_vec(), c.to_i64_vec()) {
        return chunks(&lv, &cv, width, |a, b| match kind {
            CompareKind::TopClass => argmax(a) == argmax(b),
            _ => a.iter().zip(b).all(|(x, y)| x.abs_diff(*y) as f64 <= compare.tolerance),
        });
    }
    match (l.raw_bytes(), c.raw_bytes()) {
        (Some(lb), Some(cb)) => chunks(lb, cb, lb.len() / rows, |a, b| a == b),
        _ => {
            let (lt, ct) = (format!("{:?}", l.data()), format!("{:?}", c.data()));
            vec![lt == ct; rows]
        }
    }
}

fn chunks<T>(l: &[T], c: &[T], width: usize, same: impl Fn(&[T], &[T]) -> bool) -> Vec<bool> {
    let width = width.max(1);
    l.chunks(width).zip(c.chunks(width)).map(|(a, b)| same(a, b)).collect()
}

fn argmax<T: PartialOrd + Copy>(row: &[T]) -> Option<usize> {
    let mut best: Option<(usize, T)> = None;
    for (i, &v) in row.iter().enumerate() {
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    match (norm(a), norm(b)) {
        (na, nb) if na == 0.0 && nb == 0.0 => 1.0,
        (na, nb) if na == 0.0 || nb == 0.0 => 0.0,
        (na, nb) => dot / (na * nb),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use switchyard_runtime::TensorData;

    fn cfg(kind: CompareKind) -> CompareConfig {
        CompareConfig { kind, output: None, min_cosine: 0.99, tolerance: 1e-5 }
    }

    fn f32s(shape: Vec<usize>, v: &[f32]) -> Tensor {
        Tensor::from_f32(shape, v).unwrap()
    }

    fn i64s(v: &[i64]) -> Tensor {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        Tensor::new(DataType::I64, vec![v.len()], TensorData::Fixed(Bytes::from(bytes))).unwrap()
    }

    #[test]
    fn classifier_scores_agree_on_the_top_class_and_labels_exactly() {
        let live = vec![
            ("label".to_string(), i64s(&[2, 0, 1])),
            ("probabilities".to_string(), f32s(vec![3, 3], &[0.1, 0.2, 0.7, 0.6, 0.3, 0.1, 0.2, 0.5, 0.3])),
        ];
        let cand = vec![
            ("label".to_string(), i64s(&[2, 0, 2])),
            ("probabilities".to_string(), f32s(vec![3, 3], &[0.3, 0.2, 0.5, 0.5, 0.4, 0.1, 0.2, 0.3, 0.5])),
        ];
        assert_eq!(agreement(&live, &cand, &cfg(CompareKind::Auto), false), [true, true, false]);
        let exact = agreement(&live, &cand, &cfg(CompareKind::Exact), false);
        assert_eq!(exact, [false, false, false], "scores differ beyond the tolerance");
        let only = CompareConfig { output: Some("label".into()), ..cfg(CompareKind::Auto) };
        assert_eq!(agreement(&live, &cand, &only, false), [true, true, false]);
        assert_eq!(agreement(&live, &live, &cfg(CompareKind::Exact), false), [true, true, true]);
    }

    #[test]
    fn embeddings_agree_by_cosine_and_missing_outputs_disagree() {
        let live = vec![("emb".to_string(), f32s(vec![2, 2], &[1.0, 0.0, 0.0, 1.0]))];
        let cand = vec![("emb".to_string(), f32s(vec![2, 2], &[2.0, 0.01, 1.0, 1.0]))];
        assert_eq!(agreement(&live, &cand, &cfg(CompareKind::Auto), true), [true, false]);
        let loose = CompareConfig { min_cosine: 0.7, ..cfg(CompareKind::Cosine) };
        assert_eq!(agreement(&live, &cand, &loose, false), [true, true]);
        assert_eq!(agreement(&live, &[], &cfg(CompareKind::Auto), true), [false, false]);
        let other_shape = vec![("emb".to_string(), f32s(vec![1, 4], &[1.0, 0.0, 0.0, 1.0]))];
        assert_eq!(agreement(&live, &other_shape, &cfg(CompareKind::Auto), true), [false, false]);
    }

    #[test]
    fn exact_numbers_agree_within_the_tolerance() {
        let live = vec![("y".to_string(), f32s(vec![2], &[1.0, 2.0]))];
        let cand = vec![("y".to_string(), f32s(vec![2], &[1.000_001, 2.1]))];
        assert_eq!(agreement(&live, &cand, &cfg(CompareKind::Auto), false), [true, false]);
    }
}
