//! Typed parsing of an input's JSON `data` field.
//!
//! The `data` text is walked once with a streaming serde visitor that
//! writes each element straight into the tensor's little-endian buffer: no
//! `serde_json::Value` tree is built, so large float arrays cost one pass.
//!
//! Accepted layouts: a flat array of all elements in row-major order, or
//! arrays nested exactly as the shape (each level as long as its
//! dimension). A rank-0 shape also accepts a bare scalar.
//!
//! Element rules: integer types take JSON integers (or integral numbers
//! such as `2.0`) within the type's range; `FP32`/`FP64` take any number
//! that fits the type; `FP16`/`BF16` take numbers, rounded to nearest-even
//! (Triton refuses these in JSON; Switchyard accepts them, so that
//! `tritonclient` with `binary_data=False` works); `BOOL` takes `true`/
//! `false`; `BYTES` takes strings (their UTF-8 bytes).

use std::fmt;

use bytes::Bytes;
use serde::de::{self, DeserializeSeed, IgnoredAny, SeqAccess, Visitor};
use serde_json::value::RawValue;
use switchyard_runtime::tensor::{DataType, TensorData};

use super::error::V2Error;
use super::float16::{f64_to_bf16_bits, f64_to_f16_bits};
use super::json_floats::flat_floats;

/// One JSON scalar as the visitor saw it.
enum Leaf<'a> {
    Bool(bool),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Str(&'a str),
}

/// What is being built and what has been seen so far.
struct Ctx<'s> {
    input: &'s str,
    dtype: DataType,
    shape: &'s [usize],
    expected: usize,
    fixed: Vec<u8>,
    strings: Vec<Bytes>,
    count: usize,
    leaf_depth: Option<usize>,
    error: Option<V2Error>,
}

impl Ctx<'_> {
    fn mismatch(&self, reason: String) -> V2Error {
        V2Error::ShapeMismatch { input: self.input.to_owned(), shape: self.shape.to_vec(), reason }
    }

    fn invalid(&self, reason: String) -> V2Error {
        V2Error::InvalidElement {
            input: self.input.to_owned(),
            datatype: self.dtype.v2_name(),
            index: self.count,
            reason,
        }
    }

    /// Checks the depth of a scalar and appends it.
    fn leaf(&mut self, depth: usize, leaf: Leaf<'_>) -> Result<(), V2Error> {
        let rank = self.shape.len();
        match self.leaf_depth {
            None if depth == 1 || depth == rank => self.leaf_depth = Some(depth),
            None if depth == 0 => return Err(self.mismatch("'data' must be an array".to_owned())),
            None => {
                return Err(self.mismatch(format!(
                    "values are nested {depth} deep; use a flat array or arrays nested exactly as the shape"
                )))
            }
            Some(seen) if seen != depth => {
                return Err(self.mismatch("arrays are nested unevenly".to_owned()));
            }
            Some(_) => {}
        }
        if self.count >= self.expected {
            return Err(self.mismatch(format!("more than {} elements", self.expected)));
        }
        self.push(leaf).map_err(|reason| self.invalid(reason))?;
        self.count += 1;
        Ok(())
    }

    fn push(&mut self, leaf: Leaf<'_>) -> Result<(), String> {
        let out = &mut self.fixed;
        match self.dtype {
            DataType::Bool => match leaf {
                Leaf::Bool(b) => out.push(u8::from(b)),
                other => return Err(format!("expected true or false, got {}", kind(&other))),
            },
            DataType::U8 => out.push(int_in_range::<u8>(&leaf)?),
            DataType::U16 => out.extend_from_slice(&int_in_range::<u16>(&leaf)?.to_le_bytes()),
            DataType::U32 => out.extend_from_slice(&int_in_range::<u32>(&leaf)?.to_le_bytes()),
            DataType::U64 => out.extend_from_slice(&int_in_range::<u64>(&leaf)?.to_le_bytes()),
            DataType::I8 => out.extend_from_slice(&int_in_range::<i8>(&leaf)?.to_le_bytes()),
            DataType::I16 => out.extend_from_slice(&int_in_range::<i16>(&leaf)?.to_le_bytes()),
            DataType::I32 => out.extend_from_slice(&int_in_range::<i32>(&leaf)?.to_le_bytes()),
            DataType::I64 => out.extend_from_slice(&int_in_range::<i64>(&leaf)?.to_le_bytes()),
            DataType::F16 => {
                let v = number(&leaf)?;
                let bits = f64_to_f16_bits(v).ok_or_else(|| format!("{v} is out of range"))?;
                out.extend_from_slice(&bits.to_le_bytes());
            }
            DataType::BF16 => {
                let v = number(&leaf)?;
                let bits = f64_to_bf16_bits(v).ok_or_else(|| format!("{v} is out of range"))?;
                out.extend_from_slice(&bits.to_le_bytes());
            }
            DataType::F32 => {
                let v = number(&leaf)?;
                let narrow = v as f32;
                if narrow.is_infinite() {
                    return Err(format!("{v} is out of range"));
                }
                out.extend_from_slice(&narrow.to_le_bytes());
            }
            DataType::F64 => out.extend_from_slice(&number(&leaf)?.to_le_bytes()),
            DataType::Bytes => match leaf {
                Leaf::Str(s) => self.strings.push(Bytes::copy_from_slice(s.as_bytes())),
                other => return Err(format!("expected a string, got {}", kind(&other))),
            },
        }
        Ok(())
    }
}

