//! One recorded call as a JSON line (format version 1; see the module
//! docs of [`crate::record`]). Encoded on the writer thread.

use crate::answer::Answer;
use crate::error::GatewayError;
use crate::v2::binary::encode_bytes_elements;
use crate::v2::Parameters;
use base64::Engine;
use serde_json::{json, Value};
use switchyard_runtime::tensor::TensorData;
use switchyard_runtime::Tensor;

/// The format version written in every line (`"v"`).
pub const FORMAT_VERSION: u64 = 1;

/// How a recorded call ended.
#[derive(Debug, Clone)]
pub enum Ending {
    /// Answered, from `cache` (`hit-l1`, `miss`, ...).
    Answered {
        /// How the answer was reached.
        answer: std::sync::Arc<Answer>,
        /// The cache outcome.
        cache: &'static str,
    },
    /// Failed with this HTTP status and error label.
    Failed {
        /// HTTP status (gRPC: the status the same failure has over REST).
        status: u16,
        /// The error's label.
        label: &'static str,
    },
}

impl Ending {
    /// The ending of a call that produced `result`.
    pub fn of(result: &Result<(std::sync::Arc<Answer>, &'static str), &GatewayError>) -> Ending {
        match result {
            Ok((answer, cache)) => Ending::Answered { answer: answer.clone(), cache },
            Err(e) => Ending::Failed { status: e.status(), label: e.label() },
        }
    }
}

/// One recorded inference call.
#[derive(Debug, Clone)]
pub struct TrafficRecord {
    /// The route.
    pub route: String,
    /// Arrival, milliseconds since the Unix epoch.
    pub arrived_ms: u64,
    /// `rest` or `grpc`.
    pub protocol: &'static str,
    /// The request `id`.
    pub id: Option<String>,
    /// The tenant, hashed ([`hash_tenant`]).
    pub tenant: Option<String>,
    /// Inputs as decoded.
    pub inputs: Vec<(String, Tensor)>,
    /// Requested outputs (empty: all).
    pub outputs: Vec<String>,
    /// Request parameters.
    pub parameters: Parameters,
    /// The request's budget in ms.
    pub budget_ms: u64,
    /// Arrival to answer (or failure), microseconds.
    pub latency_us: u64,
    /// How it ended.
    pub ending: Ending,
}

/// A tenant as recorded: the first 16 hex digits of its BLAKE3 hash, so
/// lines from one tenant group together without naming it.
pub fn hash_tenant(tenant: &str) -> String {
    blake3::hash(tenant.as_bytes()).to_hex()[..16].to_string()
}

/// A tensor's data in Triton's binary layout, base64.
fn data_b64(tensor: &Tensor) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    match tensor.data() {
        TensorData::Fixed(bytes) => engine.encode(bytes),
        TensorData::Strings(items) => {
            let mut out = Vec::new();
            encode_bytes_elements(items, &mut out);
            engine.encode(out)
        }
    }
}

impl TrafficRecord {
    /// The record as one JSON line, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        let inputs: Vec<Value> = self
            .inputs
            .iter()
            .map(|(name, t)| {
                json!({ "name": name, "datatype": t.dtype().v2_name(), "shape": t.shape(), "data_b64": data_b64(t) })
            })
            .collect();
        let (answer, error) = match &self.ending {
            Ending::Answered { answer, cache } => (
                json!({
                    "model": answer.model,
                    "version": answer.version,
                    "pool": answer.pool,
                    "device": answer.device,
                    "reason": answer.reason,
                    "batch_size": answer.batch_size,
                    "degraded": answer.degraded,
                    "cache": cache,
                    "confidence": answer.confidence,
                }),
                Value::Null,
            ),
            Ending::Failed { status, label } => (Value::Null, json!({ "status": status, "error": label })),
        };
        let line = json!({
            "v": FORMAT_VERSION,
            "route": self.route,
            "arrived_ms": self.arrived_ms,
            "protocol": self.protocol,
            "id": self.id,
            "tenant": self.tenant,
            "inputs": inputs,
            "outputs": self.outputs,
            "parameters": self.parameters,
            "budget_ms": self.budget_ms,
            "latency_us": self.latency_us,
            "answer": answer,
            "error": error,
        });
        let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use switchyard_runtime::tensor::DataType;

    fn answer() -> Answer {
        Answer {
            model: "digits-cheap".into(),
            version: 1,
            device: "cpu".into(),
            pool: "cpu".into(),
            reason: "cascade_confident".into(),
            batch_size: 3,
            outputs: Vec::new(),
            budget_ms: 50,
            degraded: false,
            confidence: Some(0.875),
        }
    }

    fn record(ending: Ending) -> TrafficRecord {
        let x = Tensor::new(
            DataType::F32,
            vec![1, 2],
            TensorData::Fixed(Bytes::from_static(&[0, 0, 128, 63, 0, 0, 0, 64])),
        )
        .unwrap();
        let words =
            Tensor::new(DataType::Bytes, vec![1], TensorData::Strings(vec![Bytes::from_static(b"hi")]))
                .unwrap();
        TrafficRecord {
            route: "digits".into(),
            arrived_ms: 1_764_000_000_000,
            protocol: "rest",
            id: Some("r-1".into()),
            tenant: Some(hash_tenant("team-a")),
            inputs: vec![("X".into(), x), ("text".into(), words)],
            outputs: vec!["label".into()],
            parameters: serde_json::Map::new(),
            budget_ms: 50,
            latency_us: 812,
            ending,
        }
    }

    #[test]
    fn an_answered_line_holds_the_inputs_and_the_decision() {
        let line =
            record(Ending::Answered { answer: std::sync::Arc::new(answer()), cache: "miss" }).to_line();
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["v"], 1);
        assert_eq!(v["inputs"][0]["shape"], json!([1, 2]));
        let engine = base64::engine::general_purpose::STANDARD;
        let raw = engine.decode(v["inputs"][0]["data_b64"].as_str().unwrap()).unwrap();
        assert_eq!(raw, [0, 0, 128, 63, 0, 0, 0, 64]);
        let text = engine.decode(v["inputs"][1]["data_b64"].as_str().unwrap()).unwrap();
        assert_eq!(text, [2, 0, 0, 0, b'h', b'i']);
        assert_eq!(v["answer"]["model"], "digits-cheap");
        assert_eq!(v["answer"]["confidence"], 0.875);
        assert_eq!(v["answer"]["cache"], "miss");
        assert_eq!(v["error"], Value::Null);
        assert_eq!(v["tenant"].as_str().unwrap().len(), 16);
        assert_ne!(v["tenant"], "team-a");
    }

    #[test]
    fn a_failed_line_holds_the_status() {
        let v: Value =
            serde_json::from_slice(&record(Ending::Failed { status: 429, label: "shed" }).to_line()).unwrap();
        assert_eq!(v["answer"], Value::Null);
        assert_eq!(v["error"], json!({ "status": 429, "error": "shed" }));
    }
}
