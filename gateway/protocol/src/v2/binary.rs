//! Triton's binary tensor data layout: fixed-width elements little-endian
//! and row-major with no padding; `BYTES` elements each as a 4-byte
//! little-endian length followed by the bytes; `BOOL` one byte, 0 or 1.

use bytes::Bytes;
use switchyard_runtime::tensor::{DataType, TensorData};

use super::error::V2Error;

/// Decodes the `binary_data_size` bytes of input `input` (a zero-copy
/// slice of the request body) as `count` elements of `dtype`.
pub fn decode_binary(
    input: &str,
    dtype: DataType,
    shape: &[usize],
    count: usize,
    data: Bytes,
) -> Result<TensorData, V2Error> {
    let Some(size) = dtype.element_size() else {
        return decode_bytes_elements(input, count, data).map(TensorData::Strings);
    };
    let expected = count.checked_mul(size);
    if expected != Some(data.len()) {
        return Err(V2Error::BinarySize {
            input: input.to_owned(),
            datatype: dtype.v2_name(),
            shape: shape.to_vec(),
            expected: expected.unwrap_or(usize::MAX),
            actual: data.len(),
        });
    }
    if dtype == DataType::Bool {
        if let Some(index) = data.iter().position(|&b| b > 1) {
            return Err(V2Error::InvalidElement {
                input: input.to_owned(),
                datatype: dtype.v2_name(),
                index,
                reason: format!("byte value {} is neither 0 nor 1", data[index]),
            });
        }
    }
    Ok(TensorData::Fixed(data))
}

/// Splits length-prefixed `BYTES` elements; there must be exactly `count`
/// of them and nothing after.
fn decode_bytes_elements(input: &str, count: usize, data: Bytes) -> Result<Vec<Bytes>, V2Error> {
    let malformed = |reason: String| V2Error::BinaryBytes { input: input.to_owned(), reason };
    // Every element takes at least its 4-byte prefix.
    let mut items = Vec::with_capacity(count.min(data.len() / 4));
    let mut pos = 0usize;
    for index in 0..count {
        let Some(prefix) = data.get(pos..pos + 4) else {
            return Err(malformed(format!(
                "the data ends at element {index} of {count} (no room for its 4-byte length)"
            )));
        };
        let len = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        pos += 4;
        let remaining = data.len() - pos;
        if len > remaining {
            return Err(malformed(format!(
                "element {index} declares {len} bytes but only {remaining} remain"
            )));
        }
        items.push(data.slice(pos..pos + len));
        pos += len;
    }
    if pos != data.len() {
        return Err(malformed(format!(
            "{} bytes remain after the {count} elements of the shape",
            data.len() - pos
        )));
    }
    Ok(items)
}

/// Appends `BYTES` elements in the binary layout.
pub fn encode_bytes_elements(items: &[Bytes], out: &mut Vec<u8>) {
    for item in items {
        // Elements come from the runtime; one over 4 GiB cannot be framed
        // and would be refused earlier by any body limit, so saturate.
        let len = u32::try_from(item.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(item);
    }
}

/// Size in bytes of `data` in the binary layout.
pub fn binary_size(data: &TensorData) -> usize {
    match data {
        TensorData::Fixed(raw) => raw.len(),
        TensorData::Strings(items) => items.iter().map(|s| s.len() + 4).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<Bytes> {
        items.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()
    }

    #[test]
    fn bytes_round_trip() {
        let items = strings(&["", "ab", "\u{e9}t\u{e9}"]);
        let mut raw = Vec::new();
        encode_bytes_elements(&items, &mut raw);
        assert_eq!(&raw[..6], &[0, 0, 0, 0, 2, 0]);
        assert_eq!(raw.len(), binary_size(&TensorData::Strings(items.clone())));
        let back = decode_binary("s", DataType::Bytes, &[3], 3, Bytes::from(raw)).unwrap();
        assert_eq!(back, TensorData::Strings(items));
    }

    #[test]
    fn bytes_malformed() {
        let mut raw = Vec::new();
        encode_bytes_elements(&strings(&["ab", "c"]), &mut raw);
        let raw = Bytes::from(raw);
        for (count, data) in [
            (3, raw.clone()),                // too few elements
            (1, raw.clone()),                // trailing bytes
            (2, raw.slice(..raw.len() - 1)), // last element cut short
            (2, raw.slice(..8)),             // prefix cut short
        ] {
            let err = decode_binary("s", DataType::Bytes, &[count], count, data).unwrap_err();
            assert!(matches!(err, V2Error::BinaryBytes { .. }), "{err}");
        }
    }

    #[test]
    fn fixed_size_and_bool_checked() {
        let err = decode_binary("x", DataType::F32, &[2], 2, Bytes::from(vec![0u8; 7])).unwrap_err();
        assert!(matches!(err, V2Error::BinarySize { expected: 8, actual: 7, .. }));
        let err = decode_binary("b", DataType::Bool, &[2], 2, Bytes::from(vec![1u8, 2])).unwrap_err();
        assert!(matches!(err, V2Error::InvalidElement { index: 1, .. }));
    }
}
