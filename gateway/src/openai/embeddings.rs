//! `POST /v1/embeddings`: the parsed body ([`super::request`]) becomes the V2
//! request a text model takes (its `BYTES` input, one string per row,
//! shape `[N, 1]`, all outputs), and from there it is a V2 call:
//! [`crate::auth`] with the route's keys, [`crate::target`],
//! [`crate::inference`]'s limits, signature checks, budget, cache
//! (so an identical V2 call and an OpenAI call share an entry), routing
//! and traffic sample. The answer's embedding output is written in
//! OpenAI's shape, with `usage` counted by the answering model's
//! tokenizer ([`switchyard_runtime::TextEncoder::count_tokens`]).

use super::error::OpenAiError;
use super::request::{EmbeddingsRequest, Input};
use super::response;
use crate::error::GatewayError;
use crate::handlers::Request;
use crate::header_names as names;
use crate::inference::{self, Answered, Outcome};
use crate::reply::Reply;
use crate::routing::budget;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::target::{resolve, Target};
use bytes::Bytes;
use std::sync::Arc;
use switchyard_protocol::v2::{DecodedRequest, Parameters};
use switchyard_runtime::{DataType, ModelSignature, Tensor, TensorData, TensorSpec, TextEncoder};

/// Answers one embeddings call; `Err` is the client's error reply.
pub async fn embeddings(
    state: &AppState,
    snap: &Snapshot,
    req: &Request<'_>,
    parsed: EmbeddingsRequest,
) -> Result<Reply, OpenAiError> {
    let Request { headers, received, .. } = *req;
    let config = &snap.config;
    let EmbeddingsRequest { model, input, format, dimensions } = parsed;
    let tenant = snap.access.authorize(config, &model, headers)?;
    let target = resolve(config, &state.catalog(snap), &model, None)?;
    check_text_model(snap, &target)?;
    let texts = match input {
        Input::Texts(texts) => texts,
        Input::TokenIds(sequences) => texts_of_ids(snap, &target, &sequences)?,
    };
    budget::check_header(budget::route_budget(target.route(config)), headers)?;
    let (limits, signature) = inference::decode_limits(state, snap, &target)?;
    let output = embedding_output(&target, &signature)?;
    check_dimensions(&target, output, dimensions)?;
    let input = signature
        .inputs
        .first()
        .ok_or_else(|| GatewayError::Internal("a text model without an input".into()))?;
    // The V2 decoder's bounds (413), before any tensor is built.
    let shape = [texts.len(), 1];
    limits.check_rows(&input.name, &shape).map_err(GatewayError::from)?;
    limits.check_shape(&input.name, &shape).map_err(GatewayError::from)?;
    let mut decoded = decoded_request(&input.name, texts.clone())?;
    inference::check_decoded(snap, &target, &signature, &mut decoded)?;
    let sampled = state.recorders.draw(target.route(config).and_then(|r| r.record.as_ref()));
    let call = inference::Call {
        target: target.clone(),
        decoded,
        headers,
        tenant: tenant.as_deref(),
        received,
        stream: false,
        sampled,
        protocol: "openai",
    };
    let Answered { parts, answer, cache, rows, ratelimit, .. } = match inference::run(state, snap, call)
        .await?
    {
        Outcome::Answered(answered) => *answered,
        Outcome::Events(_) => return Err(GatewayError::Internal("an embeddings call streamed".into()).into()),
    };
    let Some((_, tensor, _)) = parts.outputs.iter().find(|(name, _, _)| *name == output.name) else {
        return Err(GatewayError::Internal(format!("the answer lacks the output {:?}", output.name)).into());
    };
    let tokens = count_tokens(snap, &answer.model, &target, texts).await?;
    let body = response::embeddings_body(tensor, format, &target.public_name, tokens)?;
    let reply = Reply::json(200, body)
        .with_static_header(names::X_CACHE, cache.as_str())
        .with_header(names::X_SWITCHYARD_MODEL, answer.model.clone())
        .with_static_header(names::X_SWITCHYARD_DEVICE, answer.device.as_str())
        .with_static_header(names::X_SWITCHYARD_REASON, answer.reason.as_str())
        .with_header(names::X_SWITCHYARD_BUDGET_MS, answer.budget_ms.to_string());
    let reply = ratelimit.into_iter().fold(reply, |reply, (name, value)| reply.with_header(name, value));
    Ok(match rows {
        Some(rows) => reply.with_header(names::X_SWITCHYARD_CACHED_ROWS, rows.header_value()),
        None => reply,
    })
}

/// True when `model` is a local model with a tokenizer (a text model).
pub fn is_text_model(snap: &Snapshot, model: &str) -> bool {
    snap.config.models.iter().any(|m| m.name == model && m.text.is_some())
}

/// Refuses (400, `model`) a name whose models are not all text models.
fn check_text_model(snap: &Snapshot, target: &Target) -> Result<(), OpenAiError> {
    match target.models.iter().find(|m| !is_text_model(snap, m)) {
        None => Ok(()),
        Some(other) => Err(OpenAiError::invalid(
            "model",
            format!(
                "{:?} is not a text embedding model ({:?} has no tokenizer); /v1/embeddings serves text models and routes over them",
                crate::error::cut(&target.public_name),
                crate::error::cut(other)
            ),
        )),
    }
}

