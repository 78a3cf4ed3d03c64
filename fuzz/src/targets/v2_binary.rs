//! The V2 infer request decoder with Triton's binary tensor extension: a
//! JSON header of `Inference-Header-Content-Length` bytes, then the inputs'
//! raw data (`binary_data_size`; BYTES elements with 4-byte length
//! prefixes).
//!
//! Input layout: the first 4 bytes are the header length (little-endian
//! u32, taken as the `Inference-Header-Content-Length` value, so lengths
//! past the body are tried too); the rest is the body.

use bytes::Bytes;
use switchyard_protocol::v2::{decode_infer_request, DecodeLimits};

/// Decodes `data` as a binary-extension request and checks the outcome.
pub fn run(data: &[u8]) {
    let Some((len, body)) = data.split_first_chunk::<4>() else { return };
    let header_len = u32::from_le_bytes(*len) as usize;
    let limits = DecodeLimits::default();
    let decoded = decode_infer_request(Bytes::copy_from_slice(body), Some(header_len), &limits);
    super::v2_json::check(&decoded, &limits);
}
