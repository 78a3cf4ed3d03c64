//! The codec's larger tests, one file per concern; small tests sit inline
//! beside their code.

use bytes::Bytes;

use super::error::V2Error;
use super::limits::DecodeLimits;
use super::request::{decode_infer_request, DecodedRequest};

mod decode;
mod encode;
mod field_order;
mod malformed;

/// Decodes a JSON-only infer body with the default limits.
fn decode_json(json: &str) -> Result<DecodedRequest, V2Error> {
    decode_infer_request(Bytes::copy_from_slice(json.as_bytes()), None, &DecodeLimits::default())
}