/// A JSON kind, for messages.
fn kind(leaf: &Leaf<'_>) -> &'static str {
    match leaf {
        Leaf::Bool(_) => "a boolean",
        Leaf::Unsigned(_) | Leaf::Signed(_) | Leaf::Float(_) => "a number",
        Leaf::Str(_) => "a string",
    }
}

/// A numeric leaf as `f64`.
fn number(leaf: &Leaf<'_>) -> Result<f64, String> {
    match *leaf {
        Leaf::Unsigned(u) => Ok(u as f64),
        Leaf::Signed(i) => Ok(i as f64),
        Leaf::Float(f) => Ok(f),
        ref other => Err(format!("expected a number, got {}", kind(other))),
    }
}

/// An integer leaf converted to `T`, refusing fractions and out-of-range
/// values.
fn int_in_range<T: TryFrom<i128>>(leaf: &Leaf<'_>) -> Result<T, String> {
    let wide: i128 = match *leaf {
        Leaf::Unsigned(u) => i128::from(u),
        Leaf::Signed(i) => i128::from(i),
        // Integral floats (`2.0`, `1e3`) are accepted; the bound keeps the
        // cast exact.
        Leaf::Float(f) if f.fract() == 0.0 && f.abs() < 1.7e38 => f as i128,
        Leaf::Float(f) => return Err(format!("{f} is not an integer")),
        ref other => return Err(format!("expected an integer, got {}", kind(other))),
    };
    T::try_from(wide).map_err(|_| format!("{wide} is out of range"))
}

/// The visitor for one JSON value at `depth` (0 = the `data` value).
struct Node<'c, 's> {
    ctx: &'c mut Ctx<'s>,
    depth: usize,
}

impl Node<'_, '_> {
    /// Records the first error. The walk goes on to the end of the value
    /// (every later element is skipped), so that the request around it is
    /// still read to its end when `data` is decoded in the same pass as the
    /// rest of the request ([`DataSeed`]); only JSON syntax errors stop it.
    fn fail(&mut self, err: V2Error) {
        if self.ctx.error.is_none() {
            self.ctx.error = Some(err);
        }
    }

    fn scalar<E: de::Error>(&mut self, leaf: Leaf<'_>) -> Result<(), E> {
        if self.ctx.error.is_none() {
            let depth = self.depth;
            if let Err(err) = self.ctx.leaf(depth, leaf) {
                self.fail(err);
            }
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of tensor elements")
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<(), E> {
        self.scalar(Leaf::Bool(v))
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<(), E> {
        self.scalar(Leaf::Unsigned(v))
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<(), E> {
        self.scalar(Leaf::Signed(v))
    }

    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<(), E> {
        self.scalar(Leaf::Float(v))
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.scalar(Leaf::Str(v))
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        let err = self.ctx.invalid("got null".to_owned());
        self.fail(err);
        Ok(())
    }

    fn visit_map<A: de::MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let err = self.ctx.invalid("got an object".to_owned());
        self.fail(err);
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let rank = self.ctx.shape.len();
        let depth = self.depth;
        if self.ctx.error.is_none()
            && (depth >= rank.max(1) || self.ctx.leaf_depth.is_some_and(|d| depth >= d))
        {
            let err = self.ctx.mismatch("arrays are nested deeper than the shape".to_owned());
            self.fail(err);
        }
        if self.ctx.error.is_some() {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        }
        let mut len = 0usize;
        while seq.next_element_seed(Node { ctx: &mut *self.ctx, depth: depth + 1 })?.is_some() {
            len += 1;
        }
        let nested = rank > 1 && self.ctx.leaf_depth == Some(rank);
        if self.ctx.error.is_none() && nested && self.ctx.shape.get(depth) != Some(&len) {
            let dim = self.ctx.shape.get(depth).copied().unwrap_or(0);
            let err = self.ctx.mismatch(format!(
                "an array at depth {depth} has {len} elements, dimension {depth} is {dim}"
            ));
            self.fail(err);
        }
        Ok(())
    }
}

/// Decodes an input's `data` value as `count` elements of `dtype` laid
/// out for `shape`, straight from the deserializer it is handed: the
/// request reader ([`super::raw_request`]) uses it to decode `data` in the
/// same pass as the rest of the request when the input's name, datatype
/// and shape came before it (as every client library writes them), so the
/// text of a large tensor is read once. A tensor error is the seed's
/// value (`Err`), not a deserializer error: the request is still read to
/// its end, and reported in the order the request's fields are validated.
pub(crate) struct DataSeed<'s> {
    /// The input's name, for messages.
    pub input: &'s str,
    /// Its datatype.
    pub dtype: DataType,
    /// Its shape.
    pub shape: &'s [usize],
    /// The shape's element count, already checked against the limits.
    pub count: usize,
    /// Characters of JSON the value can span at most (each element takes
    /// at least two), which bounds what is reserved up front whatever the
    /// declared shape.
    pub text_len: usize,
}

impl<'de> DeserializeSeed<'de> for DataSeed<'_> {
    type Value = Result<TensorData, V2Error>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let DataSeed { input, dtype, shape, count, .. } = self;
        if matches!(dtype, DataType::F32 | DataType::F64) {
            // Floats: the value's text, scanned by the fast path when it
            // is a flat array of numbers, else walked as below.
            let raw = <&'de RawValue as serde::Deserialize<'de>>::deserialize(deserializer)?;
            return Ok(parse_json_data(input, dtype, shape, count, raw));
        }
        Walk(self).deserialize(deserializer)
    }
}

/// The general walk of a `data` value (every layout and datatype; the one
/// that words the errors), element by element through serde's visitor.
struct Walk<'s>(DataSeed<'s>);

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = Result<TensorData, V2Error>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let DataSeed { input, dtype, shape, count, text_len } = self.0;
        let reserve = count.min(text_len / 2 + 1);
        let mut ctx = Ctx {
            input,
            dtype,
            shape,
            expected: count,
            fixed: Vec::with_capacity(dtype.element_size().map_or(0, |s| reserve * s)),
            strings: Vec::with_capacity(if dtype == DataType::Bytes { reserve } else { 0 }),
            count: 0,
            leaf_depth: None,
            error: None,
        };
        Node { ctx: &mut ctx, depth: 0 }.deserialize(deserializer)?;
        Ok(ctx.finish(count, dtype))
    }
}

