//! [`TextEncoder`]: one model's tokenizer and the token tensors its graph
//! takes. Built once at registration, shared by every request (`encode`
//! takes `&self`; the `tokenizers` crate's `Tokenizer` is `Sync`).

use bytes::Bytes;
use tokenizers::{Encoding, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::error::RuntimeError;
use crate::request::InferenceRequest;
use crate::signature::{ModelSignature, TensorSpec};
use crate::tensor::{DataType, Tensor, TensorData};
use crate::text_spec::TextSpec;

use super::groups::RowGroup;

mod token_ids;

/// A token tensor a transformer graph takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    /// `input_ids`: token ids, padded with the tokenizer's pad id.
    Ids,
    /// `attention_mask`: 1 for tokens, 0 for padding.
    Mask,
    /// `token_type_ids`: segment ids (0 for a single text), padded with
    /// the pad type id.
    TypeIds,
}

impl Feed {
    fn from_name(name: &str) -> Option<Feed> {
        match name {
            "input_ids" => Some(Feed::Ids),
            "attention_mask" => Some(Feed::Mask),
            "token_type_ids" => Some(Feed::TypeIds),
            _ => None,
        }
    }
}

/// Tokenises a model's `BYTES` input into its token tensors.
#[derive(Debug)]
pub struct TextEncoder {
    tokenizer: Tokenizer,
    spec: TextSpec,
    pad_id: i64,
    pad_type_id: i64,
    /// The graph's inputs, in graph order.
    feeds: Vec<(String, Feed)>,
    /// The special tokens the tokenizer puts before and after every text
    /// (`[CLS]` and `[SEP]` for BERT's): what token-id input may carry
    /// around the text's own tokens.
    frame: token_ids::Frame,
}

