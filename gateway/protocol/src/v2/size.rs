//! Upper bounds on the size of an encoded infer response, so that a
//! response too large for `server.max_response_bytes` is refused before
//! it is computed (from the output signature and the request's rows) or
//! before it is encoded (from the actual tensors), never after the memory
//! was spent.
//!
//! Bounds are per element and conservative: the longest JSON text of a
//! value of the datatype plus its separator (an `FP32` prints in at most
//! 15 characters, e.g. `-1.1754944e-38`), the raw width in binary, and
//! for `BYTES` 4 bytes plus its length in binary or 6 bytes per byte plus
//! quotes in JSON (every byte escaped). Each output adds its header.

use switchyard_runtime::{DataType, Tensor, TensorData};

/// Bytes of an output's JSON header besides its name and shape.
const OUTPUT_OVERHEAD: usize = 128;

/// The longest JSON text of one element of `dtype`, with its comma.
pub fn json_element_bound(dtype: DataType) -> usize {
    match dtype {
        DataType::Bool => 6,
        DataType::U8 => 4,
        DataType::I8 => 5,
        DataType::U16 => 6,
        DataType::I16 => 7,
        DataType::U32 => 11,
        DataType::I32 => 12,
        DataType::U64 | DataType::I64 => 21,
        DataType::F16 | DataType::BF16 | DataType::F32 => 16,
        DataType::F64 => 25,
        // Per string besides its bytes (see `string_bound`).
        DataType::Bytes => 3,
    }
}

/// Bound of one output of `elements` fixed-width elements of `dtype`.
pub fn fixed_output_bound(dtype: DataType, elements: usize, binary: bool) -> usize {
    let per = if binary { dtype.element_size().unwrap_or(1) } else { json_element_bound(dtype) };
    elements.saturating_mul(per).saturating_add(OUTPUT_OVERHEAD)
}

/// Bound of one encoded output tensor, as JSON or binary.
pub fn tensor_bound(name: &str, tensor: &Tensor, binary: bool) -> usize {
    let header = OUTPUT_OVERHEAD + name.len() + 21 * tensor.shape().len();
    let data = match tensor.data() {
        TensorData::Fixed(_) => fixed_output_bound(tensor.dtype(), tensor.len(), binary),
        TensorData::Strings(items) => items
            .iter()
            .map(|s| if binary { 4 + s.len() } else { s.len().saturating_mul(6).saturating_add(3) })
            .fold(0usize, usize::saturating_add),
    };
    header.saturating_add(data)
}

/// Bound of a whole response carrying `outputs` (name, tensor, binary).
pub fn response_bound(outputs: &[(String, Tensor, bool)]) -> usize {
    outputs
        .iter()
        .map(|(name, tensor, binary)| tensor_bound(name, tensor, *binary))
        .fold(512, usize::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn bounds_hold_for_the_longest_values() {
        let worst = Tensor::from_f32(vec![2], &[-1.175_494_4e-38, f32::MAX]).unwrap();
        let json = serde_json::to_string(&[-1.175_494_4e-38_f32, f32::MAX]).unwrap();
        assert!(json.len() <= fixed_output_bound(DataType::F32, 2, false));
        assert!(tensor_bound("p", &worst, true) >= 8);
        let strings =
            Tensor::new(DataType::Bytes, vec![1], TensorData::Strings(vec![Bytes::from_static(b"\x01\"")]))
                .unwrap();
        let escaped = serde_json::to_string("\u{1}\"").unwrap();
        assert!(escaped.len() <= tensor_bound("s", &strings, false) - OUTPUT_OVERHEAD);
        assert_eq!(response_bound(&[]), 512);
    }
}
