//! The compact, versioned binary encoding of a cached [`Answer`], used for
//! L2 values (and to weigh L1 entries).
//!
//! Layout (integers little-endian; `str` = u32 length + UTF-8 bytes):
//!
//! ```text
//! magic "SYC" | format u8 (= 1)
//! model str | version u64 | device str | pool str | reason str | batch_size u64 | budget_ms u64
//! outputs u32, each: name str | dtype u8 | rank u32 | dims u64 * rank | data
//! data: Fixed  -> tag 0 | len u64 | bytes
//!       Strings-> tag 1 | count u64 | (len u32 | bytes) * count
//! ```
//!
//! `device` and `reason` are the labels of a [`Device`] and a [`Reason`]
//! (`as_str`): the codec is an edge where the typed decision becomes text
//! and back.
//!
//! Decoding checks every length against what is left, reads the reason
//! and device back with `from_label` and rebuilds tensors with
//! [`Tensor::new`], so a corrupt or foreign value (an unknown label
//! included) is an error (treated as a miss), never a panic. A new format version makes old values
//! unreadable, which the cache treats as misses.

use bytes::{BufMut, Bytes, BytesMut};
use router_policies::{Device, Reason};
use switchyard_protocol::answer::Answer;
use switchyard_runtime::{DataType, Tensor, TensorData};
use thiserror::Error;

const MAGIC: &[u8; 3] = b"SYC";
/// The format version written by [`encode`].
pub const FORMAT: u8 = 1;

/// Why a stored value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Not a value of this format (magic or version differ).
    #[error("unknown value format")]
    Format,
    /// The value ends before its declared contents.
    #[error("value truncated")]
    Truncated,
    /// A field holds an impossible value.
    #[error("invalid value: {0}")]
    Invalid(String),
}

/// Stable one-byte codes for datatypes (independent of enum order).
const DTYPE_CODES: [(DataType, u8); 14] = [
    (DataType::Bool, 1),
    (DataType::U8, 2),
    (DataType::U16, 3),
    (DataType::U32, 4),
    (DataType::U64, 5),
    (DataType::I8, 6),
    (DataType::I16, 7),
    (DataType::I32, 8),
    (DataType::I64, 9),
    (DataType::F16, 10),
    (DataType::BF16, 11),
    (DataType::F32, 12),
    (DataType::F64, 13),
    (DataType::Bytes, 14),
];

fn dtype_code(dtype: DataType) -> u8 {
    DTYPE_CODES.iter().find(|(d, _)| *d == dtype).map_or(0, |(_, c)| *c)
}

/// Encodes an answer. Destructures it, so a new field in [`Answer`] fails
/// to build until it is encoded here (or deliberately left out).
/// `degraded` is left out: degraded answers are never stored
/// ([`super::cacheable`]), so every decoded answer is not degraded.
/// `confidence` is left out too (L1 puts it back on its copy).
pub fn encode(answer: &Answer) -> Bytes {
    let Answer {
        model,
        version,
        device,
        pool,
        reason,
        batch_size,
        outputs,
        budget_ms,
        degraded: _,
        confidence: _,
    } = answer;
    let payload: usize = outputs.iter().map(|(n, t)| n.len() + t.byte_size() + 64).sum();
    let mut out = BytesMut::with_capacity(64 + model.len() + pool.len() + payload);
    out.put_slice(MAGIC);
    out.put_u8(FORMAT);
    put_str(&mut out, model);
    out.put_u64_le(*version);
    put_str(&mut out, device.as_str());
    put_str(&mut out, pool);
    put_str(&mut out, reason.as_str());
    out.put_u64_le(*batch_size as u64);
    out.put_u64_le(*budget_ms);
    out.put_u32_le(u32::try_from(outputs.len()).unwrap_or(u32::MAX));
    for (name, tensor) in outputs {
        put_str(&mut out, name);
        out.put_u8(dtype_code(tensor.dtype()));
        out.put_u32_le(u32::try_from(tensor.shape().len()).unwrap_or(u32::MAX));
        for &d in tensor.shape() {
            out.put_u64_le(d as u64);
        }
        match tensor.data() {
            TensorData::Fixed(bytes) => {
                out.put_u8(0);
                out.put_u64_le(bytes.len() as u64);
                out.put_slice(bytes);
            }
            TensorData::Strings(items) => {
                out.put_u8(1);
                out.put_u64_le(items.len() as u64);
                for item in items {
                    out.put_u32_le(u32::try_from(item.len()).unwrap_or(u32::MAX));
                    out.put_slice(item);
                }
            }
        }
    }
    out.freeze()
}

