//! Counting a gRPC request's repeated fields on the wire, before prost
//! decodes it: a message of empty entries (`inputs`, `outputs`,
//! `raw_input_contents`, parameters, `bytes_contents`) is a few bytes per
//! entry on the wire and tens of bytes per entry decoded, so an 8 MiB
//! message could take gigabytes before the decoded request met any limit.
//!
//! [`WireBounds::check_wire`] runs in the listener's codec
//! ([`super::codec`]) on every message. For `ModelInferRequest` it
//! refuses, before anything is allocated:
//! 1. more `inputs`, `outputs` or `raw_input_contents` entries than
//!    [`DecodeLimits`] allows (413, as the decoded check would);
//! 2. more parameter entries (of the request, its inputs and outputs
//!    together) than REST's JSON values (`DecodeLimits::max_json_values`)
//!    (413);
//! 3. an input with more dimensions than the rank limit (413);
//! 4. an input whose typed contents hold more elements than its shape
//!    declares, or than one input may hold (`server.max_request_elements`,
//!    given to [`set_max_elements`] when the listener starts) (400/413, as
//!    the decoded check would).
//!
//! A malformed message passes: prost then reports it
//! (`INVALID_ARGUMENT`).

use super::proto::*;
use super::wire::{fields, packed_varints, varint, WireValue};
use std::sync::atomic::{AtomicUsize, Ordering};
use switchyard_protocol::v2::{DecodeLimits, V2Error};

/// Most elements of one input (`server.max_request_elements`); the codec
/// is built by the generated service without the config, so the listener
/// sets it here when it starts.
static MAX_ELEMENTS: AtomicUsize = AtomicUsize::new(16 << 20);

/// Sets the most elements one input may hold (the listener, at start-up).
pub fn set_max_elements(max: usize) {
    MAX_ELEMENTS.store(max, Ordering::Relaxed);
}

/// A message type's checks on its encoded form.
pub trait WireBounds {
    /// Checks the encoded `message` before it is decoded; by default
    /// nothing (messages without repeated fields a client controls).
    fn check_wire(_message: &[u8]) -> Result<(), V2Error> {
        Ok(())
    }
}

impl WireBounds for ServerLiveRequest {}
impl WireBounds for ServerReadyRequest {}
impl WireBounds for ModelReadyRequest {}
impl WireBounds for ServerMetadataRequest {}
impl WireBounds for ModelMetadataRequest {}
impl WireBounds for ModelConfigRequest {}
impl WireBounds for ModelStatisticsRequest {}

impl WireBounds for ModelInferRequest {
    fn check_wire(message: &[u8]) -> Result<(), V2Error> {
        let limits = DecodeLimits::default();
        let (mut inputs, mut outputs, mut raw, mut parameters) = (0, 0, 0, 0);
        for field in fields(message) {
            let Ok((number, value)) = field else { return Ok(()) };
            match (number, value) {
                (4, _) => parameters += 1,
                (5, WireValue::Bytes(input)) => {
                    inputs += 1;
                    if inputs <= limits.max_inputs {
                        parameters += check_input(input, &limits)?;
                    }
                }
                (6, WireValue::Bytes(output)) => {
                    outputs += 1;
                    parameters += fields(output).map_while(Result::ok).filter(|(n, _)| *n == 2).count();
                }
                (7, _) => raw += 1,
                _ => {}
            }
        }
        at_most(inputs, limits.max_inputs, "inputs")?;
        at_most(outputs, limits.max_outputs, "requested outputs")?;
        at_most(raw, limits.max_inputs, "raw_input_contents entries")?;
        at_most(parameters, limits.max_json_values, "parameters")
    }
}

/// One `InferInputTensor`: rank and typed contents against the shape;
/// returns its parameter count.
fn check_input(input: &[u8], limits: &DecodeLimits) -> Result<usize, V2Error> {
    let mut name: &[u8] = b"";
    let mut dims = Dims::default();
    let (mut parameters, mut elements) = (0usize, 0usize);
    for field in fields(input) {
        let Ok((number, value)) = field else { return Ok(parameters) };
        match (number, value) {
            (1, WireValue::Bytes(text)) => name = text,
            (3, WireValue::Varint(d)) => dims.push(d),
            (3, WireValue::Bytes(mut run)) => {
                while let Ok(d) = varint(&mut run) {
                    dims.push(d);
                }
            }
            (4, _) => parameters += 1,
            (5, WireValue::Bytes(contents)) => elements = elements.saturating_add(content_elements(contents)),
            _ => {}
        }
    }
    let name = String::from_utf8_lossy(name);
    let name = crate::error::cut(&name);
    if dims.rank > limits.max_rank {
        return Err(V2Error::TooLarge(format!(
            "input '{name}' has {} dimensions, the limit is {}",
            dims.rank, limits.max_rank
        )));
    }
    let max = MAX_ELEMENTS.load(Ordering::Relaxed);
    if elements > max {
        return Err(V2Error::TooLarge(format!(
            "input '{name}' holds {elements} elements, the limit is {max} (server.max_request_elements)"
        )));
    }
    let allowed = dims.elements.unwrap_or(max);
    if elements > allowed {
        return Err(V2Error::InvalidField {
            field: "contents",
            context: format!("input '{name}'"),
            reason: format!("holds {elements} elements, more than its shape allows ({allowed})"),
        });
    }
    Ok(parameters)
}

