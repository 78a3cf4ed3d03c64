//! Text models: a per-model preprocessing stage that turns a `BYTES` input
//! of UTF-8 strings into the token tensors a transformer's ONNX graph takes
//! (`input_ids`, `attention_mask`, optionally `token_type_ids`, all INT64
//! `[rows, sequence]`), with a HuggingFace `tokenizer.json` read by the
//! `tokenizers` crate.
//!
//! Why here: ONNX Runtime has no tokenizer, and the stage belongs to the
//! model (its vocabulary, its maximum length), not to the protocol. With it
//! in the runtime, [`crate::ModelRepository::signature`] reports the public
//! contract (one `BYTES` input) everywhere: metadata, Triton config, route
//! signature checks. The stage runs on the caller's task before the request
//! is validated and queued (a large request on tokio's blocking pool), so
//! the pool workers only run the model.
//!
//! Limits: the repository refuses a request with more texts than the
//! model's row limit before anything is tokenised; the encoder counts
//! tokens as it goes and refuses past the token limit
//! ([`crate::limits`]), and tokenises only a bounded prefix of each text
//! ([`prefix`]).
//!
//! Batching: a batch needs one sequence length. Each request is padded to
//! its own longest text; the batcher groups requests by length bucket
//! ([`crate::TextSpec::buckets`]: a request of 12 tokens and one of 15
//! share bucket 16, one of 40 is in bucket 64) and pads the requests of a
//! batch to the batch's longest ([`crate::batch`]'s `concat_padded`). A
//! request that runs alone pays for no padding, and a batch pads a text to
//! at most about twice its length, while requests of similar length still
//! share batches. A request whose own texts fall in several buckets runs as
//! one request per bucket ([`groups`]), for models whose outputs allow its
//! answer to be put back together row by row.

mod encoder;
pub mod groups;
#[cfg(test)]
mod tests;

pub use encoder::{prefix, TextEncoder, PREFIX_BYTES_PER_TOKEN};
pub use groups::RowGroup;

use std::sync::Arc;

use crate::error::RuntimeError;
use crate::request::InferenceRequest;
use crate::tensor::TensorData;

/// Requests with more text than this (bytes, all strings together) are
/// tokenised on tokio's blocking pool instead of the calling task, so one
/// large document cannot stall the other requests of an async worker.
pub const INLINE_TEXT_BYTES: usize = 16 * 1024;

/// Runs `encoder` on `req` with at most `max_tokens` tokens in all, its
/// rows grouped by length bucket when `by_bucket` (see
/// [`TextEncoder::encode_grouped`]): inline when its text is small, else on
/// tokio's blocking pool (see [`INLINE_TEXT_BYTES`]).
pub async fn encode_request(
    encoder: &Arc<TextEncoder>,
    model: &str,
    req: InferenceRequest,
    max_tokens: usize,
    by_bucket: bool,
) -> Result<Vec<RowGroup>, RuntimeError> {
    let text_bytes: usize = req
        .inputs
        .iter()
        .map(|(_, t)| match t.data() {
            TensorData::Strings(items) => items.iter().map(|s| s.len()).sum(),
            TensorData::Fixed(_) => 0,
        })
        .sum();
    if text_bytes <= INLINE_TEXT_BYTES {
        return encoder.encode_grouped(model, req, max_tokens, by_bucket);
    }
    let (encoder, owned_model) = (Arc::clone(encoder), model.to_string());
    tokio::task::spawn_blocking(move || encoder.encode_grouped(&owned_model, req, max_tokens, by_bucket))
        .await
        .unwrap_or_else(|e| {
            Err(RuntimeError::Execution {
                model: model.to_string(),
                reason: format!("tokenizer task failed: {e}"),
            })
        })
}
