//! Token-id input: a client that tokenised its texts itself (OpenAI's
//! `input` as arrays of token ids) sends ids of the model's own
//! vocabulary. The runtime takes text, so the ids become the text they
//! spell, and are accepted only when that text tokenises back to exactly
//! those ids: the model then sees what the client sent, no more and no
//! less. Ids from another tokenizer (tiktoken's, which `langchain` sends
//! by default) fail that check instead of being embedded as nonsense.

use super::TextEncoder;
use tokenizers::Tokenizer;

/// The special tokens a tokenizer adds before and after each text.
#[derive(Debug, Clone, Default)]
pub(super) struct Frame {
    before: Vec<u32>,
    after: Vec<u32>,
}

impl Frame {
    /// Read off the encoding of a one-letter text: its leading and
    /// trailing special tokens.
    pub(super) fn of(tokenizer: &Tokenizer) -> tokenizers::Result<Frame> {
        let probe = tokenizer.encode_fast("a", true)?;
        let (ids, special) = (probe.get_ids(), probe.get_special_tokens_mask());
        let lead = special.iter().take_while(|&&s| s == 1).count();
        let trail = special[lead..].iter().rev().take_while(|&&s| s == 1).count();
        Ok(Frame { before: ids[..lead].to_vec(), after: ids[ids.len() - trail..].to_vec() })
    }

    /// `ids` without the frame, where it is there.
    fn strip<'a>(&self, ids: &'a [u32]) -> &'a [u32] {
        let ids = ids.strip_prefix(self.before.as_slice()).unwrap_or(ids);
        ids.strip_suffix(self.after.as_slice()).unwrap_or(ids)
    }
}

impl TextEncoder {
    /// The text whose tokens are `ids`: ids of this model's vocabulary,
    /// with or without the special tokens it puts around a text
    /// (`[CLS] ... [SEP]`). `Err` is the client's fault, said in words: no
    /// ids, an id outside the vocabulary, or ids that do not tokenise back
    /// to themselves (ids of another tokenizer, or a sequence this
    /// tokenizer never produces). Ids past `max_length` are truncated as
    /// a long text is.
    pub fn text_of_ids(&self, ids: &[u32]) -> Result<String, String> {
        let vocabulary = self.tokenizer.get_vocab_size(true);
        if let Some(id) = ids.iter().find(|&&id| id as usize >= vocabulary) {
            return Err(format!(
                "token id {id} is outside the model's vocabulary of {vocabulary} ids (ids from another tokenizer, such as tiktoken's?)"
            ));
        }
        let own = self.frame.strip(ids);
        if own.is_empty() {
            return Err("no token ids besides the special tokens around a text".into());
        }
        let text = self.tokenizer.decode(own, false).map_err(|e| format!("the ids do not decode: {e}"))?;
        let encoding =
            self.tokenize(&text).map_err(|e| format!("the decoded text does not tokenise: {e}"))?;
        let again = self.frame.strip(encoding.get_ids());
        let truncated = encoding.len() >= self.spec.max_length;
        if own != again && !(truncated && own.starts_with(again)) {
            return Err(format!(
                "the ids do not tokenise back to themselves with the model's tokenizer (they spell {:?}, which is {} tokens, not {}): send ids from the model's own tokenizer, or the text",
                super::prefix(&text, 80),
                again.len(),
                own.len()
            ));
        }
        Ok(text)
    }
}