/// A shape read off the wire: its rank and, when every dimension is a
/// non-negative number whose product fits, its element count.
struct Dims {
    rank: usize,
    elements: Option<usize>,
}

impl Default for Dims {
    fn default() -> Self {
        Dims { rank: 0, elements: Some(1) }
    }
}

impl Dims {
    fn push(&mut self, dim: u64) {
        self.rank += 1;
        // int64 on the wire: a negative dimension is a huge varint.
        let dim = usize::try_from(dim).ok().filter(|_| i64::try_from(dim).is_ok());
        self.elements = self.elements.zip(dim).and_then(|(n, d)| n.checked_mul(d));
    }
}

/// The elements an `InferTensorContents` holds, over all its fields.
fn content_elements(contents: &[u8]) -> usize {
    let mut elements = 0usize;
    for field in fields(contents) {
        let Ok((number, value)) = field else { return elements };
        let n = match (number, value) {
            // bool, int, int64, uint, uint64: packed varints or one each.
            (1..=5, WireValue::Bytes(run)) => packed_varints(run),
            (6, WireValue::Bytes(run)) => run.len() / 4,
            (7, WireValue::Bytes(run)) => run.len() / 8,
            // bytes_contents: one entry per field.
            (_, _) => 1,
        };
        elements = elements.saturating_add(n);
    }
    elements
}

fn at_most(count: usize, limit: usize, what: &str) -> Result<(), V2Error> {
    if count > limit {
        return Err(V2Error::TooLarge(format!("{count} {what}, the limit is {limit}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
    use prost::Message;

    fn input(name: &str, shape: Vec<i64>, contents: Option<InferTensorContents>) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: "BYTES".into(),
            shape,
            contents,
            ..Default::default()
        }
    }

    fn check(request: &ModelInferRequest) -> Result<(), V2Error> {
        ModelInferRequest::check_wire(&request.encode_to_vec())
    }

    #[test]
    fn a_valid_request_passes() {
        let contents = InferTensorContents { fp32_contents: vec![0.5; 128], ..Default::default() };
        let request = ModelInferRequest {
            model_name: "m".into(),
            inputs: vec![input("X", vec![2, 64], Some(contents))],
            outputs: vec![InferRequestedOutputTensor { name: "label".into(), ..Default::default() }],
            ..Default::default()
        };
        assert_eq!(check(&request), Ok(()));
    }

    #[test]
    fn empty_entries_are_counted_before_decoding() {
        let many_inputs =
            ModelInferRequest { inputs: vec![input("", vec![], None); 65], ..Default::default() };
        assert!(matches!(check(&many_inputs), Err(V2Error::TooLarge(m)) if m.contains("65 inputs")));
        let many_outputs = ModelInferRequest { outputs: vec![Default::default(); 100], ..Default::default() };
        assert!(
            matches!(check(&many_outputs), Err(V2Error::TooLarge(m)) if m.contains("100 requested outputs"))
        );
        let many_raw =
            ModelInferRequest { raw_input_contents: vec![Default::default(); 65], ..Default::default() };
        assert!(matches!(check(&many_raw), Err(V2Error::TooLarge(_))));
        let limit = DecodeLimits::default().max_json_values;
        let output = InferRequestedOutputTensor {
            parameters: (0..limit).map(|i| (i.to_string(), Default::default())).collect(),
            ..Default::default()
        };
        let many_parameters = ModelInferRequest {
            parameters: [("one".to_string(), Default::default())].into(),
            outputs: vec![output],
            ..Default::default()
        };
        let err = check(&many_parameters).unwrap_err().to_string();
        assert!(err.contains(&format!("{} parameters, the limit is {limit}", limit + 1)), "{err}");
    }

    #[test]
    fn contents_beyond_the_shape_and_deep_shapes_are_refused() {
        let strings =
            InferTensorContents { bytes_contents: vec![Default::default(); 1000], ..Default::default() };
        let request =
            ModelInferRequest { inputs: vec![input("T", vec![1, 2], Some(strings))], ..Default::default() };
        let err = check(&request).unwrap_err();
        assert!(err.to_string().contains("holds 1000 elements"), "{err}");
        assert_eq!(err.status(), 400);
        let deep = ModelInferRequest { inputs: vec![input("T", vec![1; 17], None)], ..Default::default() };
        assert!(matches!(check(&deep), Err(V2Error::TooLarge(m)) if m.contains("17 dimensions")));
        let negative = InferTensorContents { int64_contents: vec![1, 2, 3], ..Default::default() };
        let request =
            ModelInferRequest { inputs: vec![input("T", vec![-1, 3], Some(negative))], ..Default::default() };
        assert_eq!(check(&request), Ok(()), "a negative dimension is left for the decoded check");
    }

    #[test]
    fn malformed_messages_are_left_to_prost() {
        assert_eq!(ModelInferRequest::check_wire(&[0x2a, 0x10, 0x01]), Ok(()));
    }
}
