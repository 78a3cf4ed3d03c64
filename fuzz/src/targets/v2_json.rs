//! The V2 infer request decoder on a JSON body (no binary part).

use bytes::Bytes;
use switchyard_protocol::v2::{decode_infer_request, DecodeLimits, DecodedRequest, V2Error};

/// Decodes `data` as a JSON infer request and checks the outcome.
pub fn run(data: &[u8]) {
    let limits = DecodeLimits::default();
    let decoded = decode_infer_request(Bytes::copy_from_slice(data), None, &limits);
    check(&decoded, &limits);
    let again = decode_infer_request(Bytes::copy_from_slice(data), None, &limits);
    assert_eq!(decoded.is_ok(), again.is_ok(), "decoding is not deterministic");
    if let (Ok(a), Ok(b)) = (&decoded, &again) {
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "decoding is not deterministic");
    }
}

/// The properties of a decoded request (or of its error) under `limits`:
/// errors are client errors (4xx); accepted requests stay within the
/// limits and every tensor holds exactly its shape's elements.
pub fn check(decoded: &Result<DecodedRequest, V2Error>, limits: &DecodeLimits) {
    match decoded {
        Err(e) => assert!((400..500).contains(&e.status()), "{e} answered {}", e.status()),
        Ok(req) => {
            assert!(req.inputs.len() <= limits.max_inputs, "{} inputs accepted", req.inputs.len());
            assert!(req.outputs.len() <= limits.max_outputs, "{} outputs accepted", req.outputs.len());
            assert_eq!(req.inputs.len(), req.input_parameters.len());
            let mut total = 0usize;
            for (name, tensor) in &req.inputs {
                let shape = tensor.shape();
                assert!(shape.len() <= limits.max_rank, "{name}: rank {} accepted", shape.len());
                let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
                assert_eq!(elements, Some(tensor.len()), "{name}: shape {shape:?} holds {}", tensor.len());
                assert!(tensor.len() <= limits.max_elements, "{name}: {} elements accepted", tensor.len());
                total += tensor.len();
            }
            assert!(total <= limits.max_total_elements, "{total} elements accepted in all");
        }
    }
}
