//! Decoding of `POST /v2/models/{m}/infer` request bodies: the JSON header
//! and, with the binary tensor data extension, the tensor bytes after it.

use bytes::Bytes;
use serde_json::{Map, Value};
use switchyard_runtime::tensor::{DataType, Tensor};

use super::binary::decode_binary;
use super::bounded::ReadGuard;
use super::element::{ElementFault, Slot};
use super::error::V2Error;
use super::fields::{parse_shape, whole_number};
use super::json_data::parse_json_data;
use super::limits::DecodeLimits;
use super::raw_output::RawOutput;
use super::raw_request::{read_request, DataField};

/// JSON object type used for `parameters`.
pub type Parameters = Map<String, Value>;

/// An output the client asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedOutput {
    /// Output name.
    pub name: String,
    /// Return it as binary data: its `binary_data` parameter, or the
    /// request's `binary_data_output` when absent.
    pub binary: bool,
    /// `classification` parameter: return the top-k classes instead of the
    /// raw tensor (see [`super::classification::classify`]).
    pub classification: Option<usize>,
    /// All of the output's parameters, as sent.
    pub parameters: Parameters,
}

/// A decoded, validated infer request.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    /// The request `id`, echoed in the response (not part of cache keys).
    pub id: Option<String>,
    /// Inputs in request order.
    pub inputs: Vec<(String, Tensor)>,
    /// Each input's `parameters` as sent (`binary_data_size` included),
    /// aligned with `inputs`.
    pub input_parameters: Vec<Parameters>,
    /// Requested outputs in request order; empty means all outputs.
    pub outputs: Vec<RequestedOutput>,
    /// Request-level `binary_data_output`: outputs not listed (all of them
    /// when `outputs` is empty) are returned as binary.
    pub binary_data_output: bool,
    /// The request-level `parameters` (`timeout`, `priority`, custom keys).
    pub parameters: Parameters,
}

impl DecodedRequest {
    /// The input named `name`.
    pub fn input(&self, name: &str) -> Option<&Tensor> {
        self.inputs.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// Whether output `name` is to be returned as binary data.
    pub fn output_is_binary(&self, name: &str) -> bool {
        self.outputs.iter().find(|o| o.name == name).map_or(self.binary_data_output, |o| o.binary)
    }
}

/// Decodes an infer request body.
///
/// `header_len` is the `Inference-Header-Content-Length` header: the JSON
/// header is `body[..header_len]` and the binary data of inputs that carry
/// `binary_data_size` follows, in input order. Without it the whole body
/// is JSON. Fixed-width binary inputs are zero-copy slices of `body`.
///
/// Lists are counted as they are read: a request past `limits.max_inputs`,
/// `limits.max_outputs` or `limits.max_json_values` gets its 413 without
/// the rest of the list being built ([`super::bounded`]).
pub fn decode_infer_request(
    body: Bytes,
    header_len: Option<usize>,
    limits: &DecodeLimits,
) -> Result<DecodedRequest, V2Error> {
    let header_len = header_len.unwrap_or(body.len());
    if header_len > body.len() {
        return Err(V2Error::HeaderLength { header_len, body_len: body.len() });
    }
    let header = &body[..header_len];
    if !is_object(header) {
        return Err(V2Error::InvalidJson("the request must be a JSON object".to_owned()));
    }
    let guard = ReadGuard::new(limits);
    let raw = read_request(header, limits, &guard)?;
    let binary = body.slice(header_len..);

    let id = match raw.id {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(invalid("id", "the request", "must be a string")),
    };
    let parameters = object(raw.parameters, "parameters", "the request")?;
    let binary_data_output = match parameters.get("binary_data_output") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("binary_data_output", "the request parameters", "must be a boolean")),
    };

    // At most `limits.max_inputs`: the reader stopped past it.
    let raw_inputs = raw.inputs.ok_or_else(|| missing("inputs", "the request"))?;
    let mut inputs: Vec<(String, Tensor)> = Vec::with_capacity(raw_inputs.len());
    let mut input_parameters = Vec::with_capacity(raw_inputs.len());
    let mut offset = 0usize;
    let mut total = 0usize;
    for (index, slot) in raw_inputs.into_iter().enumerate() {
        let parsed = match slot {
            Ok(parsed) => parsed,
            Err(fault) => return Err(element_fault("inputs", index, fault)),
        };
        let name = match parsed.name {
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid("name", &format!("inputs[{index}]"), "must be a string")),
            None => return Err(missing("name", &format!("inputs[{index}]"))),
        };
        if inputs.iter().any(|(n, _)| *n == name) {
            return Err(V2Error::Duplicate { kind: "input", name });
        }
        let context = format!("input '{name}'");
        let dtype = match parsed.datatype {
            Some(Value::String(s)) => DataType::from_v2_name(&s)
                .ok_or_else(|| V2Error::UnknownDatatype { input: name.clone(), datatype: s })?,
            Some(_) => return Err(invalid("datatype", &context, "must be a string")),
            None => return Err(missing("datatype", &context)),
        };
        let shape = parse_shape(parsed.shape.as_ref(), &context, limits)?;
        let count = limits.check_shape(&name, &shape)?;
        limits.check_rows(&name, &shape)?;
        // Before its data is decoded: data the model would refuse costs nothing.
        limits.check_signature(&name, dtype, &shape)?;
        total = limits.add_total(total, count)?;
        let params = object(parsed.parameters, "parameters", &context)?;
        if params.contains_key("shared_memory_region") {
            return Err(V2Error::Unsupported(format!(
                "input '{name}' uses shared memory, which Switchyard does not support; send its data in the request body"
            )));
        }
        let binary_size = match params.get("binary_data_size") {
            None => None,
            Some(v) => Some(
                whole_number(v)
                    .ok_or_else(|| invalid("binary_data_size", &context, "must be a non-negative integer"))?,
            ),
        };
        let data = match (parsed.data, binary_size) {
            (Some(_), Some(_)) => return Err(V2Error::ConflictingData { input: name }),
            (None, None) => return Err(V2Error::MissingData { input: name }),
            (Some(DataField::Raw(json)), None) => parse_json_data(&name, dtype, &shape, count, json)?,
            (Some(DataField::Decoded(decoded)), None) => decoded?,
            (None, Some(size)) => {
                let remaining = binary.len() - offset;
                if size > remaining {
                    return Err(V2Error::BinaryOverrun { input: name, size, remaining });
                }
                let slice = binary.slice(offset..offset + size);
                offset += size;
                decode_binary(&name, dtype, &shape, count, slice)?
            }
        };
        // The parsers above produce exactly `count` elements; this cannot
        // fail, but report it as the client's shape error if it does.
        let tensor = Tensor::new(dtype, shape.clone(), data).map_err(|e| V2Error::ShapeMismatch {
            input: name.clone(),
            shape,
            reason: e.to_string(),
        })?;
        inputs.push((name, tensor));
        input_parameters.push(params);
    }
    if offset != binary.len() {
        return Err(V2Error::TrailingBytes { extra: binary.len() - offset });
    }

    let outputs = parse_outputs(raw.outputs, binary_data_output)?;
    Ok(DecodedRequest { id, inputs, input_parameters, outputs, binary_data_output, parameters })
}

