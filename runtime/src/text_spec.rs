//! A text model's tokenizer settings ([`TextSpec`]): part of a
//! [`crate::ModelSpec`], read by the text stage ([`crate::text`]), which
//! owns the tokenizer itself. A leaf: it names no other module.

use std::path::PathBuf;

use serde::Deserialize;

/// The text stage of a model (`models[].tokenizer` in the gateway config).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextSpec {
    /// A HuggingFace `tokenizer.json`. Its own truncation and padding
    /// settings are replaced by `max_length` and `buckets`.
    pub tokenizer: PathBuf,
    /// Most tokens per text, special tokens included; longer texts are
    /// truncated (as sentence-transformers does), never refused.
    pub max_length: usize,
    /// Length buckets, ascending, the last equal to `max_length` (see
    /// [`TextSpec::default_buckets`]): requests batch together only within
    /// one bucket.
    pub buckets: Vec<usize>,
    /// Name of the public `BYTES` input (`text`).
    pub input: String,
}

impl TextSpec {
    /// Powers of two from 16 below `max_length`, then `max_length`:
    /// `[16, 32, 64, 128]` for 128: at most 2x padding inside a batch, and
    /// few enough groups that concurrent requests still meet in one.
    pub fn default_buckets(max_length: usize) -> Vec<usize> {
        let mut buckets: Vec<usize> = std::iter::successors(Some(16usize), |b| b.checked_mul(2))
            .take_while(|&b| b < max_length)
            .collect();
        buckets.push(max_length);
        buckets
    }

    /// Checks the spec on its own (the tokenizer file is read at
    /// registration): `max_length` of at least 2 (room for the special
    /// tokens), buckets ascending and ending at `max_length`, an input name.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_length < 2 {
            return Err("tokenizer.max_length must be at least 2".into());
        }
        if self.input.is_empty() {
            return Err("tokenizer.input must not be empty".into());
        }
        if self.buckets.windows(2).any(|w| w[0] >= w[1]) || self.buckets.first() == Some(&0) {
            return Err(format!("tokenizer.buckets {:?} must be positive and ascending", self.buckets));
        }
        if self.buckets.last() != Some(&self.max_length) {
            return Err(format!(
                "tokenizer.buckets {:?} must end at max_length {}",
                self.buckets, self.max_length
            ));
        }
        Ok(())
    }
}
