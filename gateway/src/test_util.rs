//! Test fakes shared by the crate's tests (today the routing tests): a scripted backend whose runs
//! can be held until released (so that ordering and cancellation are
//! checked deterministically), and models for calibration's shadow runs.

use crate::routing::backend::{Backend, BackendError, BackendResponse};
use crate::routing::calibration::ShadowModels;
use parking_lot::Mutex;
use router_policies::{
    CandidateModel, CascadePolicy, Device, FleetView, LatencyBucket, LatencyModel, PoolView,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use switchyard_runtime::{InferenceRequest, RuntimeError, Tensor};
use tokio::sync::Notify;

/// One model's scripted behaviour: its probabilities (or error), and a
/// gate it waits on before answering when set.
struct Script {
    outcome: Result<Vec<f32>, RuntimeError>,
    gate: Option<Arc<Notify>>,
}

/// Answers from scripts; logs `start M`, `done M` and `dropped M`.
/// Successful runs answer on their second poll at the earliest, as a run
/// queued on a pool does; failures answer at once.
pub(crate) struct Fake {
    pub(crate) fleet: FleetView,
    scripts: HashMap<String, Script>,
    log: Arc<Mutex<Vec<String>>>,
    /// The log as the stream's writer saw it when it took each draft.
    pub(crate) log_at_draft_written: Mutex<Vec<Vec<String>>>,
}

/// Logs `dropped M` when a run is dropped before it answered.
struct DropLog {
    model: String,
    done: bool,
    log: Arc<Mutex<Vec<String>>>,
}

impl Drop for DropLog {
    fn drop(&mut self) {
        if !self.done {
            self.log.lock().push(format!("dropped {}", self.model));
        }
    }
}

impl Fake {
    /// Cheap and heavy models, one CPU pool each; the heavy pool holds
    /// `heavy_queue` queued requests.
    pub(crate) fn new(heavy_queue: usize) -> Fake {
        let fleet =
            FleetView { candidates: vec![model("cheap", 0, true, 0), model("heavy", 1, true, heavy_queue)] };
        Fake {
            fleet,
            scripts: HashMap::new(),
            log: Arc::new(Mutex::new(Vec::new())),
            log_at_draft_written: Mutex::new(Vec::new()),
        }
    }

    /// `model` answers `outcome` (its probabilities), after `gate` when set.
    pub(crate) fn on(
        mut self,
        model: &str,
        outcome: Result<Vec<f32>, RuntimeError>,
        gate: Option<Arc<Notify>>,
    ) -> Fake {
        self.scripts.insert(model.into(), Script { outcome, gate });
        self
    }

    /// What ran, in order.
    pub(crate) fn log(&self) -> Vec<String> {
        self.log.lock().clone()
    }
}

impl Backend for Fake {
    fn fleet(&self, _models: &[String]) -> FleetView {
        self.fleet.clone()
    }

    fn has_output(&self, _model: &str, output: &str) -> bool {
        output == "probabilities"
    }

    fn run(
        &self,
        model: &str,
        pool: Option<&str>,
        request: InferenceRequest,
    ) -> impl Future<Output = Result<BackendResponse, BackendError>> + Send {
        let script = self.scripts.get(model);
        let outcome = script.map_or_else(|| Err(unavailable(model)), |s| s.outcome.clone());
        let gate = script.and_then(|s| s.gate.clone());
        let (model, pool, log) = (model.to_string(), pool.unwrap_or("cpu").to_string(), self.log.clone());
        async move {
            log.lock().push(format!("start {model}"));
            let mut guard = DropLog { model: model.clone(), done: false, log: log.clone() };
            if let Some(gate) = gate {
                gate.notified().await;
            }
            if outcome.is_ok() {
                // Like a queued run, a successful one answers on a later poll;
                // failures (a full queue, a missing device) are immediate.
                tokio::task::yield_now().await;
            }
            guard.done = true;
            log.lock().push(format!("done {model}"));
            let probs = outcome?;
            Ok(response(model, pool, &probs, request.outputs))
        }
    }
}

/// A scripted model's answer on a CPU pool: `label` (one row) and
/// `probabilities` (`probs`), as many of them as `requested` names.
pub(crate) fn response(
    model: String,
    pool: String,
    probs: &[f32],
    requested: Option<Vec<String>>,
) -> BackendResponse {
    let all = vec![
        ("label".to_string(), Tensor::from_f32(vec![1], &[1.0]).unwrap()),
        ("probabilities".to_string(), Tensor::from_f32(vec![1, probs.len()], probs).unwrap()),
    ];
    let outputs = match requested {
        None => all,
        Some(names) => all.into_iter().filter(|(n, _)| names.contains(n)).collect(),
    };
    BackendResponse { model, version: 1, pool, device: Device::Cpu, outputs, batch_size: 1 }
}

/// A candidate with one CPU pool.
pub(crate) fn model(name: &str, rank: u32, available: bool, queue_depth: usize) -> CandidateModel {
    let pool = PoolView {
        name: "cpu".into(),
        device: Device::Cpu,
        available,
        paused: false,
        workers: 1,
        queue_depth,
        in_flight: 0,
        queue_capacity: Some(100),
        max_batch_size: 4,
        relative_cost: 1.0,
        latency: LatencyModel {
            buckets: vec![LatencyBucket { max_batch: 1, latency: Duration::from_millis(1), samples: 10 }],
            stats_age: Duration::ZERO,
        },
    };
    CandidateModel {
        name: name.into(),
        quality_rank: rank,
        relative_cost: 1.0 + rank as f64,
        available,
        pools: vec![pool],
    }
}

/// A model the fake has no script for.
pub(crate) fn unavailable(model: &str) -> RuntimeError {
    RuntimeError::DeviceUnavailable { model: model.into(), reason: "not scripted".into() }
}

/// An execution failure of `model`.
pub(crate) fn failed(model: &str) -> RuntimeError {
    RuntimeError::Execution { model: model.into(), reason: "boom".into() }
}

pub(crate) const CONFIDENT: [f32; 2] = [0.9, 0.1];
pub(crate) const UNSURE: [f32; 2] = [0.5, 0.5];
pub(crate) const HEAVY: [f32; 2] = [0.3, 0.7];

/// The pair of cheap and heavy, confident at 0.8.
pub(crate) fn pair() -> CascadePolicy {
    CascadePolicy { confidence_output: "probabilities".into(), threshold: 0.8, cheap: None, heavy: None }
}

/// Models for calibration's shadow runs: each answers fixed probabilities
/// (one row), or fails when it has none; every run is logged.
pub(crate) struct Shadows {
    /// Whether the heavy model is idle (else the draw is skipped).
    pub(crate) idle: bool,
    probabilities: HashMap<String, Vec<f32>>,
    /// The models run, in order.
    pub(crate) runs: Mutex<Vec<String>>,
}

impl Shadows {
    /// Idle models answering `probabilities` per model name.
    pub(crate) fn new(probabilities: &[(&str, &[f32])]) -> Arc<Shadows> {
        let probabilities = probabilities.iter().map(|(m, p)| (m.to_string(), p.to_vec())).collect();
        Arc::new(Shadows { idle: true, probabilities, runs: Mutex::new(Vec::new()) })
    }
}

impl ShadowModels for Shadows {
    fn idle(&self, _model: &str) -> bool {
        self.idle
    }

    fn shadow_run(
        &self,
        model: &str,
        request: InferenceRequest,
    ) -> impl Future<Output = Result<Vec<(String, Tensor)>, RuntimeError>> + Send {
        self.runs.lock().push(model.to_string());
        let outcome = self.probabilities.get(model).cloned().ok_or_else(|| unavailable(model));
        async move {
            let probs = outcome?;
            assert_eq!(request.outputs, Some(vec!["probabilities".to_string()]));
            Ok(vec![("probabilities".to_string(), Tensor::from_f32(vec![1, probs.len()], &probs).unwrap())])
        }
    }
}
