//! A model's `tokenizer = { ... }`: makes it a text model whose public
//! input is one `BYTES` tensor of UTF-8 strings, tokenised by the runtime
//! before the graph runs (see `switchyard_runtime::text`).
//!
//! ```toml
//! [[models]]
//! name = "minilm-l6"
//! path = "minilm-l6.onnx"
//! tokenizer = { path = "minilm-tokenizer.json", max_length = 128 }
//! ```

use super::issue::Issues;
use super::schema_default::some_usize;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use switchyard_runtime::TextSpec;

/// Longest token sequence when `max_length` is left out: what
/// sentence-transformers uses for the MiniLM models.
pub const DEFAULT_MAX_LENGTH: usize = 128;

/// Name of the public `BYTES` input when `input` is left out.
pub const DEFAULT_INPUT: &str = "text";

/// `models[].tokenizer` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTokenizer {
    /// A HuggingFace `tokenizer.json`, relative to the repository folder.
    pub path: String,
    /// Most tokens per text (special tokens included); longer texts are
    /// truncated. Default 128.
    #[schemars(default = "some_usize::<DEFAULT_MAX_LENGTH>", range(min = 2))]
    pub max_length: Option<usize>,
    /// Length buckets, ascending: requests batch together only within one
    /// bucket (and are padded to the batch's longest text). Default powers
    /// of two from 16, then `max_length`, which is added when the list
    /// stops short of it.
    pub buckets: Option<Vec<usize>>,
    /// Name of the public `BYTES` input, default `text`.
    #[schemars(default = "default_input")]
    pub input: Option<String>,
}

/// The schema's `models[].tokenizer.input` default.
fn default_input() -> Option<&'static str> {
    Some(DEFAULT_INPUT)
}

/// The runtime's [`TextSpec`] for `raw`, with problems reported under
/// `{path}.tokenizer`.
pub fn check(
    raw: Option<&RawTokenizer>,
    repo_dir: &Path,
    path: &str,
    issues: &mut Issues,
) -> Option<TextSpec> {
    let raw = raw?;
    let max_length = raw.max_length.unwrap_or(DEFAULT_MAX_LENGTH);
    let mut buckets = raw.buckets.clone().unwrap_or_else(|| TextSpec::default_buckets(max_length));
    if buckets.last().is_some_and(|&b| b < max_length) {
        buckets.push(max_length);
    }
    let file = PathBuf::from(&raw.path);
    let spec = TextSpec {
        tokenizer: if file.is_absolute() { file } else { repo_dir.join(file) },
        max_length,
        buckets,
        input: raw.input.clone().unwrap_or_else(|| DEFAULT_INPUT.into()),
    };
    if let Err(message) = spec.validate() {
        let field = message.split_whitespace().next().unwrap_or("tokenizer").to_string();
        issues.push(format!("{path}.{field}"), message);
        return None;
    }
    Some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigIssue;

    fn checked(raw: RawTokenizer) -> (Option<TextSpec>, Vec<ConfigIssue>) {
        let mut issues = Issues::default();
        (super::check(Some(&raw), Path::new("/repo"), "models[0]", &mut issues), issues.into_vec())
    }

    fn raw(max_length: Option<usize>, buckets: Option<Vec<usize>>) -> RawTokenizer {
        RawTokenizer { path: "tok.json".into(), max_length, buckets, input: None }
    }

    #[test]
    fn defaults_and_relative_path() {
        let (spec, issues) = checked(raw(None, None));
        assert!(issues.is_empty(), "{issues:?}");
        let spec = spec.unwrap();
        assert_eq!(spec.tokenizer, PathBuf::from("/repo/tok.json"));
        assert_eq!(
            (spec.max_length, spec.buckets, spec.input.as_str()),
            (128, vec![16, 32, 64, 128], "text")
        );
    }

    #[test]
    fn buckets_are_completed_up_to_max_length() {
        let (spec, _) = checked(raw(Some(64), Some(vec![8, 24])));
        assert_eq!(spec.unwrap().buckets, vec![8, 24, 64]);
    }

    #[test]
    fn mistakes_name_the_field() {
        let (spec, issues) = checked(raw(Some(1), None));
        assert!(spec.is_none());
        assert_eq!(issues[0].path, "models[0].tokenizer.max_length", "{issues:?}");
        let (_, issues) = checked(raw(Some(64), Some(vec![32, 16])));
        assert_eq!(issues[0].path, "models[0].tokenizer.buckets", "{issues:?}");
        let (_, issues) = checked(raw(Some(64), Some(vec![16, 128])));
        assert!(issues[0].message.contains("end at max_length"), "{issues:?}");
    }
}
