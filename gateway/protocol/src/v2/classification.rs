//! Triton's classification extension: an output requested with the
//! `classification: k` parameter is returned as its top `k` classes, each a
//! `BYTES` element `"<value>:<index>"`, highest value first.

use bytes::Bytes;
use switchyard_runtime::tensor::{DataType, Tensor, TensorData};

use super::error::V2Error;
use super::float16::{bf16_bits_to_f32, f16_bits_to_f32};

/// The elements of a numeric tensor as `f64`; `None` for `BOOL`/`BYTES`.
fn numeric_values(tensor: &Tensor) -> Option<Vec<f64>> {
    let raw = tensor.raw_bytes()?;
    let le = |c: &[u8]| c.iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    let size = tensor.dtype().element_size()?;
    let values = raw.chunks_exact(size).map(|c| {
        let bits = le(c);
        match tensor.dtype() {
            DataType::U8 | DataType::U16 | DataType::U32 | DataType::U64 => Some(bits as f64),
            DataType::I8 => Some(f64::from(bits as u8 as i8)),
            DataType::I16 => Some(f64::from(bits as u16 as i16)),
            DataType::I32 => Some(f64::from(bits as u32 as i32)),
            DataType::I64 => Some(bits as i64 as f64),
            DataType::F16 => Some(f64::from(f16_bits_to_f32(bits as u16))),
            DataType::BF16 => Some(f64::from(bf16_bits_to_f32(bits as u16))),
            DataType::F32 => Some(f64::from(f32::from_bits(bits as u32))),
            DataType::F64 => Some(f64::from_bits(bits)),
            DataType::Bool | DataType::Bytes => None,
        }
    });
    values.collect()
}

/// Reduces output `name` to its top `k` classes per batch row (`batched`:
/// the first dimension is the batch) or overall. The result is a `BYTES`
/// tensor of shape `[batch, min(k, classes)]` or `[min(k, classes)]`.
/// Floating values print with six decimals, as Triton does; ties keep the
/// lower index first.
pub fn classify(name: &str, tensor: &Tensor, k: usize, batched: bool) -> Result<Tensor, V2Error> {
    let Some(values) = numeric_values(tensor) else {
        return Err(V2Error::Unsupported(format!(
            "classification of output '{name}' needs a numeric datatype, it is {}",
            tensor.dtype()
        )));
    };
    let (rows, classes) = match (batched, tensor.shape().split_first()) {
        (true, Some((&batch, rest))) => (batch, rest.iter().product::<usize>()),
        _ => (1, values.len()),
    };
    let top = k.min(classes);
    let float = matches!(tensor.dtype(), DataType::F16 | DataType::BF16 | DataType::F32 | DataType::F64);
    let mut items = Vec::with_capacity(rows * top);
    for row in values.chunks(classes.max(1)).take(rows) {
        let mut order: Vec<usize> = (0..row.len()).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        for &index in order.iter().take(top) {
            let text =
                if float { format!("{:.6}:{index}", row[index]) } else { format!("{}:{index}", row[index]) };
            items.push(Bytes::from(text));
        }
    }
    let shape = if batched && !tensor.shape().is_empty() { vec![rows, top] } else { vec![top] };
    Tensor::new(DataType::Bytes, shape, TensorData::Strings(items))
        .map_err(|e| V2Error::Unsupported(format!("classification of output '{name}' failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(t: &Tensor) -> Vec<String> {
        match t.data() {
            TensorData::Strings(items) => {
                items.iter().map(|s| String::from_utf8(s.to_vec()).unwrap()).collect()
            }
            TensorData::Fixed(_) => panic!("not BYTES"),
        }
    }

    #[test]
    fn top_k_per_batch_row() {
        let t = Tensor::from_f32(vec![2, 3], &[0.1, 0.7, 0.2, 0.5, 0.5, 0.0]).unwrap();
        let c = classify("p", &t, 2, true).unwrap();
        assert_eq!(c.shape(), &[2, 2]);
        assert_eq!(texts(&c), ["0.700000:1", "0.200000:2", "0.500000:0", "0.500000:1"]);
    }

    #[test]
    fn integers_and_unbatched() {
        let raw: Vec<u8> = [3i32, -1, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = Tensor::new(DataType::I32, vec![3], TensorData::Fixed(Bytes::from(raw))).unwrap();
        let c = classify("p", &t, 5, false).unwrap();
        assert_eq!(c.shape(), &[3]);
        assert_eq!(texts(&c), ["9:2", "3:0", "-1:1"]);
    }

    #[test]
    fn rejects_strings() {
        let t = Tensor::new(DataType::Bytes, vec![1], TensorData::Strings(vec![Bytes::new()])).unwrap();
        assert!(matches!(classify("p", &t, 1, false), Err(V2Error::Unsupported(_))));
    }
}
