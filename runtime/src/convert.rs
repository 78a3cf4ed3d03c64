//! Conversion between the runtime's [`Tensor`] and ONNX Runtime values.
//!
//! Fixed-width tensors are copied as raw little-endian bytes into a tensor
//! ONNX Runtime allocates (so every fixed-width type, FP16 and BF16
//! included, takes one code path); `BYTES` become ONNX string tensors and
//! must be UTF-8 (NUL bytes are kept: see [`string_value`]). A request's
//! own tensor of a common numeric type, aligned for its element type, is
//! lent to ONNX Runtime as a view instead ([`to_ort_input`]): no
//! allocation by ONNX Runtime and no copy.

use bytes::Bytes;
use ort::memory::Allocator;
use ort::session::SessionInputValue;
use ort::value::{
    DynTensor, DynTensorValueType, DynValue, PrimitiveTensorElementType, TensorElementType, TensorRef,
    ValueType,
};
use ort::AsPointer;

use crate::tensor::{DataType, Tensor, TensorData};

/// The ONNX element type of a datatype.
pub fn to_ort_type(dtype: DataType) -> TensorElementType {
    match dtype {
        DataType::Bool => TensorElementType::Bool,
        DataType::U8 => TensorElementType::Uint8,
        DataType::U16 => TensorElementType::Uint16,
        DataType::U32 => TensorElementType::Uint32,
        DataType::U64 => TensorElementType::Uint64,
        DataType::I8 => TensorElementType::Int8,
        DataType::I16 => TensorElementType::Int16,
        DataType::I32 => TensorElementType::Int32,
        DataType::I64 => TensorElementType::Int64,
        DataType::F16 => TensorElementType::Float16,
        DataType::BF16 => TensorElementType::Bfloat16,
        DataType::F32 => TensorElementType::Float32,
        DataType::F64 => TensorElementType::Float64,
        DataType::Bytes => TensorElementType::String,
    }
}

/// The datatype of an ONNX element type; `None` for types the wire
/// protocol cannot carry (complex, 8-bit and 4-bit floats...).
pub fn from_ort_type(ty: TensorElementType) -> Option<DataType> {
    Some(match ty {
        TensorElementType::Bool => DataType::Bool,
        TensorElementType::Uint8 => DataType::U8,
        TensorElementType::Uint16 => DataType::U16,
        TensorElementType::Uint32 => DataType::U32,
        TensorElementType::Uint64 => DataType::U64,
        TensorElementType::Int8 => DataType::I8,
        TensorElementType::Int16 => DataType::I16,
        TensorElementType::Int32 => DataType::I32,
        TensorElementType::Int64 => DataType::I64,
        TensorElementType::Float16 => DataType::F16,
        TensorElementType::Bfloat16 => DataType::BF16,
        TensorElementType::Float32 => DataType::F32,
        TensorElementType::Float64 => DataType::F64,
        TensorElementType::String => DataType::Bytes,
        _ => return None,
    })
}

/// An input for `Session::run` over `tensor`: a view of its bytes when
/// they can be lent as they are (see [`view`]), else a copy
/// ([`to_ort_value`]).
pub fn to_ort_input(tensor: &Tensor) -> Result<SessionInputValue<'_>, String> {
    let lent = match (tensor.dtype(), tensor.data()) {
        (DataType::F32, TensorData::Fixed(bytes)) => view::<f32>(tensor.shape(), bytes),
        (DataType::F64, TensorData::Fixed(bytes)) => view::<f64>(tensor.shape(), bytes),
        (DataType::I64, TensorData::Fixed(bytes)) => view::<i64>(tensor.shape(), bytes),
        (DataType::I32, TensorData::Fixed(bytes)) => view::<i32>(tensor.shape(), bytes),
        (DataType::I16, TensorData::Fixed(bytes)) => view::<i16>(tensor.shape(), bytes),
        (DataType::I8, TensorData::Fixed(bytes)) => view::<i8>(tensor.shape(), bytes),
        (DataType::U8, TensorData::Fixed(bytes)) => view::<u8>(tensor.shape(), bytes),
        (DataType::U16, TensorData::Fixed(bytes)) => view::<u16>(tensor.shape(), bytes),
        (DataType::U32, TensorData::Fixed(bytes)) => view::<u32>(tensor.shape(), bytes),
        (DataType::U64, TensorData::Fixed(bytes)) => view::<u64>(tensor.shape(), bytes),
        _ => None,
    };
    match lent {
        Some(input) => Ok(input),
        None => to_ort_value(tensor).map(SessionInputValue::from),
    }
}

