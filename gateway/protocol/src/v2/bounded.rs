//! Counting while reading: the first pass over a request's JSON
//! ([`super::raw_request`]) stops the moment a list passes its limit,
//! instead of building the whole list and checking its length afterwards.
//!
//! Two kinds of bound are kept here, both in a [`ReadGuard`] that lives
//! for one request:
//!
//! * a count limit of its own (`inputs`, `outputs`): the reader that walks
//!   the list calls [`ReadGuard::stop`] when one more element follows the
//!   last allowed one;
//! * every JSON value built as a `serde_json::Value` for the request's
//!   small fields (`id`, `parameters`, an input's `name`, `datatype`,
//!   `shape` and `parameters`, an output's `name` and `parameters`) is
//!   read by [`BoundedValue`], which takes one unit of
//!   [`DecodeLimits::max_json_values`] per value, scalars and nested
//!   elements alike.
//!
//! Tensor `data` is not counted here: it is decoded straight into its
//! buffer and its element count is checked against the declared shape as
//! it is read ([`super::json_data`]).
//!
//! Why: an 8 MiB body of `{"inputs":[{},{},...]}` holds 2.8 million
//! entries; built first and counted after, they took a gigabyte before the
//! 413. Each `Value` costs 32 bytes and more for a value of 2 to 3
//! characters of text, so a request's memory is bounded by the limits,
//! not by its body size.
//!
//! A stop unwinds the deserializer with a custom error; the caller asks
//! [`ReadGuard::error`] for the limit's own [`V2Error`] (413) to report.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::error::V2Error;
use super::limits::DecodeLimits;

/// What one request's reading may still build, and the limit that stopped
/// it, if one did.
pub(crate) struct ReadGuard {
    values_left: Cell<usize>,
    max_values: usize,
    stopped: Cell<Option<V2Error>>,
}

impl ReadGuard {
    /// A guard with the whole value budget of `limits`.
    pub fn new(limits: &DecodeLimits) -> ReadGuard {
        ReadGuard {
            values_left: Cell::new(limits.max_json_values),
            max_values: limits.max_json_values,
            stopped: Cell::new(None),
        }
    }

    /// Stops the reading because of `err` (a limit): keeps `err` for
    /// [`Self::error`] and returns the deserializer error that unwinds the
    /// reading.
    pub fn stop<E: de::Error>(&self, err: V2Error) -> E {
        let message = err.to_string();
        self.stopped.set(Some(err));
        E::custom(message)
    }

    /// Takes one value from the budget, or stops the reading.
    fn take<E: de::Error>(&self) -> Result<(), E> {
        match self.values_left.get().checked_sub(1) {
            Some(left) => {
                self.values_left.set(left);
                Ok(())
            }
            None => Err(self.stop(V2Error::TooLarge(format!(
                "the request's ids, names, shapes and parameters hold more than {} JSON values",
                self.max_values
            )))),
        }
    }

    /// The error to report for a failed reading: the limit that stopped
    /// it, or else `other(err)` (the deserializer's own error: syntax, a
    /// wrong type).
    pub fn error(&self, err: serde_json::Error, other: impl FnOnce(serde_json::Error) -> V2Error) -> V2Error {
        match self.stopped.take() {
            Some(limit) => limit,
            None => other(err),
        }
    }
}

/// A seed that reads any JSON value into a `serde_json::Value`, counting
/// every value it builds (the value itself, each array element and each
/// object entry, at any depth) against the guard's budget.
#[derive(Clone, Copy)]
pub(crate) struct BoundedValue<'g>(pub &'g ReadGuard);

impl<'de> DeserializeSeed<'de> for BoundedValue<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.0.take()?;
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BoundedValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self)?;
            entries.insert(key, value);
        }
        Ok(Value::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, max_json_values: usize) -> Result<Value, V2Error> {
        let guard = ReadGuard::new(&DecodeLimits { max_json_values, ..DecodeLimits::default() });
        let mut de = serde_json::Deserializer::from_str(text);
        BoundedValue(&guard)
            .deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
            .map_err(|e| guard.error(e, |e| V2Error::InvalidJson(e.to_string())))
    }

    #[test]
    fn values_read_as_serde_reads_them() {
        for text in [r#"{"a":[1,-2,2.5,"x",null,true],"b":{"c":{}}}"#, "[]", "3", r#""\u00e9""#] {
            let expected: Value = serde_json::from_str(text).unwrap();
            assert_eq!(read(text, 100), Ok(expected), "{text}");
        }
    }

    #[test]
    fn every_value_at_any_depth_counts() {
        // The object, its two entries, the array's three elements: 6.
        let text = r#"{"a":[1,[2]],"b":0}"#;
        assert!(read(text, 6).is_ok());
        let err = read(text, 5).unwrap_err();
        assert_eq!(err.status(), 413);
        assert!(err.to_string().contains("more than 5 JSON values"), "{err}");
    }

    #[test]
    fn a_syntax_error_is_not_taken_for_a_limit() {
        assert!(matches!(read("[1,", 100), Err(V2Error::InvalidJson(_))));
    }
}
