//! Reading a traffic sample ([`crate::record`], format 1) back: each line
//! into the route, the budget, what was decided live, and a V2 request
//! whose inputs are exactly the recorded ones. Every problem names its
//! line (a truncated last line, a line of another format version, data
//! that does not fit its shape).

use base64::Engine;
use router_policies::Reason;
use serde::Deserialize;
use std::path::Path;
use switchyard_protocol::v2::binary::decode_binary;
use switchyard_protocol::v2::{DecodedRequest, Parameters, RequestedOutput};
use switchyard_runtime::tensor::{element_count, DataType};
use switchyard_runtime::Tensor;

/// One recorded call, read back.
#[derive(Debug)]
pub struct RecordedCall {
    /// The line's number in its file (1-based).
    pub line: usize,
    /// The route it was sent to.
    pub route: String,
    /// Its budget in ms.
    pub budget_ms: u64,
    /// The model that answered live (`None`: it failed).
    pub live_model: Option<String>,
    /// The live reason (`None`: the call failed, or its label is not one
    /// this build knows).
    pub live_reason: Option<Reason>,
    /// The live cache outcome.
    pub live_cache: Option<String>,
    /// Arrival, milliseconds since the Unix epoch.
    pub arrived_ms: u64,
    /// The live latency, arrival to answer, in µs.
    pub live_latency_us: u64,
    /// The tenant's hash, as recorded.
    pub tenant: Option<String>,
    /// The request to run again.
    pub request: DecodedRequest,
}

impl RecordedCall {
    /// The call's exact-match identity, as the live cache keys it: route,
    /// tenant, inputs (name, datatype, shape, data) and requested outputs.
    pub fn cache_key(&self) -> blake3::Hash {
        let mut h = blake3::Hasher::new();
        h.update(self.route.as_bytes());
        h.update(&[0]);
        h.update(self.tenant.as_deref().unwrap_or("").as_bytes());
        for (name, tensor) in &self.request.inputs {
            h.update(&[1]);
            h.update(name.as_bytes());
            h.update(tensor.dtype().v2_name().as_bytes());
            for d in tensor.shape() {
                h.update(&(*d as u64).to_le_bytes());
            }
            match tensor.data() {
                switchyard_runtime::TensorData::Fixed(bytes) => {
                    h.update(bytes);
                }
                switchyard_runtime::TensorData::Strings(items) => {
                    for item in items {
                        h.update(&(item.len() as u64).to_le_bytes());
                        h.update(item);
                    }
                }
            }
        }
        for output in &self.request.outputs {
            h.update(&[2]);
            h.update(output.name.as_bytes());
        }
        h.finalize()
    }
}

#[derive(Deserialize)]
struct Line {
    v: u64,
    route: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    arrived_ms: u64,
    #[serde(default)]
    latency_us: u64,
    #[serde(default)]
    tenant: Option<String>,
    inputs: Vec<LineInput>,
    #[serde(default)]
    outputs: Vec<String>,
    #[serde(default)]
    parameters: Parameters,
    budget_ms: u64,
    #[serde(default)]
    answer: Option<LineAnswer>,
}

#[derive(Deserialize)]
struct LineInput {
    name: String,
    datatype: String,
    shape: Vec<usize>,
    data_b64: String,
}

#[derive(Deserialize)]
struct LineAnswer {
    model: String,
    reason: String,
    cache: String,
}

/// Reads every line of `path`; the first bad line is the error.
pub fn read(path: &Path) -> Result<Vec<RecordedCall>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut calls = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let at = |why: String| format!("{}: line {number}: {why}", path.display());
        calls.push(parse_line(raw, number).map_err(at)?);
    }
    if !text.is_empty() && !text.ends_with('\n') {
        // A line the writer had not finished (the file was copied while
        // being written): it parsed, but say so rather than trust it.
        return Err(format!(
            "{}: line {}: the file ends inside a line (truncated)",
            path.display(),
            calls.len()
        ));
    }
    Ok(calls)
}

fn parse_line(raw: &str, number: usize) -> Result<RecordedCall, String> {
    let version = serde_json::from_str::<serde_json::Value>(raw)
        .map_err(|e| format!("not a traffic record ({e}); is the file truncated or from another tool?"))?
        .get("v")
        .and_then(serde_json::Value::as_u64);
    if version != Some(crate::record::line::FORMAT_VERSION) {
        return Err(format!(
            "format version {}, this switchyard reads version {}",
            version.map_or("missing".to_string(), |v| v.to_string()),
            crate::record::line::FORMAT_VERSION
        ));
    }
    let line: Line = serde_json::from_str(raw).map_err(|e| format!("not a traffic record: {e}"))?;
    let _ = line.v;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut inputs = Vec::with_capacity(line.inputs.len());
    for input in line.inputs {
        let dtype = DataType::from_v2_name(&input.datatype)
            .ok_or_else(|| format!("input {:?}: unknown datatype {:?}", input.name, input.datatype))?;
        let count =
            element_count(&input.shape).ok_or_else(|| format!("input {:?}: shape overflows", input.name))?;
        let bytes =
            engine.decode(&input.data_b64).map_err(|e| format!("input {:?}: data_b64: {e}", input.name))?;
        let data = decode_binary(&input.name, dtype, &input.shape, count, bytes.into())
            .map_err(|e| e.to_string())?;
        let tensor =
            Tensor::new(dtype, input.shape, data).map_err(|e| format!("input {:?}: {e}", input.name))?;
        inputs.push((input.name, tensor));
    }
    let outputs = line
        .outputs
        .into_iter()
        .map(|name| RequestedOutput {
            name,
            binary: false,
            classification: None,
            parameters: Parameters::new(),
        })
        .collect();
    let input_parameters = vec![Parameters::new(); inputs.len()];
    let request = DecodedRequest {
        id: line.id,
        inputs,
        input_parameters,
        outputs,
        binary_data_output: false,
        parameters: line.parameters,
    };
    Ok(RecordedCall {
        line: number,
        route: line.route,
        budget_ms: line.budget_ms,
        live_model: line.answer.as_ref().map(|a| a.model.clone()),
        // The file's text becomes the typed reason here, at the edge.
        live_reason: line.answer.as_ref().and_then(|a| Reason::from_label(&a.reason)),
        live_cache: line.answer.map(|a| a.cache),
        arrived_ms: line.arrived_ms,
        live_latency_us: line.latency_us,
        tenant: line.tenant,
        request,
    })
}
