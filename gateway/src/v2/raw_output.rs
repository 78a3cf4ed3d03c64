//! One element of a request's `outputs` as sent: its `name` and
//! `parameters`, read under the request's value budget
//! ([`super::bounded`]) and validated by [`super::request`]. Other fields
//! are ignored, as Triton ignores them.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::bounded::{BoundedValue, ReadGuard};
use super::raw_request::NullOr;

/// An output object's fields as sent (`null` is absent).
pub(crate) struct RawOutput {
    /// `name`.
    pub name: Option<Value>,
    /// `parameters`.
    pub parameters: Option<Value>,
}

/// Reads an output object (the caller has checked the text is an object).
pub(crate) struct OutputSeed<'g>(pub &'g ReadGuard);

impl<'de> DeserializeSeed<'de> for OutputSeed<'_> {
    type Value = RawOutput;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<RawOutput, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for OutputSeed<'_> {
    type Value = RawOutput;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an output object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawOutput, A::Error> {
        let mut output = RawOutput { name: None, parameters: None };
        let mut seen = [false; 2];
        while let Some(key) = map.next_key::<String>()? {
            let (slot, index, field) = match key.as_str() {
                "name" => (&mut output.name, 0, "name"),
                "parameters" => (&mut output.parameters, 1, "parameters"),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            if std::mem::replace(&mut seen[index], true) {
                return Err(de::Error::duplicate_field(field));
            }
            *slot = map.next_value_seed(NullOr(BoundedValue(self.0)))?;
        }
        Ok(output)
    }
}
