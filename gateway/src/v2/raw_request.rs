//! The first, syntactic reading of an infer request's JSON header: its
//! fields as sent, not yet validated ([`super::request`] validates them in
//! a fixed order, so a request with several faults always reports the same
//! one).
//!
//! One pass over the text. An input's `data` is decoded into its tensor
//! buffer as it is read ([`DataSeed`]) when the input's `name`, `datatype`
//! and `shape` came before it and are valid, which is the order every
//! client library writes; otherwise (fields in another order, or one of
//! them invalid) `data` is kept as raw text and decoded after validation,
//! as before. Either way the result is the same, and a malformed tensor is
//! reported where validation reaches it, not when the reader passes it.
//! The earlier reader skipped over every `data` twice (once to find the
//! request's fields, once the input's) before the typed pass.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use switchyard_runtime::tensor::{DataType, TensorData};

use super::error::V2Error;
use super::fields::parse_shape;
use super::json_data::DataSeed;
use super::limits::DecodeLimits;

/// The request object's fields as sent.
pub(crate) struct RawRequest<'a> {
    /// `id`.
    pub id: Option<Value>,
    /// `parameters`.
    pub parameters: Option<Value>,
    /// `inputs`, each read as far as it could be.
    pub inputs: Option<Vec<InputSlot<'a>>>,
    /// `outputs`, read later.
    pub outputs: Option<Vec<&'a RawValue>>,
}

/// One element of `inputs`: an object's fields as sent, or why it is not
/// one validation can read.
pub(crate) type InputSlot<'a> = Result<RawInput<'a>, InputFault>;

/// Why an element of `inputs` cannot be read as an input.
pub(crate) enum InputFault {
    /// An object with a field given twice.
    Duplicate(&'static str),
    /// Not an object.
    NotObject,
}

/// An input object's fields as sent.
#[derive(Default)]
pub(crate) struct RawInput<'a> {
    /// `name`.
    pub name: Option<Value>,
    /// `shape`.
    pub shape: Option<Value>,
    /// `datatype`.
    pub datatype: Option<Value>,
    /// `parameters`.
    pub parameters: Option<Value>,
    /// `data` (absent when missing or null).
    pub data: Option<DataField<'a>>,
}

/// An input's `data`: decoded while reading, or kept for later.
pub(crate) enum DataField<'a> {
    /// Decoded in the reading pass (with the input's own name, datatype
    /// and shape, which validation then checks again before using it).
    Decoded(Result<TensorData, V2Error>),
    /// Kept as text: the fields that say how to read it came after it or
    /// were invalid.
    Raw(&'a RawValue),
}

/// Reads a request object (the caller has checked the text is an object).
pub(crate) fn read_request<'a>(header: &'a [u8], limits: &DecodeLimits) -> Result<RawRequest<'a>, V2Error> {
    let mut de = serde_json::Deserializer::from_slice(header);
    let seed = RequestSeed { limits, text_len: header.len() };
    seed.deserialize(&mut de)
        .and_then(|raw| de.end().map(|()| raw))
        .map_err(|e| V2Error::InvalidJson(e.to_string()))
}

/// An object key, borrowed from the text when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Sets `slot` from the map's next value, or fails as serde's derived
/// readers do when the field was given before.
fn once<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
    slot: &mut Option<T>,
    seen: &mut bool,
    map: &mut A,
    field: &'static str,
) -> Result<(), A::Error> {
    if std::mem::replace(seen, true) {
        return Err(de::Error::duplicate_field(field));
    }
    *slot = map.next_value()?;
    Ok(())
}

struct RequestSeed<'l> {
    limits: &'l DecodeLimits,
    text_len: usize,
}

impl<'de> DeserializeSeed<'de> for RequestSeed<'_> {
    type Value = RawRequest<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_> {
    type Value = RawRequest<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an inference request JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut raw = RawRequest { id: None, parameters: None, inputs: None, outputs: None };
        let mut seen = [false; 4];
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.0.as_ref() {
                "id" => once(&mut raw.id, &mut seen[0], &mut map, "id")?,
                "parameters" => once(&mut raw.parameters, &mut seen[1], &mut map, "parameters")?,
                "inputs" => {
                    if std::mem::replace(&mut seen[2], true) {
                        return Err(de::Error::duplicate_field("inputs"));
                    }
                    raw.inputs =
                        map.next_value_seed(InputsSeed { limits: self.limits, text_len: self.text_len })?;
                }
                "outputs" => once(&mut raw.outputs, &mut seen[3], &mut map, "outputs")?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(raw)
    }
}