impl TextEncoder {
    /// Reads the tokenizer and matches the graph's inputs. Fails (with a
    /// reason for the operator) when the file cannot be read, or when the
    /// graph takes anything but INT64 `[batch, sequence]` token tensors
    /// named `input_ids`, `attention_mask` (both required) and
    /// `token_type_ids` (optional).
    pub fn new(spec: &TextSpec, graph: &ModelSignature) -> Result<TextEncoder, String> {
        spec.validate()?;
        let mut tokenizer = Tokenizer::from_file(&spec.tokenizer)
            .map_err(|e| format!("tokenizer {}: {e}", spec.tokenizer.display()))?;
        let (pad_id, pad_type_id) = match tokenizer.get_padding() {
            Some(p) => (p.pad_id, p.pad_type_id),
            None => (tokenizer.token_to_id("[PAD]").unwrap_or(0), 0),
        };
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: spec.max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| format!("tokenizer {}: {e}", spec.tokenizer.display()))?;
        let feeds = graph_feeds(graph)?;
        let frame = token_ids::Frame::of(&tokenizer)
            .map_err(|e| format!("tokenizer {}: {e}", spec.tokenizer.display()))?;
        Ok(TextEncoder {
            tokenizer,
            spec: spec.clone(),
            pad_id: pad_id.into(),
            pad_type_id: pad_type_id.into(),
            feeds,
            frame,
        })
    }

    /// The stage's settings.
    pub fn spec(&self) -> &TextSpec {
        &self.spec
    }

    /// What clients see: the `BYTES` input (`[-1, 1]`: one string per row,
    /// as Triton declares text inputs with `dims: [1]`, which is what
    /// `perf_analyzer` reads; `[N]` is accepted too) in place of the token
    /// tensors, and the graph's outputs unchanged.
    pub fn public_signature(&self, graph: &ModelSignature) -> ModelSignature {
        ModelSignature {
            inputs: vec![TensorSpec {
                name: self.spec.input.clone(),
                dtype: DataType::Bytes,
                shape: vec![-1, 1],
            }],
            outputs: graph.outputs.clone(),
        }
    }

    /// Turns a request carrying the `BYTES` input into one carrying the
    /// graph's token tensors, `[rows, longest]` each: every text padded to
    /// the request's longest (so a request that runs alone pays for no
    /// padding; the batcher pads further when it merges requests, see
    /// [`Self::pad_values`] and [`Self::bucket`]). Requested outputs are kept.
    ///
    /// Errors are the client's (400): an input other than the text input,
    /// no text input, a datatype other than `BYTES`, a shape other than
    /// `[N]` / `[N, 1]` with N >= 1, or a string that is not UTF-8. Texts
    /// longer than `max_length` tokens are truncated, not refused.
    pub fn encode(&self, model: &str, req: InferenceRequest) -> Result<InferenceRequest, RuntimeError> {
        self.encode_within(model, req, usize::MAX)
    }

    /// [`Self::encode`], refusing (`TooLarge`, setting `max_tokens`) a
    /// request whose texts hold more than `max_tokens` tokens in all, after
    /// truncation; counted as the texts are tokenised, so the refusal
    /// comes before the rest is tokenised. Only the first
    /// `max_length x` [`PREFIX_BYTES_PER_TOKEN`] bytes of a text are
    /// tokenised (cut at whitespace; see [`prefix`]).
    pub fn encode_within(
        &self,
        model: &str,
        req: InferenceRequest,
        max_tokens: usize,
    ) -> Result<InferenceRequest, RuntimeError> {
        let encodings = self.encodings(model, &req, max_tokens)?;
        let all: Vec<&Encoding> = encodings.iter().collect();
        self.request_of(model, &all, req.outputs)
    }

    /// [`Self::encode_within`], with the rows grouped by length bucket
    /// ([`Self::bucket`]) when `by_bucket`: one request per bucket the
    /// texts fall in, each padded to its own longest text, with the
    /// positions its rows have in the request (increasing). Without
    /// `by_bucket`, or when every text falls in one bucket, one group of
    /// every row in order. Why: a request is padded to its longest text,
    /// so 32 sentences of 7 to 28 tokens run as 32 x 30 tokens; grouped,
    /// the short ones run at 16 and the work falls by about a third
    /// ([`super::groups`]).
    pub fn encode_grouped(
        &self,
        model: &str,
        req: InferenceRequest,
        max_tokens: usize,
        by_bucket: bool,
    ) -> Result<Vec<RowGroup>, RuntimeError> {
        let encodings = self.encodings(model, &req, max_tokens)?;
        let mut buckets: Vec<(usize, Vec<usize>)> = Vec::new();
        for (row, enc) in encodings.iter().enumerate() {
            let bucket = if by_bucket { self.bucket(enc.len()) } else { 0 };
            match buckets.iter_mut().find(|(b, _)| *b == bucket) {
                Some((_, rows)) => rows.push(row),
                None => buckets.push((bucket, vec![row])),
            }
        }
        buckets
            .into_iter()
            .map(|(_, rows)| {
                let members: Vec<&Encoding> = rows.iter().filter_map(|&r| encodings.get(r)).collect();
                let request = self.request_of(model, &members, req.outputs.clone())?;
                Ok(RowGroup { rows, request })
            })
            .collect()
    }

    /// Every text of `req` tokenised, counting tokens against `max_tokens`.
    fn encodings(
        &self,
        model: &str,
        req: &InferenceRequest,
        max_tokens: usize,
    ) -> Result<Vec<Encoding>, RuntimeError> {
        let texts = self.texts(model, req)?;
        let mut encodings: Vec<Encoding> = Vec::with_capacity(texts.len());
        let mut tokens = 0usize;
        for (i, text) in texts.iter().enumerate() {
            let text = std::str::from_utf8(text).map_err(|e| {
                self.invalid(
                    model,
                    format!("element {i} is not UTF-8 text (invalid byte at offset {})", e.valid_up_to()),
                )
            })?;
            let encoding =
                self.tokenize(text).map_err(|e| self.invalid(model, format!("element {i}: {e}")))?;
            tokens = tokens.saturating_add(encoding.len());
            if tokens > max_tokens {
                return Err(RuntimeError::TooLarge {
                    model: model.into(),
                    reason: format!(
                        "the request's first {} texts already hold {tokens} tokens (after truncation to {}), more than the {max_tokens} tokens one request may carry",
                        i + 1,
                        self.spec.max_length
                    ),
                    setting: "max_tokens",
                });
            }
            encodings.push(encoding);
        }
        Ok(encodings)
    }

    /// The graph's token tensors of `encodings`, padded to their longest.
    fn request_of(
        &self,
        model: &str,
        encodings: &[&Encoding],
        outputs: Option<Vec<String>>,
    ) -> Result<InferenceRequest, RuntimeError> {
        let length = encodings.iter().map(|e| e.len()).max().unwrap_or(0).max(1);
        let inputs = self
            .feeds
            .iter()
            .map(|(name, feed)| Ok((name.clone(), self.token_tensor(model, *feed, encodings, length)?)))
            .collect::<Result<Vec<_>, RuntimeError>>()?;
        Ok(InferenceRequest { inputs, outputs })
    }

    /// The tokens `text` gives the model, special tokens included, as
    /// [`Self::encode_within`] counts them (the same prefix cut and
    /// truncation to `max_length`). The OpenAI-compatible front end reports
    /// them as `usage`, for answers computed and cached alike.
    pub fn count_tokens(&self, model: &str, text: &str) -> Result<usize, RuntimeError> {
        self.tokenize(text).map(|e| e.len()).map_err(|e| self.invalid(model, e.to_string()))
    }

    /// One text's encoding: its first bytes ([`prefix`]), truncated to
    /// `max_length` tokens.
    fn tokenize(&self, text: &str) -> tokenizers::Result<Encoding> {
        let text = prefix(text, self.spec.max_length.saturating_mul(PREFIX_BYTES_PER_TOKEN));
        self.tokenizer.encode_fast(text, true)
    }

    /// The length bucket of a request whose longest text has `tokens`
    /// tokens: requests batch together only within one bucket, so a batch
    /// pads a text to at most about twice its length.
    pub fn bucket(&self, tokens: usize) -> usize {
        self.spec.buckets.iter().copied().find(|&b| b >= tokens).unwrap_or(self.spec.max_length)
    }

    /// The value each graph input is padded with, in graph order (pad id,
    /// 0 for the mask, pad type id): what the batcher appends when it
    /// merges requests of different lengths.
    pub fn pad_values(&self) -> Vec<i64> {
        self.feeds.iter().map(|(_, feed)| self.pad_of(*feed)).collect()
    }

    fn pad_of(&self, feed: Feed) -> i64 {
        match feed {
            Feed::Ids => self.pad_id,
            Feed::Mask => 0,
            Feed::TypeIds => self.pad_type_id,
        }
    }

    /// The strings of the request's text input, checked for name, datatype
    /// and shape.
    fn texts<'a>(&self, model: &str, req: &'a InferenceRequest) -> Result<&'a [Bytes], RuntimeError> {
        let name = &self.spec.input;
        if let Some((other, _)) = req.inputs.iter().find(|(n, _)| n != name) {
            return Err(RuntimeError::UnknownInput {
                model: model.into(),
                input: other.clone(),
                expected: name.clone(),
            });
        }
        if req.inputs.len() > 1 {
            return Err(RuntimeError::DuplicateInput { model: model.into(), input: name.clone() });
        }
        let Some((_, tensor)) = req.inputs.first() else {
            return Err(RuntimeError::MissingInput { model: model.into(), input: name.clone() });
        };
        let TensorData::Strings(items) = tensor.data() else {
            return Err(RuntimeError::WrongDtype {
                model: model.into(),
                input: name.clone(),
                expected: DataType::Bytes,
                actual: tensor.dtype(),
            });
        };
        match tensor.shape() {
            [n] | [n, 1] if *n > 0 => Ok(items),
            shape => Err(RuntimeError::WrongShape {
                model: model.into(),
                input: name.clone(),
                expected: "[N] or [N, 1] strings, N >= 1".into(),
                actual: shape.to_vec(),
            }),
        }
    }

    /// One INT64 `[rows, length]` token tensor, right-padded.
    fn token_tensor(
        &self,
        model: &str,
        feed: Feed,
        encodings: &[&Encoding],
        length: usize,
    ) -> Result<Tensor, RuntimeError> {
        let pad = self.pad_of(feed);
        let mut bytes = Vec::with_capacity(encodings.len() * length * 8);
        for enc in encodings {
            let values = match feed {
                Feed::Ids => enc.get_ids(),
                Feed::Mask => enc.get_attention_mask(),
                Feed::TypeIds => enc.get_type_ids(),
            };
            for &v in values.iter().take(length) {
                bytes.extend_from_slice(&i64::from(v).to_le_bytes());
            }
            for _ in values.len().min(length)..length {
                bytes.extend_from_slice(&pad.to_le_bytes());
            }
        }
        Tensor::new(DataType::I64, vec![encodings.len(), length], TensorData::Fixed(Bytes::from(bytes)))
            .map_err(|e| self.invalid(model, e.to_string()))
    }

    fn invalid(&self, model: &str, reason: String) -> RuntimeError {
        RuntimeError::InvalidData { model: model.into(), input: self.spec.input.clone(), reason }
    }
}

