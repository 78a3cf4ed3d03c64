//! The body of `POST /v1/embeddings`, read field by field so that each
//! wrong field gets a 400 naming it (OpenAI's `param`):
//!
//! - `model` (required): a route or a text model.
//! - `input` (required): a string, a non-empty array of strings (none of
//!   them empty: OpenAI refuses empty strings), or token ids: one array of
//!   integers or an array of them, ids of the model's own vocabulary
//!   (checked against its tokenizer by
//!   [`switchyard_runtime::TextEncoder::text_of_ids`]).
//! - `encoding_format`: `float` (default) or `base64` (little-endian f32).
//! - `dimensions`: a positive integer; the models served are not trained
//!   for truncated embeddings, so only their full width is accepted
//!   (checked once the model's output is known).
//! - `user`: a string, accepted and not used for anything but the log.
//!
//! Other fields are ignored, as OpenAI-compatible servers commonly do.

use super::error::OpenAiError;
use bytes::Bytes;
use serde_json::{Map, Value};

/// How the vectors are written in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodingFormat {
    /// JSON numbers.
    Float,
    /// Base64 of the little-endian f32 bytes.
    Base64,
}

/// What `input` holds: texts, or the token ids of texts.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The texts, in request order (at least one, none empty).
    Texts(Vec<Bytes>),
    /// One id sequence per text, in request order (at least one, none
    /// empty); the ids still have to be checked against the model's
    /// vocabulary.
    TokenIds(Vec<Vec<u32>>),
}

/// A checked embeddings request.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingsRequest {
    /// The route or model named.
    pub model: String,
    /// The texts or token ids.
    pub input: Input,
    /// How to write the vectors.
    pub format: EncodingFormat,
    /// The vector width asked for, if any.
    pub dimensions: Option<usize>,
}

/// Parses and checks the body (400 on any fault).
pub fn parse(body: &[u8]) -> Result<EmbeddingsRequest, OpenAiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| OpenAiError::invalid("body", format!("the body is not valid JSON: {e}")))?;
    let Value::Object(mut fields) = value else {
        return Err(OpenAiError::invalid("body", "the body must be a JSON object"));
    };
    let model = match fields.remove("model") {
        Some(Value::String(model)) if !model.is_empty() => model,
        Some(Value::String(_)) => return Err(OpenAiError::invalid("model", "model must not be empty")),
        None | Some(Value::Null) => {
            return Err(OpenAiError::invalid("model", "model is required: a route or text model name"))
        }
        Some(other) => return Err(wrong_type("model", "a string", &other)),
    };
    let input = input(fields.remove("input"))?;
    let format = match fields.remove("encoding_format") {
        None | Some(Value::Null) => EncodingFormat::Float,
        Some(Value::String(f)) if f == "float" => EncodingFormat::Float,
        Some(Value::String(f)) if f == "base64" => EncodingFormat::Base64,
        Some(other) => {
            return Err(OpenAiError::invalid(
                "encoding_format",
                format!("encoding_format must be \"float\" or \"base64\", not {}", shown(&other)),
            ))
        }
    };
    let dimensions = match fields.remove("dimensions") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64().and_then(|d| usize::try_from(d).ok()) {
            Some(d) if d > 0 => Some(d),
            _ => {
                return Err(OpenAiError::invalid(
                    "dimensions",
                    format!("dimensions must be a positive integer, not {n}"),
                ))
            }
        },
        Some(other) => return Err(wrong_type("dimensions", "a positive integer", &other)),
    };
    check_user(&mut fields)?;
    Ok(EmbeddingsRequest { model, input, format, dimensions })
}

/// `user`: a string, else refused.
fn check_user(fields: &mut Map<String, Value>) -> Result<(), OpenAiError> {
    match fields.remove("user") {
        None | Some(Value::Null | Value::String(_)) => Ok(()),
        Some(other) => Err(wrong_type("user", "a string", &other)),
    }
}

/// The texts or token ids of `input`.
fn input(input: Option<Value>) -> Result<Input, OpenAiError> {
    let items = match input {
        None | Some(Value::Null) => {
            return Err(OpenAiError::invalid(
                "input",
                "input is required: a string, an array of strings, or token ids",
            ))
        }
        Some(Value::String(text)) => vec![Value::String(text)],
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(wrong_type("input", "a string, an array of strings, or token ids", &other))
        }
    };
    if items.is_empty() {
        return Err(OpenAiError::invalid("input", "input must not be an empty array"));
    }
    if items.iter().all(Value::is_number) {
        return Ok(Input::TokenIds(vec![token_ids(&items, "input")?]));
    }
    if items.iter().all(Value::is_array) {
        let sequences = items.iter().enumerate().map(|(i, item)| match item {
            Value::Array(ids) if ids.is_empty() => {
                Err(OpenAiError::invalid("input", format!("input[{i}] is an empty token-id array")))
            }
            Value::Array(ids) => token_ids(ids, &format!("input[{i}]")),
            _ => Err(OpenAiError::invalid("input", format!("input[{i}] must be an array of token ids"))),
        });
        return sequences.collect::<Result<_, _>>().map(Input::TokenIds);
    }
    texts(items).map(Input::Texts)
}

