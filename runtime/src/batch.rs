//! Concatenating requests' tensors along the batch dimension (dim 0) and
//! splitting a batch's outputs back, row-major, without reinterpreting
//! elements: fixed-width data is joined and sliced as bytes (splitting is
//! zero-copy), `BYTES` as element lists.

use bytes::{Bytes, BytesMut};

use crate::tensor::{element_count, DataType, Tensor, TensorData};

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

/// Joins `[rows, length]` INT64 tensors whose lengths differ (a text
/// model's token tensors) along dim 0, right-padding each row with `pad` to
/// the longest length.
pub fn concat_padded(parts: &[&Tensor], pad: i64) -> Result<Tensor, String> {
    let width =
        parts.iter().filter_map(|t| t.shape().get(1).copied()).max().ok_or("nothing to concatenate")?;
    let rows: usize = parts.iter().map(|t| t.shape().first().copied().unwrap_or(0)).sum();
    let mut buf = BytesMut::with_capacity(rows * width * 8);
    let pad = pad.to_le_bytes();
    for part in parts {
        let (Some(raw), [_, len]) = (part.raw_bytes(), part.shape()) else {
            return Err("padded batching needs [rows, length] tensors".into());
        };
        if part.dtype() != DataType::I64 {
            return Err(format!("padded batching needs INT64 tensors, got {}", part.dtype()));
        }
        for row in raw.chunks_exact(len * 8) {
            buf.extend_from_slice(row);
            for _ in *len..width {
                buf.extend_from_slice(&pad);
            }
        }
    }
    Tensor::new(DataType::I64, vec![rows, width], TensorData::Fixed(buf.freeze())).map_err(|e| e.to_string())
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

/// Builds a tensor of `total` rows from pieces whose rows go to the given
/// positions (`parts`: each piece's row positions, increasing or not, and
/// the piece): the inverse of taking those rows out. Every position must be
/// given exactly once; the pieces must share datatype and the dimensions
/// after the batch dimension.
pub fn scatter(parts: &[(&[usize], &Tensor)], total: usize) -> Result<Tensor, String> {
    let (_, first) = parts.first().ok_or("nothing to assemble")?;
    let rest = first.shape().get(1..).ok_or("a scalar has no rows")?.to_vec();
    let row_elems = element_count(&rest).ok_or("output shape overflows")?;
    let mut filled = vec![false; total];
    for (rows, piece) in parts {
        if piece.dtype() != first.dtype() || piece.shape().get(1..) != Some(rest.as_slice()) {
            return Err(format!(
                "pieces differ: {:?} {} vs {:?} {}",
                piece.shape(),
                piece.dtype(),
                first.shape(),
                first.dtype()
            ));
        }
        if piece.shape().first() != Some(&rows.len()) {
            return Err(format!("a piece of {:?} holds {} positions", piece.shape(), rows.len()));
        }
        for &r in rows.iter() {
            match filled.get_mut(r) {
                Some(seen) if !*seen => *seen = true,
                _ => return Err(format!("row {r} is out of range or given twice")),
            }
        }
    }
    if filled.contains(&false) {
        return Err("a row has no piece".into());
    }
    let mut shape = vec![total];
    shape.extend_from_slice(&rest);
    let data = match first.data() {
        TensorData::Fixed(_) => {
            let row_bytes = first.dtype().element_size().unwrap_or(1) * row_elems;
            let mut buf = vec![0u8; total * row_bytes];
            for (rows, piece) in parts {
                let raw = piece.raw_bytes().ok_or("mixed datatypes")?;
                for (&r, row) in rows.iter().zip(raw.chunks_exact(row_bytes.max(1))) {
                    buf[r * row_bytes..(r + 1) * row_bytes].copy_from_slice(row);
                }
            }
            TensorData::Fixed(Bytes::from(buf))
        }
        TensorData::Strings(_) => {
            let mut items = vec![Bytes::new(); total * row_elems];
            for (rows, piece) in parts {
                let TensorData::Strings(strings) = piece.data() else { return Err("mixed datatypes".into()) };
                for (&r, row) in rows.iter().zip(strings.chunks_exact(row_elems.max(1))) {
                    items[r * row_elems..(r + 1) * row_elems].clone_from_slice(row);
                }
            }
            TensorData::Strings(items)
        }
    };
    Tensor::new(first.dtype(), shape, data).map_err(|e| e.to_string())
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
    fn scatter_puts_rows_at_their_positions_and_checks_them() {
        let a = Tensor::from_f32(vec![2, 1], &[0.0, 3.0]).unwrap();
        let b = Tensor::from_f32(vec![2, 1], &[1.0, 2.0]).unwrap();
        let whole = scatter(&[(&[0, 3], &a), (&[1, 2], &b)], 4).unwrap();
        assert_eq!(whole, Tensor::from_f32(vec![4, 1], &[0.0, 1.0, 2.0, 3.0]).unwrap());
        assert!(scatter(&[(&[0, 1], &a), (&[1, 2], &b)], 4).is_err(), "a row given twice");
        assert!(scatter(&[(&[0, 1], &a)], 4).is_err(), "rows left empty");
        assert!(scatter(&[(&[0], &a)], 1).is_err(), "a piece with more rows than positions");
        let wide = Tensor::from_f32(vec![2, 2], &[0.0; 4]).unwrap();
        assert!(scatter(&[(&[0, 1], &a), (&[2, 3], &wide)], 4).is_err(), "row shapes differ");
        let s = |v: &[&'static str]| {
            let items = v.iter().map(|x| Bytes::from_static(x.as_bytes())).collect();
            Tensor::new(DataType::Bytes, vec![v.len(), 1], TensorData::Strings(items)).unwrap()
        };
        assert_eq!(scatter(&[(&[1], &s(&["b"])), (&[0], &s(&["a"]))], 2).unwrap(), s(&["a", "b"]));
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
    fn concat_padded_pads_rows_to_the_longest() {
        let ids = |rows: usize, vals: &[i64]| {
            let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            Tensor::new(DataType::I64, vec![rows, vals.len() / rows], TensorData::Fixed(Bytes::from(bytes)))
                .unwrap()
        };
        let (a, b) = (ids(1, &[1, 2]), ids(2, &[3, 4, 5, 6, 7, 8]));
        let joined = concat_padded(&[&a, &b], -1).unwrap();
        assert_eq!(joined.shape(), &[3, 3]);
        assert_eq!(joined.to_i64_vec().unwrap(), vec![1, 2, -1, 3, 4, 5, 6, 7, 8]);
        let floats = Tensor::from_f32(vec![1, 1], &[1.0]).unwrap();
        assert!(concat_padded(&[&floats], 0).is_err());
    }

    #[test]
    fn split_rejects_wrong_rows() {
        let t = Tensor::from_f32(vec![2, 1], &[1.0, 2.0]).unwrap();
        assert!(split(&t, &[1, 2]).is_err());
    }
}
