//! Errors of the V2 codec, with their HTTP status and Triton-style body.

use bytes::Bytes;
use thiserror::Error;

/// Why a V2 request could not be decoded or checked.
///
/// Every variant is the client's fault: [`V2Error::status`] is 400, or 413
/// when a configured limit is exceeded. Messages name the input or output
/// concerned so that a client can fix its request from the message alone.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum V2Error {
    /// The JSON header is not valid JSON (or not UTF-8).
    #[error("failed to parse the request JSON: {0}")]
    InvalidJson(String),
    /// `Inference-Header-Content-Length` is larger than the body.
    #[error(
        "Inference-Header-Content-Length is {header_len} but the request body has only {body_len} bytes"
    )]
    HeaderLength {
        /// The declared JSON header length.
        header_len: usize,
        /// The body length.
        body_len: usize,
    },
    /// A required field is absent.
    #[error("missing field '{field}' in {context}")]
    MissingField {
        /// The field name.
        field: &'static str,
        /// Where it was expected, e.g. `input 'X'` or `the request`.
        context: String,
    },
    /// A field has the wrong JSON type or an invalid value.
    #[error("invalid '{field}' in {context}: {reason}")]
    InvalidField {
        /// The field name.
        field: &'static str,
        /// Where it appeared.
        context: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The `datatype` of an input is not a V2 datatype.
    #[error("unknown datatype '{datatype}' for input '{input}'")]
    UnknownDatatype {
        /// The input name.
        input: String,
        /// The datatype given.
        datatype: String,
    },
    /// The element count of a shape overflows.
    #[error("shape {shape:?} of input '{input}' has too many elements")]
    ShapeOverflow {
        /// The input name.
        input: String,
        /// The declared shape.
        shape: Vec<usize>,
    },
    /// JSON `data` does not hold as many elements as the shape, or its
    /// nesting does not follow the shape.
    #[error("'data' of input '{input}' does not match shape {shape:?}: {reason}")]
    ShapeMismatch {
        /// The input name.
        input: String,
        /// The declared shape.
        shape: Vec<usize>,
        /// What differs.
        reason: String,
    },
    /// One element of JSON `data` is not valid for the datatype.
    #[error("element {index} of input '{input}' is not a valid {datatype}: {reason}")]
    InvalidElement {
        /// The input name.
        input: String,
        /// The datatype.
        datatype: &'static str,
        /// Row-major index of the element.
        index: usize,
        /// Why it is invalid (wrong JSON type, out of range, not an integer).
        reason: String,
    },
    /// An input has neither `data` nor `binary_data_size`.
    #[error("input '{input}' has no 'data' and no 'binary_data_size' parameter")]
    MissingData {
        /// The input name.
        input: String,
    },
    /// An input has both `data` and `binary_data_size`.
    #[error("input '{input}' has both 'data' and a 'binary_data_size' parameter")]
    ConflictingData {
        /// The input name.
        input: String,
    },
    /// A binary input claims more bytes than remain in the body.
    #[error(
        "binary data of input '{input}' is {size} bytes but only {remaining} bytes remain in the request body"
    )]
    BinaryOverrun {
        /// The input name.
        input: String,
        /// The declared `binary_data_size`.
        size: usize,
        /// Bytes left after the header and earlier binary inputs.
        remaining: usize,
    },
    /// Bytes are left over after the last binary input.
    #[error("{extra} unexpected bytes after the binary data of the request's inputs")]
    TrailingBytes {
        /// How many bytes are left.
        extra: usize,
    },
    /// A fixed-width binary input whose size is not shape x element size.
    #[error(
        "binary data of input '{input}' is {actual} bytes but shape {shape:?} of {datatype} needs {expected}"
    )]
    BinarySize {
        /// The input name.
        input: String,
        /// The datatype.
        datatype: &'static str,
        /// The declared shape.
        shape: Vec<usize>,
        /// Bytes the shape needs.
        expected: usize,
        /// `binary_data_size`.
        actual: usize,
    },
    /// A binary `BYTES` input that is not a sequence of length-prefixed
    /// elements matching the shape.
    #[error("binary BYTES data of input '{input}' is malformed: {reason}")]
    BinaryBytes {
        /// The input name.
        input: String,
        /// What is wrong.
        reason: String,
    },
    /// Two inputs (or two requested outputs) share a name.
    #[error("{kind} '{name}' appears more than once")]
    Duplicate {
        /// `input` or `output`.
        kind: &'static str,
        /// The repeated name.
        name: String,
    },
    /// An input the model does not have.
    #[error("unexpected input '{input}' for model '{model}'")]
    UnknownInput {
        /// The input name.
        input: String,
        /// The model (route) name.
        model: String,
    },
    /// A model input absent from the request.
    #[error("missing input '{input}' for model '{model}'")]
    MissingInput {
        /// The input name.
        input: String,
        /// The model (route) name.
        model: String,
    },
    /// A requested output the model does not have.
    #[error("unexpected output '{output}' requested for model '{model}'")]
    UnknownOutput {
        /// The output name.
        output: String,
        /// The model (route) name.
        model: String,
    },
    /// An input whose datatype differs from the model's.
    #[error("input '{input}' has datatype {actual} but model '{model}' expects {expected}")]
    DatatypeMismatch {
        /// The input name.
        input: String,
        /// The model (route) name.
        model: String,
        /// The model's datatype.
        expected: &'static str,
        /// The request's datatype.
        actual: &'static str,
    },
    /// An input whose shape is incompatible with the model's.
    #[error("input '{input}' has shape {actual:?} but model '{model}' expects {expected:?}")]
    InputShape {
        /// The input name.
        input: String,
        /// The model (route) name.
        model: String,
        /// The model's shape (`-1` = any).
        expected: Vec<i64>,
        /// The request's shape.
        actual: Vec<usize>,
    },
    /// A feature of the protocol that Switchyard does not implement
    /// (shared memory, classification of a non-numeric output, ...).
    #[error("{0}")]
    Unsupported(String),
    /// A configured limit is exceeded (HTTP 413).
    #[error("request too large: {0}")]
    TooLarge(String),
}

impl V2Error {
    /// The HTTP status: 413 for [`V2Error::TooLarge`], 400 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            V2Error::TooLarge(_) => 413,
            _ => 400,
        }
    }

    /// The response body, `{"error":"<message>"}`, as Triton sends it and
    /// as `tritonclient` reads it.
    pub fn body(&self) -> Bytes {
        error_body(&self.to_string())
    }
}

/// A Triton-style error body `{"error":"<message>"}` for any message.
pub fn error_body(message: &str) -> Bytes {
    let quoted = serde_json::Value::String(message.to_owned()).to_string();
    let mut body = Vec::with_capacity(quoted.len() + 10);
    body.extend_from_slice(b"{\"error\":");
    body.extend_from_slice(quoted.as_bytes());
    body.push(b'}');
    Bytes::from(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_is_triton_error_json() {
        let err = V2Error::MissingData { input: "in\"0".to_owned() };
        assert_eq!(err.status(), 400);
        let body = err.body();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"], "input 'in\"0' has no 'data' and no 'binary_data_size' parameter");
        assert_eq!(v.as_object().map(|o| o.len()), Some(1));
    }

    #[test]
    fn too_large_is_413() {
        assert_eq!(V2Error::TooLarge("x".to_owned()).status(), 413);
        assert_eq!(&error_body("a")[..], br#"{"error":"a"}"#);
    }
}