/// `inputs`: null or an array of input slots.
struct InputsSeed<'l> {
    limits: &'l DecodeLimits,
    text_len: usize,
}

impl<'de> DeserializeSeed<'de> for InputsSeed<'_> {
    type Value = Option<Vec<InputSlot<'de>>>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for InputsSeed<'_> {
    type Value = Option<Vec<InputSlot<'de>>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of inputs")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(InputList { limits: self.limits, text_len: self.text_len }).map(Some)
    }
}

/// The array of `inputs`.
struct InputList<'l> {
    limits: &'l DecodeLimits,
    text_len: usize,
}

impl<'de> Visitor<'de> for InputList<'_> {
    type Value = Vec<InputSlot<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of inputs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut inputs = Vec::new();
        loop {
            let index = inputs.len();
            let seed = InputSeed {
                limits: self.limits,
                text_len: self.text_len,
                eager: index < self.limits.max_inputs,
            };
            match seq.next_element_seed(seed)? {
                Some(slot) => inputs.push(slot),
                None => return Ok(inputs),
            }
        }
    }
}

/// One element of `inputs`.
struct InputSeed<'l> {
    limits: &'l DecodeLimits,
    text_len: usize,
    /// Whether `data` may be decoded in this pass (not past the input
    /// limit: validation refuses the request there anyway).
    eager: bool,
}

impl<'de> DeserializeSeed<'de> for InputSeed<'_> {
    type Value = InputSlot<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl InputSeed<'_> {
    /// How to decode `data` now, if the fields read so far say it fully
    /// and validation will accept them: name, datatype, shape (within the
    /// limits), and no `parameters` that would make `data` an error.
    fn plan<'r>(&self, input: &'r RawInput<'_>) -> Option<(&'r str, DataType, Vec<usize>, usize)> {
        if !self.eager {
            return None;
        }
        let Some(Value::String(name)) = &input.name else { return None };
        let Some(Value::String(datatype)) = &input.datatype else { return None };
        let dtype = DataType::from_v2_name(datatype)?;
        match &input.parameters {
            None | Some(Value::Null) => {}
            Some(Value::Object(p)) if !p.contains_key("binary_data_size") => {}
            Some(_) => return None,
        }
        let shape = parse_shape(input.shape.as_ref(), "", self.limits).ok()?;
        let count = self.limits.check_shape(name, &shape).ok()?;
        self.limits.check_rows(name, &shape).ok()?;
        Some((name, dtype, shape, count))
    }
}

/// Drains the rest of a sequence.
fn drain<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

impl<'de> Visitor<'de> for InputSeed<'_> {
    type Value = InputSlot<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an input object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut input = RawInput::default();
        let mut seen = [false; 5];
        let mut duplicate = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let (index, field) = match key.0.as_ref() {
                "name" => (0, "name"),
                "shape" => (1, "shape"),
                "datatype" => (2, "datatype"),
                "parameters" => (3, "parameters"),
                "data" => (4, "data"),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            if std::mem::replace(&mut seen[index], true) || duplicate.is_some() {
                duplicate = duplicate.or(Some(field));
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            match index {
                0 => input.name = map.next_value()?,
                1 => input.shape = map.next_value()?,
                2 => input.datatype = map.next_value()?,
                3 => input.parameters = map.next_value()?,
                _ => {
                    let data = match self.plan(&input) {
                        Some((name, dtype, shape, count)) => {
                            let seed = DataSeed {
                                input: name,
                                dtype,
                                shape: &shape,
                                count,
                                text_len: self.text_len,
                            };
                            map.next_value_seed(NullOr(seed))?.map(DataField::Decoded)
                        }
                        None => map.next_value::<Option<&'de RawValue>>()?.map(DataField::Raw),
                    };
                    input.data = data;
                }
            }
        }
        Ok(match duplicate {
            Some(field) => Err(InputFault::Duplicate(field)),
            None => Ok(input),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain(seq)?;
        Ok(Err(InputFault::NotObject))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err(InputFault::NotObject))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err(InputFault::NotObject))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err(InputFault::NotObject))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err(InputFault::NotObject))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Err(InputFault::NotObject))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Err(InputFault::NotObject))
    }
}

/// A seed for a value that may be `null` (then absent, as serde reads an
/// `Option`).
struct NullOr<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for NullOr<S> {
    type Value = Option<S::Value>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for NullOr<S> {
    type Value = Option<S::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(deserializer).map(Some)
    }
}