/// Bytes of text tokenised per token of `max_length`: a text longer than
/// `max_length x 512` bytes is cut before tokenising (its tokens past
/// `max_length` are dropped anyway), so one long document costs a bounded
/// amount of tokeniser work and memory. Real text averages under 10 bytes
/// per token; only a text whose first `max_length x 512` bytes hold fewer
/// than `max_length` tokens (e.g. mostly whitespace) is encoded
/// differently than without the cut.
pub const PREFIX_BYTES_PER_TOKEN: usize = 512;

/// The first `limit` bytes of `text`, or less: cut at the last whitespace
/// before the limit (so no word is split), else at a character boundary.
pub fn prefix(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let cut = text.floor_char_boundary(limit);
    let head = &text[..cut];
    match head.rfind(char::is_whitespace) {
        Some(space) if space > 0 => &head[..space],
        _ => head,
    }
}

/// The graph's token inputs, in graph order; every input must be one.
fn graph_feeds(graph: &ModelSignature) -> Result<Vec<(String, Feed)>, String> {
    let mut feeds = Vec::with_capacity(graph.inputs.len());
    for input in &graph.inputs {
        let Some(feed) = Feed::from_name(&input.name) else {
            return Err(format!(
                "graph input '{}' is not a token tensor (a text model takes input_ids, attention_mask and optionally token_type_ids)",
                input.name
            ));
        };
        if input.dtype != DataType::I64 || input.shape.len() != 2 {
            return Err(format!(
                "graph input '{}' is {} {:?}; a text model's token tensors must be INT64 [batch, sequence]",
                input.name, input.dtype, input.shape
            ));
        }
        feeds.push((input.name.clone(), feed));
    }
    for required in [Feed::Ids, Feed::Mask] {
        if !feeds.iter().any(|(_, f)| *f == required) {
            return Err(format!(
                "the graph lacks the {required:?} input (input_ids and attention_mask are required)"
            ));
        }
    }
    Ok(feeds)
}
