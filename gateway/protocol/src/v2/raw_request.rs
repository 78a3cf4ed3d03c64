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
//!
//! Nothing is built past a limit: the `inputs` and `outputs` lists stop at
//! the first element past their limit, and every other field is read
//! under the request's value budget ([`super::bounded`]). A request that
//! passes a limit is therefore answered with that limit's 413 whatever
//! else is wrong with it.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use switchyard_runtime::tensor::{DataType, TensorData};

use super::bounded::{BoundedValue, ReadGuard};
use super::element::{Element, ObjectReader, Seen, Slot};
use super::error::V2Error;
use super::fields::parse_shape;
use super::json_data::DataSeed;
use super::json_seeds::{Key, NullOr};
use super::limits::DecodeLimits;
use super::raw_output::{OutputReader, RawOutput};

/// The request object's fields as sent.
pub(crate) struct RawRequest<'a> {
    /// `id`.
    pub id: Option<Value>,
    /// `parameters`.
    pub parameters: Option<Value>,
    /// `inputs`, each read as far as it could be.
    pub inputs: Option<Vec<InputSlot<'a>>>,
    /// `outputs`, each read as far as it could be.
    pub outputs: Option<Vec<Slot<RawOutput>>>,
}

/// One element of `inputs`: an object's fields as sent, or why it is not
/// one validation can read.
pub(crate) type InputSlot<'a> = Slot<RawInput<'a>>;

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

/// Reads a request object (the caller has checked the text is an object)
/// under `guard`'s limits.
pub(crate) fn read_request<'a>(
    header: &'a [u8],
    limits: &DecodeLimits,
    guard: &ReadGuard,
) -> Result<RawRequest<'a>, V2Error> {
    let mut de = serde_json::Deserializer::from_slice(header);
    let seed = RequestSeed { limits, guard, text_len: header.len() };
    seed.deserialize(&mut de)
        .and_then(|raw| de.end().map(|()| raw))
        .map_err(|e| guard.error(e, |e| V2Error::InvalidJson(e.to_string())))
}

/// Sets `slot` from the map's next value (`null` is absent), read under
/// `guard`'s value budget, or fails as serde's derived readers do when the
/// field was given before.
fn once<'de, A: MapAccess<'de>>(
    slot: &mut Option<Value>,
    seen: &mut bool,
    map: &mut A,
    field: &'static str,
    guard: &ReadGuard,
) -> Result<(), A::Error> {
    if std::mem::replace(seen, true) {
        return Err(de::Error::duplicate_field(field));
    }
    *slot = map.next_value_seed(NullOr(BoundedValue(guard)))?;
    Ok(())
}

struct RequestSeed<'l> {
    limits: &'l DecodeLimits,
    guard: &'l ReadGuard,
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
            let guard = self.guard;
            match key.0.as_ref() {
                "id" => once(&mut raw.id, &mut seen[0], &mut map, "id", guard)?,
                "parameters" => once(&mut raw.parameters, &mut seen[1], &mut map, "parameters", guard)?,
                "inputs" => {
                    if std::mem::replace(&mut seen[2], true) {
                        return Err(de::Error::duplicate_field("inputs"));
                    }
                    let list = InputList { limits: self.limits, guard, text_len: self.text_len };
                    raw.inputs = map.next_value_seed(NullOr(Seq(list)))?;
                }
                "outputs" => {
                    if std::mem::replace(&mut seen[3], true) {
                        return Err(de::Error::duplicate_field("outputs"));
                    }
                    let list = OutputList { max: self.limits.max_outputs, guard };
                    raw.outputs = map.next_value_seed(NullOr(Seq(list)))?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(raw)
    }
}

/// A seed for an array read by the visitor it holds.
struct Seq<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Seq<V> {
    type Value = V::Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self.0)
    }
}

/// Whether `seq` has an element after the `max` already read; if so,
/// stops the reading with a 413 naming the `what` limit.
fn past_limit<'de, A: SeqAccess<'de>>(
    seq: &mut A,
    guard: &ReadGuard,
    max: usize,
    what: &str,
) -> Result<(), A::Error> {
    match seq.next_element::<IgnoredAny>()? {
        Some(_) => Err(guard.stop(V2Error::TooLarge(format!("more than {max} {what}, the limit is {max}")))),
        None => Ok(()),
    }
}

/// The array of `inputs`, read up to the input limit.
struct InputList<'l> {
    limits: &'l DecodeLimits,
    guard: &'l ReadGuard,
    text_len: usize,
}

impl<'de> Visitor<'de> for InputList<'_> {
    type Value = Vec<InputSlot<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of inputs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut inputs = Vec::new();
        while inputs.len() < self.limits.max_inputs {
            let seed = InputReader { limits: self.limits, guard: self.guard, text_len: self.text_len };
            match seq.next_element_seed(Element(seed))? {
                Some(slot) => inputs.push(slot),
                None => return Ok(inputs),
            }
        }
        past_limit(&mut seq, self.guard, self.limits.max_inputs, "inputs")?;
        Ok(inputs)
    }
}

/// The array of `outputs`, read up to the output limit.
struct OutputList<'l> {
    max: usize,
    guard: &'l ReadGuard,
}

impl<'de> Visitor<'de> for OutputList<'_> {
    type Value = Vec<Slot<RawOutput>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut outputs = Vec::new();
        while outputs.len() < self.max {
            match seq.next_element_seed(Element(OutputReader(self.guard)))? {
                Some(output) => outputs.push(output),
                None => return Ok(outputs),
            }
        }
        past_limit(&mut seq, self.guard, self.max, "requested outputs")?;
        Ok(outputs)
    }
}

/// Reads an input object.
struct InputReader<'l> {
    limits: &'l DecodeLimits,
    guard: &'l ReadGuard,
    text_len: usize,
}

impl InputReader<'_> {
    /// How to decode `data` now, if the fields read so far say it fully
    /// and validation will accept them: name, datatype, shape (within the
    /// limits and fitting the model's signature when the limits carry
    /// it), and no `parameters` that would make `data` an error.
    fn plan<'r>(&self, input: &'r RawInput<'_>) -> Option<(&'r str, DataType, Vec<usize>, usize)> {
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
        self.limits.check_signature(name, dtype, &shape).ok()?;
        Some((name, dtype, shape, count))
    }
}

impl<'de> ObjectReader<'de> for InputReader<'_> {
    type Object = RawInput<'de>;

    fn expecting(&self) -> &'static str {
        "an input object"
    }

    fn read<A: MapAccess<'de>>(self, mut map: A) -> Result<InputSlot<'de>, A::Error> {
        let mut input = RawInput::default();
        let mut seen = Seen::<5>::new();
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
            if !seen.first(index, field) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = NullOr(BoundedValue(self.guard));
            match index {
                0 => input.name = map.next_value_seed(value)?,
                1 => input.shape = map.next_value_seed(value)?,
                2 => input.datatype = map.next_value_seed(value)?,
                3 => input.parameters = map.next_value_seed(value)?,
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
        Ok(seen.slot(input))
    }
}
