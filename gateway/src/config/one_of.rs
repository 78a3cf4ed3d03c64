//! [`OneOf`]: a field whose value is one word of a closed set (a pool's
//! `device`, an upstream's `kind`, a draft's `mode`), read through the
//! set's own serde enum.
//!
//! An unknown word is kept, not refused by serde: serde stops at its first
//! error, and the word would hide every other mistake of the file. The
//! section's check reports it at its field path instead, with the words
//! serde knows (`unknown device "tpu": use "cpu" or "cuda"`). A value that
//! is not a string at all is still a serde error.

use super::issue::Issues;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Deserializer, IntoDeserializer};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;

/// A word as written, and what the enum `T` made of it.
#[derive(Debug, Clone, PartialEq)]
pub struct OneOf<T> {
    text: String,
    value: Result<T, &'static [&'static str]>,
}

impl<T: DeserializeOwned> From<&str> for OneOf<T> {
    /// Reads `text` as `T` does in a config file.
    fn from(text: &str) -> Self {
        let value = T::deserialize(text.into_deserializer()).map_err(|NotOneOf(known)| known);
        OneOf { text: text.to_string(), value }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for OneOf<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(OneOf::from(String::deserialize(deserializer)?.as_str()))
    }
}

/// In the JSON Schema a `OneOf<T>` is what `T` is: one of its words (the
/// check that keeps an unknown word for a field-path error is not the
/// schema's business).
impl<T: JsonSchema> JsonSchema for OneOf<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

impl<T: Copy> OneOf<T> {
    /// The word as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The value, or `None` after reporting at `path` that the word is no
    /// `what` (e.g. `device`) of the set.
    pub fn check(&self, what: &str, path: impl Into<String>, issues: &mut Issues) -> Option<T> {
        match self.value {
            Ok(value) => Some(value),
            Err(known) => {
                let mut listed: Vec<String> = known.iter().map(|k| format!("{k:?}")).collect();
                let last = listed.pop().unwrap_or_default();
                let words = if listed.is_empty() { last } else { format!("{} or {last}", listed.join(", ")) };
                issues.push(path, format!("unknown {what} {:?}: use {words}", self.text));
                None
            }
        }
    }
}

/// The error a word that is no variant of the enum gives: serde's list
/// of the variants' names (empty for any other error, which a unit-variant
/// enum read from a string never gives).
#[derive(Debug)]
struct NotOneOf(&'static [&'static str]);

impl serde::de::Error for NotOneOf {
    fn custom<M: fmt::Display>(_: M) -> Self {
        NotOneOf(&[])
    }

    fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
        NotOneOf(expected)
    }
}

impl fmt::Display for NotOneOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not one of {:?}", self.0)
    }
}

impl std::error::Error for NotOneOf {}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Parallel,
        Sequential,
        Off,
    }

    #[test]
    fn known_words_are_values_and_unknown_ones_are_reported_with_the_set() {
        let mut issues = Issues::default();
        assert_eq!(OneOf::<Mode>::from("off").check("mode", "m", &mut issues), Some(Mode::Off));
        assert!(issues.is_empty());
        let eager = OneOf::<Mode>::from("eager");
        assert_eq!(eager.text(), "eager");
        assert_eq!(eager.check("mode", "routes[0].draft.mode", &mut issues), None);
        assert_eq!(
            issues[0].to_string(),
            "routes[0].draft.mode: unknown mode \"eager\": use \"parallel\", \"sequential\" or \"off\""
        );
    }

    #[test]
    fn a_word_is_read_from_toml_and_a_number_is_a_type_error() {
        #[derive(Deserialize)]
        struct Table {
            mode: OneOf<Mode>,
        }
        let table: Table = toml::from_str("mode = \"sequential\"").unwrap();
        assert_eq!(table.mode.check("mode", "m", &mut Issues::default()), Some(Mode::Sequential));
        let err = toml::from_str::<Table>("mode = 3").err().unwrap();
        assert!(err.message().contains("expected a string"), "{err}");
    }
}
