//! Triton's model configuration schema (compiled from
//! `runtime/proto/triton_model_config.proto` at build time, see
//! `runtime/build.rs`) and the protobuf text-format parser for
//! `config.pbtxt`: `prost-reflect`'s, a real parser, so comments, nesting,
//! repeated fields in either spelling (`dims: [1, 2]` or repeated
//! `dims: 1`), enums and maps all read as Triton reads them.
//!
//! One gap of that parser is bridged first: the text format lets a list of
//! messages follow its field name without a colon (`input [ { ... } ]`,
//! the usual spelling in Triton's examples), which `prost-reflect` 0.16
//! refuses. [`add_list_colons`] is a lexer pass (it skips strings and
//! comments) that writes the optional colon (`input: [ { ... } ]`, the
//! same message); error positions are mapped back to the original text.

use std::sync::OnceLock;

use miette::Diagnostic;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};

/// The compiled descriptor set.
const DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/triton_model_config.bin"));

/// The full name of the configuration message.
const MODEL_CONFIG: &str = "inference.ModelConfig";

/// `inference.ModelConfig`'s descriptor, or why the embedded schema is
/// unusable (a build defect, reported rather than panicking).
fn model_config() -> Result<MessageDescriptor, String> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    let pool = POOL.get_or_init(|| DescriptorPool::decode(DESCRIPTOR_SET).map_err(|e| e.to_string()));
    let pool = pool.as_ref().map_err(|e| format!("the embedded Triton schema is unreadable: {e}"))?;
    pool.get_message_by_name(MODEL_CONFIG).ok_or_else(|| format!("the embedded schema lacks {MODEL_CONFIG}"))
}

/// A parse failure: where (1-based line and column, when known) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFormatError {
    /// Line and column of the offending token.
    pub position: Option<(usize, usize)>,
    /// The parser's explanation (`field 'dynamic_batchin' not found for
    /// message 'inference.ModelConfig'`).
    pub reason: String,
}

/// Parses a `config.pbtxt` into a dynamic `inference.ModelConfig`.
pub fn parse_config(text: &str) -> Result<DynamicMessage, TextFormatError> {
    let desc = model_config().map_err(|reason| TextFormatError { position: None, reason })?;
    let (normalized, inserted) = add_list_colons(text);
    DynamicMessage::parse_text_format(desc, &normalized).map_err(|e| {
        let offset = e.labels().and_then(|mut labels| labels.next()).map(|l| l.offset());
        let original = offset.map(|o| o - inserted.iter().enumerate().filter(|(k, p)| o > **p + k).count());
        TextFormatError { position: original.map(|o| line_column(text, o)), reason: e.to_string() }
    })
}

/// What the previous significant token was, for [`add_list_colons`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// A field name may come next (start, `{`, `}`, a value...).
    Other,
    /// `:` or `[`: an identifier here is a value, not a field name.
    ValueExpected,
    /// An identifier in field-name position, ending at this byte.
    FieldName(usize),
}

/// Writes the optional `:` between a field name and a `[` that opens a
/// list of messages. Returns the new text and the byte offsets (in `text`)
/// where a colon was inserted.
pub fn add_list_colons(text: &str) -> (String, Vec<usize>) {
    let bytes = text.as_bytes();
    let (mut out, mut inserted) = (String::with_capacity(text.len() + 16), Vec::new());
    let (mut prev, mut i, mut copied) = (Prev::Other, 0, 0);
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'#' => i = text[i..].find('\n').map_or(bytes.len(), |n| i + n),
            b'"' | b'\'' => {
                i = string_end(bytes, i);
                prev = Prev::Other;
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let end = text[i..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                    .map_or(bytes.len(), |n| i + n);
                prev = if prev == Prev::ValueExpected { Prev::Other } else { Prev::FieldName(end) };
                i = end;
            }
            b if b.is_ascii_whitespace() => i += 1,
            _ => {
                if let (b'[', Prev::FieldName(end)) = (b, prev) {
                    out.push_str(&text[copied..end]);
                    out.push(':');
                    inserted.push(end);
                    copied = end;
                }
                prev = if matches!(b, b':' | b'[') { Prev::ValueExpected } else { Prev::Other };
                i += 1;
            }
        }
    }
    out.push_str(&text[copied..]);
    (out, inserted)
}

/// The index after the string literal starting at `start` (its quote).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() && bytes[i] != quote && bytes[i] != b'\n' {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    (i + 1).min(bytes.len())
}

/// 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_both_repeated_spellings_and_comments() {
        let text = "# a comment\nname: \"m\"\ninput [{ name: \"X\" data_type: TYPE_FP32 dims: [ 64 ] }]\n\
                    input { name: \"Y\" data_type: TYPE_INT64 dims: 1 dims: 2 }\n";
        let msg = parse_config(text).unwrap();
        let inputs = msg.get_field_by_name("input").unwrap();
        assert_eq!(inputs.as_list().unwrap().len(), 2);
    }

    #[test]
    fn errors_say_where() {
        let err = parse_config("name: \"m\"\n\nmax_batch_sise: 8\n").unwrap_err();
        assert_eq!(err.position, Some((3, 1)), "{err:?}");
        assert!(err.reason.contains("max_batch_sise"), "{err:?}");
        let err = parse_config("instance_group [{ kind: KIND_TPU }]").unwrap_err();
        assert!(err.reason.contains("KIND_TPU"), "{err:?}");
        assert_eq!(err.position, Some((1, 25)), "positions refer to the original text: {err:?}");
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
    }

    #[test]
    fn list_colons_only_after_field_names() {
        let (out, at) = add_list_colons("input [ { dims: [ 1 ] } ]\n# x [\nname: \"a [b\" output\n[ {} ]");
        assert_eq!(out, "input: [ { dims: [ 1 ] } ]\n# x [\nname: \"a [b\" output:\n[ {} ]");
        assert_eq!(at, [5, 51]);
        let same = "kind: KIND_GPU\ndims: [ -1 ]\nx: 'it\\'s [' y: [A, B]";
        assert_eq!(add_list_colons(same).0, same);
    }
}