/// Parses the requested outputs (at most `limits.max_outputs`: the reader
/// stopped past it).
fn parse_outputs(
    raw: Option<Vec<Slot<RawOutput>>>,
    binary_data_output: bool,
) -> Result<Vec<RequestedOutput>, V2Error> {
    let raw = raw.unwrap_or_default();
    let mut outputs: Vec<RequestedOutput> = Vec::with_capacity(raw.len());
    for (index, slot) in raw.into_iter().enumerate() {
        let parsed = slot.map_err(|fault| element_fault("outputs", index, fault))?;
        let name = match parsed.name {
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid("name", &format!("outputs[{index}]"), "must be a string")),
            None => return Err(missing("name", &format!("outputs[{index}]"))),
        };
        if outputs.iter().any(|o| o.name == name) {
            return Err(V2Error::Duplicate { kind: "output", name });
        }
        let context = format!("output '{name}'");
        let parameters = object(parsed.parameters, "parameters", &context)?;
        let binary = match parameters.get("binary_data") {
            None => binary_data_output,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(invalid("binary_data", &context, "must be a boolean")),
        };
        let classification = match parameters.get("classification") {
            None => None,
            Some(v) => match whole_number(v) {
                Some(k) if k > 0 => Some(k),
                _ => return Err(invalid("classification", &context, "must be a positive integer")),
            },
        };
        outputs.push(RequestedOutput { name, binary, classification, parameters });
    }
    Ok(outputs)
}

/// Whether JSON text is an object (serde would also take a struct from an
/// array of its fields).
fn is_object(text: &[u8]) -> bool {
    text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// The error of element `index` of the `field` list that is not an
/// object validation can read.
fn element_fault(field: &'static str, index: usize, fault: ElementFault) -> V2Error {
    let reason = match fault {
        ElementFault::Duplicate(name) => format!("duplicate field `{name}`"),
        ElementFault::NotObject => "must be an object".to_owned(),
    };
    invalid_owned(field, format!("{field}[{index}]"), reason)
}

/// A `parameters`-like field: absent or null is empty, else an object.
fn object(raw: Option<Value>, field: &'static str, context: &str) -> Result<Parameters, V2Error> {
    match raw {
        None | Some(Value::Null) => Ok(Parameters::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(_) => Err(invalid(field, context, "must be an object")),
    }
}

fn missing(field: &'static str, context: &str) -> V2Error {
    V2Error::MissingField { field, context: context.to_owned() }
}

fn invalid(field: &'static str, context: &str, reason: &str) -> V2Error {
    invalid_owned(field, context.to_owned(), reason.to_owned())
}

fn invalid_owned(field: &'static str, context: String, reason: String) -> V2Error {
    V2Error::InvalidField { field, context, reason }
}