fn put_str(out: &mut BytesMut, text: &str) {
    out.put_u32_le(u32::try_from(text.len()).unwrap_or(u32::MAX));
    out.put_slice(text.as_bytes());
}

/// Decodes a value written by [`encode`]. Fixed-width tensor data are
/// zero-copy slices of `value`.
pub fn decode(value: &Bytes) -> Result<Answer, DecodeError> {
    let mut r = Reader { buf: value, pos: 0 };
    if r.take(3)? != MAGIC || r.u8()? != FORMAT {
        return Err(DecodeError::Format);
    }
    let model = r.string()?;
    let version = r.u64()?;
    let device = r.label("device", Device::from_label)?;
    let pool = r.string()?;
    let reason = r.label("reason", Reason::from_label)?;
    let batch_size = r.usize()?;
    let budget_ms = r.u64()?;
    let count = r.u32()? as usize;
    let mut outputs = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let name = r.string()?;
        outputs.push((name, r.tensor()?));
    }
    if r.pos != value.len() {
        return Err(DecodeError::Invalid("trailing bytes".into()));
    }
    Ok(Answer {
        model,
        version,
        device,
        pool,
        reason,
        batch_size,
        outputs,
        budget_ms,
        degraded: false,
        confidence: None,
    })
}

struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or(DecodeError::Truncated)?;
        let slice = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        Ok(slice)
    }

    fn slice(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        let start = self.pos;
        self.take(n)?;
        Ok(self.buf.slice(start..self.pos))
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        self.take(1)?.first().copied().ok_or(DecodeError::Truncated)
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn usize(&mut self) -> Result<usize, DecodeError> {
        usize::try_from(self.u64()?).map_err(|_| DecodeError::Invalid("length exceeds usize".into()))
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let len = self.u32()? as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Invalid("string is not UTF-8".into()))
    }

    /// A string that must be one of `from_label`'s labels.
    fn label<T>(&mut self, what: &str, from_label: fn(&str) -> Option<T>) -> Result<T, DecodeError> {
        let label = self.string()?;
        from_label(&label).ok_or_else(|| DecodeError::Invalid(format!("unknown {what} {label:?}")))
    }

    fn tensor(&mut self) -> Result<Tensor, DecodeError> {
        let code = self.u8()?;
        let dtype = DTYPE_CODES
            .iter()
            .find(|(_, c)| *c == code)
            .map(|(d, _)| *d)
            .ok_or_else(|| DecodeError::Invalid(format!("datatype code {code}")))?;
        let rank = self.u32()? as usize;
        if rank > 64 {
            return Err(DecodeError::Invalid(format!("rank {rank}")));
        }
        let shape = (0..rank).map(|_| self.usize()).collect::<Result<Vec<_>, _>>()?;
        let data = match self.u8()? {
            0 => {
                let len = self.usize()?;
                TensorData::Fixed(self.slice(len)?)
            }
            1 => {
                let count = self.usize()?;
                // Each element needs at least its 4-byte length.
                if count > (self.buf.len() - self.pos) / 4 {
                    return Err(DecodeError::Truncated);
                }
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    let len = self.u32()? as usize;
                    items.push(self.slice(len)?);
                }
                TensorData::Strings(items)
            }
            other => return Err(DecodeError::Invalid(format!("data tag {other}"))),
        };
        Tensor::new(dtype, shape, data).map_err(|e| DecodeError::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> Answer {
        let strings = Tensor::new(
            DataType::Bytes,
            vec![2],
            TensorData::Strings(vec![Bytes::from_static(b"0.9:3"), Bytes::new()]),
        )
        .unwrap();
        let labels =
            Tensor::new(DataType::I64, vec![2], TensorData::Fixed(Bytes::from(vec![7u8; 16]))).unwrap();
        Answer {
            model: "digits-heavy".into(),
            version: 3,
            device: Device::Cpu,
            pool: "cpu".into(),
            reason: Reason::CascadeConfident,
            batch_size: 17,
            budget_ms: 50,
            degraded: false,
            confidence: None,
            outputs: vec![
                ("probabilities".into(), Tensor::from_f32(vec![1, 3], &[0.1, 0.2, 0.7]).unwrap()),
                ("label".into(), labels),
                ("classes".into(), strings),
                ("empty".into(), Tensor::from_f32(vec![0, 10], &[]).unwrap()),
            ],
        }
    }

    #[test]
    fn round_trip() {
        let a = answer();
        let encoded = encode(&a);
        assert_eq!(&encoded[..4], b"SYC\x01");
        assert_eq!(decode(&encoded), Ok(a));
    }

    /// The layout of the module docs, written out by hand: the bytes a
    /// value has in Redis, which every gateway of a fleet must read alike.
    fn fixed_bytes(reason: &str, device: &str) -> Vec<u8> {
        let s = |text: &str| [&(text.len() as u32).to_le_bytes()[..], text.as_bytes()].concat();
        [
            &b"SYC\x01"[..],
            &s("m"),
            &2u64.to_le_bytes(),
            &s(device),
            &s("gpu0"),
            &s(reason),
            &4u64.to_le_bytes(),
            &50u64.to_le_bytes(),
            &1u32.to_le_bytes(),
            &s("y"),
            &[12u8],
            &1u32.to_le_bytes(),
            &1u64.to_le_bytes(),
            &[0u8],
            &4u64.to_le_bytes(),
            &1.5f32.to_le_bytes(),
        ]
        .concat()
    }

    fn small() -> Answer {
        Answer {
            model: "m".into(),
            version: 2,
            device: Device::Cuda,
            pool: "gpu0".into(),
            reason: Reason::CascadeEscalate,
            batch_size: 4,
            budget_ms: 50,
            degraded: false,
            confidence: None,
            outputs: vec![("y".into(), Tensor::from_f32(vec![1], &[1.5]).unwrap())],
        }
    }

    #[test]
    fn the_format_is_the_documented_layout_with_labels() {
        let bytes = fixed_bytes("cascade_escalate", "cuda");
        assert_eq!(encode(&small()).to_vec(), bytes);
        assert_eq!(decode(&Bytes::from(bytes)), Ok(small()));
        for (reason, device) in [("not_a_reason", "cuda"), ("cascade_escalate", "gpu")] {
            let unknown = decode(&Bytes::from(fixed_bytes(reason, device)));
            assert!(matches!(unknown, Err(DecodeError::Invalid(_))), "{unknown:?}");
        }
    }

    #[test]
    fn every_datatype_round_trips() {
        for (dtype, _) in DTYPE_CODES {
            let data = match dtype.element_size() {
                Some(size) => TensorData::Fixed(Bytes::from(vec![1u8; size * 2])),
                None => TensorData::Strings(vec![Bytes::from_static(b"x"), Bytes::from_static(b"yz")]),
            };
            let t = Tensor::new(dtype, vec![2], data).unwrap();
            let a = Answer { outputs: vec![("o".into(), t)], ..answer() };
            assert_eq!(decode(&encode(&a)), Ok(a), "{dtype}");
        }
    }

    #[test]
    fn truncated_corrupt_and_foreign_values_are_errors() {
        let encoded = encode(&answer());
        for cut in [0, 3, 4, 10, encoded.len() / 2, encoded.len() - 1] {
            assert!(decode(&encoded.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut other_version = encoded.to_vec();
        other_version[3] = 2;
        assert_eq!(decode(&Bytes::from(other_version)), Err(DecodeError::Format));
        let mut trailing = encoded.to_vec();
        trailing.push(0);
        assert!(decode(&Bytes::from(trailing)).is_err());
        assert!(decode(&Bytes::from_static(b"{\"json\":1}")).is_err());
    }
}
