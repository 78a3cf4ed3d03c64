//! The Open Inference Protocol (KServe V2) REST codec, with Triton's binary
//! tensor data and classification extensions, compatible with unmodified
//! `tritonclient[http]` and `perf_analyzer`.
//!
//! This module is pure: bytes in, typed tensors out, and back. HTTP
//! routing, headers and status lines belong to the server.
//!
//! * [`decode_infer_request`]: an infer body (plus its
//!   `Inference-Header-Content-Length`) to a [`DecodedRequest`].
//! * [`check_signature`]: a decoded request against a model's signature.
//! * [`encode_infer_response`]: [`InferResponseParts`] to an
//!   [`EncodedBody`] (body, header length, content type).
//! * [`server_metadata`], [`model_metadata`], [`model_config`]: the JSON of
//!   the metadata endpoints.
//! * [`V2Error`]: every client error, with [`V2Error::status`] and the
//!   Triton-style [`V2Error::body`].
//!
//! Decisions that differ from, or go beyond, Triton:
//! * `FP16`/`BF16` JSON data is accepted as numbers (rounded to nearest
//!   even) and returned as numbers; Triton refuses both directions.
//! * JSON `data` must be flat or nested exactly as the shape; numbers must
//!   fit the datatype (Triton silently truncates).
//! * Binary `BOOL` bytes must be 0 or 1, so that JSON and binary inputs
//!   give identical tensors (and cache keys).
//! * A `BYTES` output that is not UTF-8 is sent as binary even if JSON was
//!   asked for.
//! * Exceeding a [`DecodeLimits`] bound is 413; a shape whose element
//!   count overflows is 400. Lists are counted while they are read, so a
//!   request past a limit costs no memory for the part past it. With
//!   [`DecodeLimits::signature`] (REST) an input the model would refuse
//!   (name, datatype, shape) is refused before its data is decoded.

pub mod binary;
mod bounded;
pub mod classification;
mod element;
pub mod error;
mod fields;
mod float16;
mod input_check;
pub mod json_data;
mod json_floats;
mod json_seeds;
pub mod limits;
pub mod metadata;
pub mod outputs;
mod raw_output;
pub mod raw_request;
pub mod request;
pub mod response;
pub mod response_parameters;
pub mod size;
pub mod validate;

#[cfg(test)]
mod tests;

pub use classification::classify;
pub use error::{error_body, V2Error};
pub use input_check::check_input;
pub use limits::{DecodeLimits, RowLimit, SignatureLimit};
pub use metadata::{model_config, model_metadata, server_metadata, DynamicBatchingView, ServingView};
pub use outputs::shape_outputs;
pub use request::{decode_infer_request, DecodedRequest, Parameters, RequestedOutput};
pub use response::{
    encode_infer_response, EncodedBody, InferResponseParts, JsonData, CONTENT_TYPE_BINARY, CONTENT_TYPE_JSON,
    INFERENCE_HEADER_CONTENT_LENGTH,
};
pub use response_parameters::{Explanation, ResponseParameters};
pub use validate::{check_signature, reshape_columns};