impl Ctx<'_> {
    /// The walk's result: its first error, a count short of the shape's,
    /// or the tensor.
    fn finish(mut self, count: usize, dtype: DataType) -> Result<TensorData, V2Error> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        if self.count != count {
            return Err(self.mismatch(format!("expected {count} elements, got {}", self.count)));
        }
        Ok(match dtype {
            DataType::Bytes => TensorData::Strings(self.strings),
            _ => TensorData::Fixed(Bytes::from(self.fixed)),
        })
    }
}

/// Parses `raw` (an input's `data`, kept aside because it came before the
/// fields that say how to read it) as `count` elements of `dtype` laid out
/// for `shape`. `count` must be the shape's element count, already checked
/// against the limits.
pub fn parse_json_data(
    input: &str,
    dtype: DataType,
    shape: &[usize],
    count: usize,
    raw: &RawValue,
) -> Result<TensorData, V2Error> {
    match flat_floats(raw.get(), dtype, count) {
        Some(fixed) => Ok(TensorData::Fixed(Bytes::from(fixed))),
        None => parse_walked(input, dtype, shape, count, raw),
    }
}

/// [`parse_json_data`] by the general walk ([`Walk`]).
pub(crate) fn parse_walked(
    input: &str,
    dtype: DataType,
    shape: &[usize],
    count: usize,
    raw: &RawValue,
) -> Result<TensorData, V2Error> {
    let text = raw.get();
    let seed = Walk(DataSeed { input, dtype, shape, count, text_len: text.len() });
    let mut de = serde_json::Deserializer::from_str(text);
    match seed.deserialize(&mut de).and_then(|decoded| de.end().map(|()| decoded)) {
        Ok(decoded) => decoded,
        // `raw` is already valid JSON; only a reader limit (nesting) is left.
        Err(err) => Err(V2Error::InvalidElement {
            input: input.to_owned(),
            datatype: dtype.v2_name(),
            index: 0,
            reason: err.to_string(),
        }),
    }
}