/// The texts that token-id sequences spell, by the tokenizer of every
/// model the target may run (400, `input`, when a sequence is not the
/// model's own tokens, or when the models' tokenizers read it
/// differently).
fn texts_of_ids(snap: &Snapshot, target: &Target, sequences: &[Vec<u32>]) -> Result<Vec<Bytes>, OpenAiError> {
    let mut encoders = Vec::with_capacity(target.models.len());
    for model in &target.models {
        match snap.repo.text_encoder(model).map_err(GatewayError::from)? {
            Some(encoder) => encoders.push(encoder),
            None => return Err(GatewayError::Internal(format!("no tokenizer for {model:?}")).into()),
        }
    }
    sequences
        .iter()
        .enumerate()
        .map(|(i, ids)| {
            let mut spelled: Option<String> = None;
            for encoder in &encoders {
                let text = encoder.text_of_ids(ids).map_err(|e| OpenAiError::invalid("input", format!("input[{i}]: {e}")))?;
                match &spelled {
                    Some(first) if *first != text => {
                        return Err(OpenAiError::invalid(
                            "input",
                            format!(
                                "input[{i}]: the models of {:?} have different tokenizers, so token ids are ambiguous there; send the text",
                                crate::error::cut(&target.public_name)
                            ),
                        ))
                    }
                    Some(_) => {}
                    None => spelled = Some(text),
                }
            }
            Ok(Bytes::from(spelled.unwrap_or_default()))
        })
        .collect()
}

/// `dimensions`, where given, must be the vectors' full width: the models
/// served are not trained for truncated (Matryoshka) embeddings, and a
/// truncated vector of such a model is a worse embedding, not a shorter
/// one.
fn check_dimensions(
    target: &Target,
    output: &TensorSpec,
    dimensions: Option<usize>,
) -> Result<(), OpenAiError> {
    let (Some(asked), Some(&width)) = (dimensions, output.shape.get(1)) else { return Ok(()) };
    match usize::try_from(width) {
        Ok(width) if width != asked => Err(OpenAiError::invalid(
            "dimensions",
            format!(
                "{:?} gives {width}-dimensional vectors and is not trained for truncated embeddings: leave dimensions out or set it to {width}",
                crate::error::cut(&target.public_name)
            ),
        )),
        _ => Ok(()),
    }
}

/// The output holding the vectors: the signature's one FP32 `[rows, dim]`
/// output.
fn embedding_output<'a>(
    target: &Target,
    signature: &'a ModelSignature,
) -> Result<&'a TensorSpec, OpenAiError> {
    let mut vectors = signature.outputs.iter().filter(|o| o.dtype == DataType::F32 && o.shape.len() == 2);
    match (vectors.next(), vectors.next()) {
        (Some(spec), None) => Ok(spec),
        _ => Err(OpenAiError::invalid(
            "model",
            format!(
                "{:?} does not give one FP32 [rows, dim] embedding output",
                crate::error::cut(&target.public_name)
            ),
        )),
    }
}

/// The V2 request a text model takes: its `BYTES` input, `[N, 1]`.
fn decoded_request(input: &str, texts: Vec<Bytes>) -> Result<DecodedRequest, GatewayError> {
    let rows = texts.len();
    let tensor = Tensor::new(DataType::Bytes, vec![rows, 1], TensorData::Strings(texts))
        .map_err(|e| GatewayError::Internal(e.to_string()))?;
    Ok(DecodedRequest {
        id: None,
        inputs: vec![(input.to_string(), tensor)],
        input_parameters: vec![Parameters::new()],
        outputs: Vec::new(),
        binary_data_output: false,
        parameters: Parameters::new(),
    })
}

/// The texts' tokens as the model that answered counts them (the first
/// text model of the target if that one is not local).
async fn count_tokens(
    snap: &Snapshot,
    answered_by: &str,
    target: &Target,
    texts: Vec<Bytes>,
) -> Result<usize, OpenAiError> {
    let encoder = std::iter::once(answered_by)
        .chain(target.models.iter().map(String::as_str))
        .find_map(|m| snap.repo.text_encoder(m).ok().flatten())
        .ok_or_else(|| GatewayError::Internal(format!("no tokenizer for {answered_by:?}")))?;
    let model = answered_by.to_string();
    let bytes: usize = texts.iter().map(Bytes::len).sum();
    if bytes <= switchyard_runtime::text::INLINE_TEXT_BYTES {
        return Ok(count(&encoder, &model, &texts)?);
    }
    // Large requests are tokenised off the async workers, as the runtime does.
    tokio::task::spawn_blocking(move || count(&encoder, &model, &texts))
        .await
        .map_err(|e| GatewayError::Internal(format!("token count failed: {e}")))?
        .map_err(OpenAiError::from)
}

fn count(encoder: &Arc<TextEncoder>, model: &str, texts: &[Bytes]) -> Result<usize, GatewayError> {
    texts.iter().try_fold(0usize, |sum, text| {
        let text = std::str::from_utf8(text).map_err(|e| GatewayError::Internal(e.to_string()))?;
        Ok(sum.saturating_add(encoder.count_tokens(model, text)?))
    })
}
