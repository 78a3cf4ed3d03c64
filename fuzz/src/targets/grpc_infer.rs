//! The gRPC front end's request decoding: bytes as a protobuf
//! `ModelInferRequest` (prost, as tonic decodes a call's message), then
//! [`switchyard::decode_model_infer`] to the V2 request the
//! rest of the gateway runs. Malformed protobuf is refused by the codec
//! (tonic answers it `INTERNAL`, gRPC's code for an unparseable message);
//! a message that parses must decode to a 4xx error or to a request
//! within the limits whose tensors hold exactly their shapes' elements
//! (the same properties as the REST decoders, [`super::v2_json::check`]),
//! and the same way twice.

use prost::Message;
use switchyard::{decode_model_infer, ModelInferRequest};
use switchyard_protocol::v2::DecodeLimits;

/// Decodes `data` as a gRPC infer request and checks the outcome.
pub fn run(data: &[u8]) {
    let Ok(message) = ModelInferRequest::decode(data) else { return };
    let limits = DecodeLimits::default();
    let decoded = decode_model_infer(message.clone(), &limits);
    super::v2_json::check(&decoded, &limits);
    let again = decode_model_infer(message, &limits);
    assert_eq!(format!("{decoded:?}"), format!("{again:?}"), "decoding is not deterministic");
}
