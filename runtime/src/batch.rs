//! Concatenating requests' tensors along the batch dimension (dim 0) and
//! splitting a batch's outputs back, row-major, without reinterpreting
//! elements: fixed-width data is joined and sliced as bytes (splitting is
//! zero-copy), `BYTES` as element lists.

use bytes::{Bytes, BytesMut};

use crate::tensor::{element_count, Tensor, TensorData};

/// Joins tensors of equal datatype and equal non-batch dimensions along
/// dim 0. The caller (the batcher) guarantees both by grouping.
pub fn concat(parts: &[&Tensor]) -> Result<Tensor, String> {
    let first = parts.first().ok_or_else(|| "nothing to concatenate".to_string())?;
    let rows: usize = parts.iter().map(|t| t.shape().first().copied().unwrap_or(1)).sum();
    let mut shape = first.shape().to_vec();
    match shape.first_mut() {
        Some(d0) => *d0 = rows,
        None => return Err("cannot batch a scalar tensor".into()),
    }
    let data = match first.data() {
        TensorData::Fixed(_) => {
            let total = parts.iter().map(|t| t.byte_size()).sum();
            let mut buf = BytesMut::with_capacity(total);
            for part in parts {
                buf.extend_from_slice(part.raw_bytes().ok_or("mixed datatypes in a batch")?);
            }
            TensorData::Fixed(buf.freeze())
        }
        TensorData::Strings(_) => {
            let mut items = Vec::new();
            for part in parts {
                match part.data() {
                    TensorData::Strings(s) => items.extend(s.iter().cloned()),
                    TensorData::Fixed(_) => return Err("mixed datatypes in a batch".into()),
                }
            }
            TensorData::Strings(items)
        }
    };
    Tensor::new(first.dtype(), shape, data).map_err(|e| e.to_string())
}

/// Splits `tensor` along dim 0 into consecutive pieces of `rows[i]` rows.
/// Fails when the leading dimension is not the sum of `rows` (an output
/// without a batch dimension cannot be split).
pub fn split(tensor: &Tensor, rows: &[usize]) -> Result<Vec<Tensor>, String> {
    let total: usize = rows.iter().sum();
    let Some((&d0, rest)) = tensor.shape().split_first() else {
        return Err("output is a scalar; it has no batch dimension to split".into());
    };
    if d0 != total {
        return Err(format!("output has {d0} rows but the batch has {total}"));
    }
    let row_elems = element_count(rest).ok_or("output shape overflows")?;
    let mut pieces = Vec::with_capacity(rows.len());
    let mut offset = 0usize;
    for &n in rows {
        let mut shape = tensor.shape().to_vec();
        shape[0] = n;
        let data = match tensor.data() {
            TensorData::Fixed(bytes) => {
                let size = tensor.dtype().element_size().unwrap_or(1) * row_elems;
                TensorData::Fixed(slice(bytes, offset * size, n * size)?)
            }
            TensorData::Strings(items) => {
                let range = offset * row_elems..(offset + n) * row_elems;
                TensorData::Strings(items.get(range).ok_or("output shorter than its shape")?.to_vec())
            }
        };
        pieces.push(Tensor::new(tensor.dtype(), shape, data).map_err(|e| e.to_string())?);
        offset += n;
    }
    Ok(pieces)
}

fn slice(bytes: &Bytes, start: usize, len: usize) -> Result<Bytes, String> {
    if start + len > bytes.len() {
        return Err("output shorter than its shape".into());
    }
    Ok(bytes.slice(start..start + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DataType;

    #[test]
    fn concat_then_split_round_trips() {
        let a = Tensor::from_f32(vec![1, 2], &[1.0, 2.0]).unwrap();
        let b = Tensor::from_f32(vec![2, 2], &[3.0, 4.0, 5.0, 6.0]).unwrap();
        let joined = concat(&[&a, &b]).unwrap();
        assert_eq!(joined.shape(), &[3, 2]);
        let parts = split(&joined, &[1, 2]).unwrap();
        assert_eq!(parts, vec![a, b]);
    }

    #[test]
    fn strings_round_trip() {
        let s = |v: &[&'static str]| {
            let items = v.iter().map(|x| Bytes::from_static(x.as_bytes())).collect();
            Tensor::new(DataType::Bytes, vec![v.len()], TensorData::Strings(items)).unwrap()
        };
        let (a, b) = (s(&["x"]), s(&["y", "zz"]));
        let joined = concat(&[&a, &b]).unwrap();
        assert_eq!(split(&joined, &[1, 2]).unwrap(), vec![a, b]);
    }

    #[test]
    fn split_rejects_wrong_rows() {
        let t = Tensor::from_f32(vec![2, 1], &[1.0, 2.0]).unwrap();
        assert!(split(&t, &[1, 2]).is_err());
    }
}
