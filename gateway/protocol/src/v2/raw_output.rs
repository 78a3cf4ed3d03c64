//! One element of a request's `outputs` as sent: its `name` and
//! `parameters`, read in the first pass under the request's value budget
//! ([`super::bounded`]) and validated by [`super::request`]. Other fields
//! are ignored, as Triton ignores them.

use serde::de::{IgnoredAny, MapAccess};
use serde_json::Value;

use super::bounded::{BoundedValue, ReadGuard};
use super::element::{ObjectReader, Seen, Slot};
use super::json_seeds::{Key, NullOr};

/// An output object's fields as sent (`null` is absent).
pub(crate) struct RawOutput {
    /// `name`.
    pub name: Option<Value>,
    /// `parameters`.
    pub parameters: Option<Value>,
}

/// Reads an output object.
pub(crate) struct OutputReader<'g>(pub &'g ReadGuard);

impl<'de> ObjectReader<'de> for OutputReader<'_> {
    type Object = RawOutput;

    fn expecting(&self) -> &'static str {
        "an output object"
    }

    fn read<A: MapAccess<'de>>(self, mut map: A) -> Result<Slot<RawOutput>, A::Error> {
        let mut output = RawOutput { name: None, parameters: None };
        let mut seen = Seen::<2>::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let (index, field) = match key.0.as_ref() {
                "name" => (0, "name"),
                "parameters" => (1, "parameters"),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            if !seen.first(index, field) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = map.next_value_seed(NullOr(BoundedValue(self.0)))?;
            match index {
                0 => output.name = value,
                _ => output.parameters = value,
            }
        }
        Ok(seen.slot(output))
    }
}