/// `bytes` lent to ONNX Runtime as a tensor of `T` and `shape`; `None`
/// when they are empty, not aligned for `T`, or not a whole number of
/// elements (the caller copies instead).
fn view<'a, T: PrimitiveTensorElementType + Clone + std::fmt::Debug + 'static>(
    shape: &[usize],
    bytes: &'a Bytes,
) -> Option<SessionInputValue<'a>> {
    if bytes.is_empty() {
        return None;
    }
    // SAFETY: every type `T` this is called with (integers and IEEE
    // floats) is valid for any bit pattern, so reading the aligned middle
    // part of a byte slice as `T`s is sound; `align_to` itself never
    // splits an element.
    let (head, elements, tail) = unsafe { bytes.as_ref().align_to::<T>() };
    if !head.is_empty() || !tail.is_empty() {
        return None;
    }
    let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    TensorRef::from_array_view((shape, elements)).ok().map(SessionInputValue::from)
}

/// Builds an ONNX Runtime value holding a copy of `tensor`. Errors are
/// plain strings: the caller knows which input and model they concern.
pub fn to_ort_value(tensor: &Tensor) -> Result<DynValue, String> {
    let shape: Vec<i64> = tensor.shape().iter().map(|&d| d as i64).collect();
    match tensor.data() {
        TensorData::Strings(items) => string_value(shape, items),
        TensorData::Fixed(bytes) => {
            let mut value = DynTensor::new(&Allocator::default(), to_ort_type(tensor.dtype()), shape)
                .map_err(|e| e.to_string())?;
            if !bytes.is_empty() {
                let dst = value.data_ptr_mut().cast::<u8>();
                if dst.is_null() {
                    return Err("ONNX Runtime returned no buffer for a non-empty tensor".into());
                }
                // SAFETY: `DynTensor::new` allocated a CPU buffer for exactly
                // shape x element-size bytes, which `Tensor::new` guarantees
                // equals `bytes.len()`; the regions cannot overlap.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
            }
            Ok(value.into_dyn())
        }
    }
}

/// An ONNX string tensor of `shape` holding `items`. Each element is
/// copied into the buffer ONNX Runtime sizes for it by length
/// (`GetResizedStringTensorElementBuffer`), not passed as a C string, so
/// an element may hold NUL bytes as the protocol allows (Triton takes them
/// too); elements must be UTF-8, which ONNX string tensors require.
fn string_value(shape: Vec<i64>, items: &[Bytes]) -> Result<DynValue, String> {
    let mut value =
        DynTensor::new(&Allocator::default(), TensorElementType::String, shape).map_err(|e| e.to_string())?;
    let api = ort::api();
    for (index, item) in items.iter().enumerate() {
        if std::str::from_utf8(item).is_err() {
            return Err("a BYTES element is not UTF-8".into());
        }
        let mut buffer: *mut std::ffi::c_char = std::ptr::null_mut();
        // SAFETY: `value` is a live string tensor of `items.len()` elements
        // (`Tensor::new` checked the count against the shape), so `index`
        // is in range; ONNX Runtime resizes that element's string to
        // `item.len()` bytes and returns its buffer, or an error status,
        // which `result_from_status` takes ownership of.
        let status = unsafe {
            (api.GetResizedStringTensorElementBuffer)(value.ptr_mut(), index, item.len(), &mut buffer)
        };
        // SAFETY: `status` was just returned by an ONNX Runtime API call.
        unsafe { ort::Error::result_from_status(status) }.map_err(|e| e.to_string())?;
        if item.is_empty() {
            continue;
        }
        if buffer.is_null() {
            return Err("ONNX Runtime returned no buffer for a string element".into());
        }
        // SAFETY: the buffer holds exactly `item.len()` writable bytes
        // (resized above) and belongs to ONNX Runtime, not to `item`.
        unsafe { std::ptr::copy_nonoverlapping(item.as_ptr(), buffer.cast::<u8>(), item.len()) };
    }
    Ok(value.into_dyn())
}

