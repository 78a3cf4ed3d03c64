//! Typed tensors as they travel between the gateway and the runtime.
//!
//! A [`Tensor`] is a datatype, a shape and its elements. Fixed-width
//! elements are kept as raw little-endian bytes (the layout of the Triton
//! binary extension and of ONNX Runtime on little-endian hosts), so that a
//! tensor decoded from JSON and the same tensor decoded from binary are
//! byte-for-byte equal, which the cache key relies on. `BYTES` elements are
//! kept as one byte string each.

use bytes::Bytes;
use thiserror::Error;

/// The Open Inference Protocol (KServe V2) tensor datatypes.
///
/// Use [`DataType::from_v2_name`] / [`DataType::v2_name`] for the wire
/// names (`FP32`), and [`DataType::triton_config_name`] for the names in
/// Triton's model configuration (`TYPE_FP32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataType {
    /// `BOOL`: one byte per element, 0 or 1.
    Bool,
    /// `UINT8`
    U8,
    /// `UINT16`
    U16,
    /// `UINT32`
    U32,
    /// `UINT64`
    U64,
    /// `INT8`
    I8,
    /// `INT16`
    I16,
    /// `INT32`
    I32,
    /// `INT64`
    I64,
    /// `FP16`: IEEE half precision, carried as raw bytes.
    F16,
    /// `BF16`: bfloat16, carried as raw bytes.
    BF16,
    /// `FP32`
    F32,
    /// `FP64`
    F64,
    /// `BYTES`: variable-length byte strings (text), one per element.
    Bytes,
}

/// Every datatype, in wire-name order; handy for tests and error messages.
pub const ALL_DATA_TYPES: [DataType; 14] = [
    DataType::Bool,
    DataType::U8,
    DataType::U16,
    DataType::U32,
    DataType::U64,
    DataType::I8,
    DataType::I16,
    DataType::I32,
    DataType::I64,
    DataType::F16,
    DataType::BF16,
    DataType::F32,
    DataType::F64,
    DataType::Bytes,
];

impl DataType {
    /// The V2 wire name, e.g. `FP32`.
    pub fn v2_name(self) -> &'static str {
        match self {
            DataType::Bool => "BOOL",
            DataType::U8 => "UINT8",
            DataType::U16 => "UINT16",
            DataType::U32 => "UINT32",
            DataType::U64 => "UINT64",
            DataType::I8 => "INT8",
            DataType::I16 => "INT16",
            DataType::I32 => "INT32",
            DataType::I64 => "INT64",
            DataType::F16 => "FP16",
            DataType::BF16 => "BF16",
            DataType::F32 => "FP32",
            DataType::F64 => "FP64",
            DataType::Bytes => "BYTES",
        }
    }

    /// Parses a V2 wire name; `None` for an unknown name.
    pub fn from_v2_name(name: &str) -> Option<DataType> {
        ALL_DATA_TYPES.into_iter().find(|d| d.v2_name() == name)
    }

    /// The name Triton's model configuration uses (`TYPE_FP32`,
    /// `TYPE_STRING` for `BYTES`), as read by `perf_analyzer`.
    pub fn triton_config_name(self) -> &'static str {
        match self {
            DataType::Bool => "TYPE_BOOL",
            DataType::U8 => "TYPE_UINT8",
            DataType::U16 => "TYPE_UINT16",
            DataType::U32 => "TYPE_UINT32",
            DataType::U64 => "TYPE_UINT64",
            DataType::I8 => "TYPE_INT8",
            DataType::I16 => "TYPE_INT16",
            DataType::I32 => "TYPE_INT32",
            DataType::I64 => "TYPE_INT64",
            DataType::F16 => "TYPE_FP16",
            DataType::BF16 => "TYPE_BF16",
            DataType::F32 => "TYPE_FP32",
            DataType::F64 => "TYPE_FP64",
            DataType::Bytes => "TYPE_STRING",
        }
    }

    /// Bytes per element, or `None` for the variable-length `BYTES`.
    pub fn element_size(self) -> Option<usize> {
        match self {
            DataType::Bool | DataType::U8 | DataType::I8 => Some(1),
            DataType::U16 | DataType::I16 | DataType::F16 | DataType::BF16 => Some(2),
            DataType::U32 | DataType::I32 | DataType::F32 => Some(4),
            DataType::U64 | DataType::I64 | DataType::F64 => Some(8),
            DataType::Bytes => None,
        }
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.v2_name())
    }
}

/// The elements of a tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorData {
    /// Fixed-width elements, little-endian, row-major.
    Fixed(Bytes),
    /// `BYTES` elements, one byte string per element, row-major.
    Strings(Vec<Bytes>),
}

/// Why a tensor could not be built: its shape and its data disagree.
///
/// Callers turn this into a 400 (the client sent inconsistent data).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TensorError {
    /// The shape's element count overflows `usize` (a hostile shape).
    #[error("shape {shape:?} has too many elements")]
    ShapeOverflow {
        /// The declared shape.
        shape: Vec<usize>,
    },
    /// Fixed-width data whose byte length is not shape x element size.
    #[error("shape {shape:?} of {dtype} needs {expected} bytes, got {actual}")]
    ByteLength {
        /// The declared datatype.
        dtype: DataType,
        /// The declared shape.
        shape: Vec<usize>,
        /// Bytes the shape needs.
        expected: usize,
        /// Bytes supplied.
        actual: usize,
    },
    /// `BYTES` data whose element count differs from the shape's.
    #[error("shape {shape:?} needs {expected} elements, got {actual}")]
    ElementCount {
        /// The declared shape.
        shape: Vec<usize>,
        /// Elements the shape needs.
        expected: usize,
        /// Elements supplied.
        actual: usize,
    },
    /// Data of one kind given for a datatype of the other (strings for a
    /// numeric type, or raw bytes for `BYTES`).
    #[error("datatype {dtype} does not match the kind of data supplied")]
    DataKind {
        /// The declared datatype.
        dtype: DataType,
    },
}

