//! The bound on text before tokenisation
//! (`switchyard_runtime::text::prefix`): a long text is cut to at
//! most `limit` bytes, at a whitespace when there is one, never inside a
//! character.
//!
//! Input layout: the first 2 bytes are the limit (little-endian u16); the
//! rest is the text (invalid UTF-8 replaced, as the gateway never passes
//! invalid UTF-8 on).

use switchyard_runtime::text::prefix;

/// Cuts the text and checks the cut.
pub fn run(data: &[u8]) {
    let Some((limit, rest)) = data.split_first_chunk::<2>() else { return };
    let limit = usize::from(u16::from_le_bytes(*limit));
    let text = String::from_utf8_lossy(rest);
    let cut = prefix(&text, limit);
    assert!(text.starts_with(cut), "not a prefix");
    if text.len() <= limit {
        assert_eq!(cut, text, "a text within the limit was cut");
    } else {
        assert!(cut.len() <= limit, "{} bytes kept, limit {limit}", cut.len());
        // Cut at a whitespace, or else as close to the limit as a character allows.
        let at_space = text[cut.len()..].starts_with(char::is_whitespace);
        let longest = (0..=limit).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        assert!(at_space || cut.len() == longest, "cut at {} of {}, limit {limit}", cut.len(), text.len());
    }
}