/// Copies an ONNX Runtime output value into a [`Tensor`].
pub fn from_ort_value(value: DynValue) -> Result<Tensor, String> {
    let (ty, shape) = match value.dtype() {
        ValueType::Tensor { ty, shape, .. } => {
            (*ty, shape.iter().map(|&d| d.max(0) as usize).collect::<Vec<_>>())
        }
        other => return Err(format!("output is a {other}, not a tensor")),
    };
    let dtype = from_ort_type(ty).ok_or_else(|| format!("output element type {ty} is not supported"))?;
    let data = match dtype.element_size() {
        None => {
            let (_, strings) = value.try_extract_strings().map_err(|e| e.to_string())?;
            TensorData::Strings(strings.into_iter().map(Bytes::from).collect())
        }
        Some(size) => TensorData::Fixed(Bytes::from(raw_bytes(value, &shape, size)?)),
    };
    Tensor::new(dtype, shape, data).map_err(|e| e.to_string())
}

fn raw_bytes(value: DynValue, shape: &[usize], element_size: usize) -> Result<Vec<u8>, String> {
    let tensor = value.downcast::<DynTensorValueType>().map_err(|e| e.to_string())?;
    if !tensor.memory_info().is_cpu_accessible() {
        return Err("output tensor is not in CPU memory".into());
    }
    let len = crate::tensor::element_count(shape)
        .and_then(|n| n.checked_mul(element_size))
        .ok_or_else(|| "output shape overflows".to_string())?;
    if len == 0 {
        return Ok(Vec::new());
    }
    let src = tensor.data_ptr().cast::<u8>();
    if src.is_null() {
        return Err("ONNX Runtime returned no buffer for a non-empty output".into());
    }
    // SAFETY: the tensor lives in CPU memory (checked above) and holds
    // shape x element-size bytes; `tensor` outlives the borrow.
    Ok(unsafe { std::slice::from_raw_parts(src, len) }.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::ALL_DATA_TYPES;

    #[test]
    fn type_mapping_round_trips() {
        for d in ALL_DATA_TYPES {
            assert_eq!(from_ort_type(to_ort_type(d)), Some(d));
        }
    }

    fn floats(input: &SessionInputValue<'_>) -> (Vec<i64>, Vec<f32>) {
        let (shape, data) = input.try_extract_tensor::<f32>().unwrap();
        (shape.to_vec(), data.to_vec())
    }

    #[test]
    fn an_aligned_request_tensor_is_lent_and_anything_else_is_copied() {
        crate::ort_env::init_onnxruntime(None).unwrap();
        let values = [1.5f32, -2.0, 3.25, 4.0];
        let expected = (vec![2, 2], values.to_vec());
        let aligned = Tensor::from_f32(vec![2, 2], &values).unwrap();
        let lent = to_ort_input(&aligned).unwrap();
        assert!(matches!(lent, SessionInputValue::View(_)));
        assert_eq!(floats(&lent), expected);

        // The same floats one byte into a buffer: no longer 4-aligned.
        let mut raw = vec![0u8];
        raw.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        let shifted = Bytes::from(raw).slice(1..);
        assert_ne!(shifted.as_ptr() as usize % 4, 0);
        let unaligned = Tensor::new(DataType::F32, vec![2, 2], TensorData::Fixed(shifted)).unwrap();
        let copied = to_ort_input(&unaligned).unwrap();
        assert!(matches!(copied, SessionInputValue::Owned(_)));
        assert_eq!(floats(&copied), expected);

        // A type without a view (FP16) and an empty tensor are copied.
        let half =
            Tensor::new(DataType::F16, vec![1, 2], TensorData::Fixed(Bytes::from(vec![0u8; 4]))).unwrap();
        assert!(matches!(to_ort_input(&half).unwrap(), SessionInputValue::Owned(_)));
        let empty = Tensor::from_f32(vec![0, 2], &[]).unwrap();
        assert!(matches!(to_ort_input(&empty).unwrap(), SessionInputValue::Owned(_)));
    }

    #[test]
    fn string_elements_keep_nul_bytes_and_empty_strings() {
        crate::ort_env::init_onnxruntime(None).unwrap();
        let items: Vec<Bytes> =
            ["a\0b", "", "\0", "plain"].iter().map(|s| Bytes::from(s.as_bytes())).collect();
        let tensor = Tensor::new(DataType::Bytes, vec![2, 2], TensorData::Strings(items.clone())).unwrap();
        let value = to_ort_value(&tensor).unwrap();
        let back = from_ort_value(value).unwrap();
        assert_eq!(back.shape(), &[2, 2]);
        assert_eq!(back.data(), &TensorData::Strings(items));
        let not_utf8 =
            Tensor::new(DataType::Bytes, vec![1], TensorData::Strings(vec![Bytes::from_static(b"\xff")]))
                .unwrap();
        assert!(to_ort_value(&not_utf8).unwrap_err().contains("UTF-8"));
    }
}