/// One token-id sequence: integers from 0 to 2^32 - 1.
fn token_ids(items: &[Value], at: &str) -> Result<Vec<u32>, OpenAiError> {
    items
        .iter()
        .enumerate()
        .map(|(j, id)| {
            id.as_u64().and_then(|id| u32::try_from(id).ok()).ok_or_else(|| {
                OpenAiError::invalid(
                    "input",
                    format!("{at}[{j}] must be a token id (an integer >= 0), not {id}"),
                )
            })
        })
        .collect()
}

/// The strings of `input`.
fn texts(items: Vec<Value>) -> Result<Vec<Bytes>, OpenAiError> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(text) if text.is_empty() => Err(OpenAiError::invalid(
                "input",
                format!("input[{i}] is an empty string; every text must have content"),
            )),
            Value::String(text) => Ok(Bytes::from(text)),
            other => Err(OpenAiError::invalid(
                "input",
                format!("input[{i}] must be a string, not {}", shown(&other)),
            )),
        })
        .collect()
}

fn wrong_type(param: &'static str, expected: &str, got: &Value) -> OpenAiError {
    OpenAiError::invalid(param, format!("{param} must be {expected}, not {}", shown(got)))
}

/// A JSON value's kind, as an error message names it.
fn shown(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> (u16, Option<&'static str>, String) {
        match parse(body.as_bytes()).unwrap_err() {
            OpenAiError::Invalid { param, message } => (400, Some(param), message),
            OpenAiError::Gateway(e) => (e.status(), None, e.to_string()),
        }
    }

    #[test]
    fn strings_and_formats() {
        let r = parse(br#"{"model":"m","input":"hi"}"#).unwrap();
        assert_eq!((r.input, r.format), (Input::Texts(vec![Bytes::from("hi")]), EncodingFormat::Float));
        let r =
            parse(br#"{"model":"m","input":["a","b"],"encoding_format":"base64","user":"u","x":1}"#).unwrap();
        assert_eq!(
            (r.input, r.format),
            (Input::Texts(vec![Bytes::from("a"), Bytes::from("b")]), EncodingFormat::Base64)
        );
    }

    #[test]
    fn token_ids_and_dimensions() {
        let r = parse(br#"{"model":"m","input":[101,7592,102],"dimensions":384}"#).unwrap();
        assert_eq!((r.input, r.dimensions), (Input::TokenIds(vec![vec![101, 7592, 102]]), Some(384)));
        let r = parse(br#"{"model":"m","input":[[1,2],[3]]}"#).unwrap();
        assert_eq!((r.input, r.dimensions), (Input::TokenIds(vec![vec![1, 2], vec![3]]), None));
    }

    #[test]
    fn bad_bodies_name_their_field() {
        for (body, param) in [
            ("{", "body"),
            ("[]", "body"),
            (r#"{"input":"a"}"#, "model"),
            (r#"{"model":3,"input":"a"}"#, "model"),
            (r#"{"model":"m"}"#, "input"),
            (r#"{"model":"m","input":[]}"#, "input"),
            (r#"{"model":"m","input":""}"#, "input"),
            (r#"{"model":"m","input":["a",""]}"#, "input"),
            (r#"{"model":"m","input":["a",3]}"#, "input"),
            (r#"{"model":"m","input":{"a":1}}"#, "input"),
            (r#"{"model":"m","input":[1,-2,3]}"#, "input"),
            (r#"{"model":"m","input":[1,2.5]}"#, "input"),
            (r#"{"model":"m","input":[4294967296]}"#, "input"),
            (r#"{"model":"m","input":[[1,2],[]]}"#, "input"),
            (r#"{"model":"m","input":[[1,"a"]]}"#, "input"),
            (r#"{"model":"m","input":[[1,2],3]}"#, "input"),
            (r#"{"model":"m","input":"a","dimensions":0}"#, "dimensions"),
            (r#"{"model":"m","input":"a","dimensions":"64"}"#, "dimensions"),
            (r#"{"model":"m","input":"a","encoding_format":"int8"}"#, "encoding_format"),
            (r#"{"model":"m","input":"a","user":5}"#, "user"),
        ] {
            let (status, got, message) = err(body);
            assert_eq!((status, got), (400, Some(param)), "{body}: {message}");
        }
        assert!(err(r#"{"model":"m","input":[[1],[2,-1]]}"#).2.contains("input[1][1]"));
        assert!(err(r#"{"model":"m","input":["a",""]}"#).2.contains("input[1]"));
    }
}
