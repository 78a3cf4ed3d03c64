//! The body of `POST /v1/embeddings`, read field by field so that each
//! wrong field gets a 400 naming it (OpenAI's `param`):
//!
//! - `model` (required): a route or a text model.
//! - `input` (required): a string or a non-empty array of strings, none of
//!   them empty (OpenAI refuses empty strings). Token ids (an array of
//!   integers, or of integer arrays) are refused: the text models here
//!   tokenise in the runtime, which takes text.
//! - `encoding_format`: `float` (default) or `base64` (little-endian f32).
//! - `dimensions`: refused; the models served are not trained for
//!   truncated embeddings.
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

/// A checked embeddings request.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingsRequest {
    /// The route or model named.
    pub model: String,
    /// The texts, in request order (at least one, none empty).
    pub texts: Vec<Bytes>,
    /// How to write the vectors.
    pub format: EncodingFormat,
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
    let texts = texts(fields.remove("input"))?;
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
    check_unused(&mut fields)?;
    Ok(EmbeddingsRequest { model, texts, format })
}

/// `dimensions` (refused) and `user` (a string, else refused).
fn check_unused(fields: &mut Map<String, Value>) -> Result<(), OpenAiError> {
    match fields.remove("dimensions") {
        None | Some(Value::Null) => {}
        Some(_) => {
            return Err(OpenAiError::invalid(
                "dimensions",
                "dimensions is not supported: the models served here are not trained for truncated embeddings; leave it out to get the model's full vectors",
            ))
        }
    }
    match fields.remove("user") {
        None | Some(Value::Null | Value::String(_)) => Ok(()),
        Some(other) => Err(wrong_type("user", "a string", &other)),
    }
}

/// The texts of `input`.
fn texts(input: Option<Value>) -> Result<Vec<Bytes>, OpenAiError> {
    let items = match input {
        None | Some(Value::Null) => {
            return Err(OpenAiError::invalid("input", "input is required: a string or an array of strings"))
        }
        Some(Value::String(text)) => vec![Value::String(text)],
        Some(Value::Array(items)) => items,
        Some(other) => return Err(wrong_type("input", "a string or an array of strings", &other)),
    };
    if items.is_empty() {
        return Err(OpenAiError::invalid("input", "input must not be an empty array"));
    }
    if items.iter().all(|v| v.is_number() || v.is_array()) {
        return Err(OpenAiError::invalid(
            "input",
            "token-id input is not supported yet: send the texts as strings (the model's tokenizer runs in the gateway)",
        ));
    }
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
        assert_eq!((r.texts.len(), r.format), (1, EncodingFormat::Float));
        let r =
            parse(br#"{"model":"m","input":["a","b"],"encoding_format":"base64","user":"u","x":1}"#).unwrap();
        assert_eq!((r.texts, r.format), (vec![Bytes::from("a"), Bytes::from("b")], EncodingFormat::Base64));
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
            (r#"{"model":"m","input":[1,2,3]}"#, "input"),
            (r#"{"model":"m","input":[[1,2],[3]]}"#, "input"),
            (r#"{"model":"m","input":"a","encoding_format":"int8"}"#, "encoding_format"),
            (r#"{"model":"m","input":"a","dimensions":64}"#, "dimensions"),
            (r#"{"model":"m","input":"a","user":5}"#, "user"),
        ] {
            let (status, got, message) = err(body);
            assert_eq!((status, got), (400, Some(param)), "{body}: {message}");
        }
        assert!(err(r#"{"model":"m","input":[1]}"#).2.contains("token-id input is not supported"));
        assert!(err(r#"{"model":"m","input":["a",""]}"#).2.contains("input[1]"));
    }
}