/// A typed, shaped tensor. Construct with [`Tensor::new`], which checks
/// that the data fits the shape; the fields stay private so that every
/// tensor in the system is consistent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    dtype: DataType,
    shape: Vec<usize>,
    data: TensorData,
}

/// Number of elements a shape holds, or `None` on overflow.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

impl Tensor {
    /// Builds a tensor, checking that `data` matches `dtype` and `shape`.
    pub fn new(dtype: DataType, shape: Vec<usize>, data: TensorData) -> Result<Tensor, TensorError> {
        let Some(count) = element_count(&shape) else {
            return Err(TensorError::ShapeOverflow { shape });
        };
        match (&data, dtype.element_size()) {
            (TensorData::Fixed(bytes), Some(size)) => {
                let Some(expected) = count.checked_mul(size) else {
                    return Err(TensorError::ShapeOverflow { shape });
                };
                if bytes.len() != expected {
                    return Err(TensorError::ByteLength { dtype, shape, expected, actual: bytes.len() });
                }
            }
            (TensorData::Strings(items), None) => {
                if items.len() != count {
                    return Err(TensorError::ElementCount { shape, expected: count, actual: items.len() });
                }
            }
            _ => return Err(TensorError::DataKind { dtype }),
        }
        Ok(Tensor { dtype, shape, data })
    }

    /// Builds an `FP32` tensor from values; convenient in tests and tools.
    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Result<Tensor, TensorError> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor::new(DataType::F32, shape, TensorData::Fixed(Bytes::from(bytes)))
    }

    /// The same elements under another shape with the same element count
    /// (e.g. Triton's `reshape` of `[N, 1]` to `[N]`).
    pub fn reshape(self, shape: Vec<usize>) -> Result<Tensor, TensorError> {
        Tensor::new(self.dtype, shape, self.data)
    }

    /// The datatype.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The elements.
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.data {
            TensorData::Fixed(bytes) => self.dtype.element_size().map_or(0, |s| bytes.len() / s.max(1)),
            TensorData::Strings(items) => items.len(),
        }
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size of the payload in bytes (for `BYTES`, the sum of the strings
    /// plus a 4-byte length prefix each, as on the wire).
    pub fn byte_size(&self) -> usize {
        match &self.data {
            TensorData::Fixed(bytes) => bytes.len(),
            TensorData::Strings(items) => items.iter().map(|s| s.len() + 4).sum(),
        }
    }

    /// The raw little-endian bytes of a fixed-width tensor; `None` for `BYTES`.
    pub fn raw_bytes(&self) -> Option<&Bytes> {
        match &self.data {
            TensorData::Fixed(bytes) => Some(bytes),
            TensorData::Strings(_) => None,
        }
    }

    /// The elements as `f32` when the datatype is `FP32`.
    pub fn to_f32_vec(&self) -> Option<Vec<f32>> {
        let raw = self.raw_bytes().filter(|_| self.dtype == DataType::F32)?;
        Some(raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    /// The elements as `i64` when the datatype is `INT64`.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        let raw = self.raw_bytes().filter(|_| self.dtype == DataType::I64)?;
        Some(
            raw.chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip() {
        for d in ALL_DATA_TYPES {
            assert_eq!(DataType::from_v2_name(d.v2_name()), Some(d));
        }
        assert_eq!(DataType::from_v2_name("FLOAT"), None);
    }

    #[test]
    fn new_checks_byte_length() {
        let err = Tensor::new(DataType::F32, vec![2, 3], TensorData::Fixed(Bytes::from(vec![0u8; 20])));
        assert!(matches!(err, Err(TensorError::ByteLength { expected: 24, actual: 20, .. })));
        let ok = Tensor::new(DataType::F32, vec![2, 3], TensorData::Fixed(Bytes::from(vec![0u8; 24])));
        assert_eq!(ok.map(|t| t.len()), Ok(6));
    }

    #[test]
    fn new_rejects_overflowing_shape() {
        let err = Tensor::new(DataType::F32, vec![usize::MAX, 2], TensorData::Fixed(Bytes::new()));
        assert!(matches!(err, Err(TensorError::ShapeOverflow { .. })));
    }

    #[test]
    fn new_checks_string_count_and_kind() {
        let items = vec![Bytes::from_static(b"a"), Bytes::from_static(b"bc")];
        assert!(Tensor::new(DataType::Bytes, vec![2], TensorData::Strings(items.clone())).is_ok());
        assert!(matches!(
            Tensor::new(DataType::Bytes, vec![3], TensorData::Strings(items.clone())),
            Err(TensorError::ElementCount { .. })
        ));
        assert!(matches!(
            Tensor::new(DataType::F32, vec![2], TensorData::Strings(items)),
            Err(TensorError::DataKind { .. })
        ));
    }

    #[test]
    fn f32_accessors_round_trip() {
        let t = Tensor::from_f32(vec![1, 3], &[1.0, -2.5, 3.25]).unwrap();
        assert_eq!(t.to_f32_vec(), Some(vec![1.0, -2.5, 3.25]));
        assert_eq!(t.to_i64_vec(), None);
    }
}
