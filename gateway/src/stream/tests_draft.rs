//! Draft-then-final orchestration against a scripted backend whose runs can
//! be held until released, so that ordering and cancellation are checked
//! deterministically. The same paths run on the real runtime in
//! `gateway/tests/python/test_sse.py`.

use super::*;
use crate::routing::backend::{BackendError, BackendResponse};
use parking_lot::Mutex;
use router_policies::{
    Budget, CandidateModel, Device, Estimator, LatencyBucket, LatencyModel, PolicyConfig, PoolView,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_runtime::{RuntimeError, Tensor};
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
struct Fake {
    fleet: FleetView,
    scripts: HashMap<String, Script>,
    log: Arc<Mutex<Vec<String>>>,
    /// The log as the stream's writer saw it when it took each draft.
    log_at_draft_written: Mutex<Vec<Vec<String>>>,
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
    fn new(heavy_queue: usize) -> Fake {
        let fleet =
            FleetView { candidates: vec![model("cheap", 0, true, 0), model("heavy", 1, true, heavy_queue)] };
        Fake {
            fleet,
            scripts: HashMap::new(),
            log: Arc::new(Mutex::new(Vec::new())),
            log_at_draft_written: Mutex::new(Vec::new()),
        }
    }

    fn on(mut self, model: &str, outcome: Result<Vec<f32>, RuntimeError>, gate: Option<Arc<Notify>>) -> Fake {
        self.scripts.insert(model.into(), Script { outcome, gate });
        self
    }

    fn log(&self) -> Vec<String> {
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
            let all = vec![
                ("label".to_string(), Tensor::from_f32(vec![1], &[1.0]).unwrap()),
                ("probabilities".to_string(), Tensor::from_f32(vec![1, probs.len()], &probs).unwrap()),
            ];
            let outputs = match request.outputs {
                None => all,
                Some(names) => all.into_iter().filter(|(n, _)| names.contains(n)).collect(),
            };
            Ok(BackendResponse { model, version: 1, pool, device: Device::Cpu, outputs, batch_size: 1 })
        }
    }
}

fn model(name: &str, rank: u32, available: bool, queue_depth: usize) -> CandidateModel {
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

fn unavailable(model: &str) -> RuntimeError {
    RuntimeError::DeviceUnavailable { model: model.into(), reason: "not scripted".into() }
}

fn failed(model: &str) -> RuntimeError {
    RuntimeError::Execution { model: model.into(), reason: "boom".into() }
}

const CONFIDENT: [f32; 2] = [0.9, 0.1];
const UNSURE: [f32; 2] = [0.5, 0.5];
const HEAVY: [f32; 2] = [0.3, 0.7];

fn pair() -> CascadePolicy {
    CascadePolicy { confidence_output: "probabilities".into(), threshold: 0.8, cheap: None, heavy: None }
}

/// Runs the pair with `mode` and the client asking for `label` only;
/// returns the outcome and the drafts seen (model, confidence).
async fn run_pair(
    fake: &Fake,
    mode: DraftMode,
    limit: Option<usize>,
    on_each_draft: Option<Arc<Notify>>,
) -> (Result<Finished, GatewayError>, Vec<(String, Option<f32>)>) {
    let models: Vec<String> = vec!["cheap".into(), "heavy".into()];
    let policy = PolicyConfig::Cascade(pair());
    let estimator = Estimator::default();
    let routing = Routing {
        route: "r",
        models: &models,
        policy: &policy,
        estimator: &estimator,
        budget: Budget::new(Duration::from_secs(1)),
        received: Instant::now(),
    };
    let cascade = pair();
    let run = PairRun { routing: &routing, pair: &cascade, mode, parallel_queue_limit: limit };
    let drafts = Mutex::new(Vec::new());
    let (written_tx, mut written_rx) = tokio::sync::mpsc::unbounded_channel();
    let sink = |answer: &Answer, confidence: Option<f32>| {
        assert!(answer.outputs.iter().all(|(n, _)| n == "label"), "the added output is removed");
        drafts.lock().push((answer.model.clone(), confidence));
        let _ = written_tx.send(());
        if let Some(n) = &on_each_draft {
            n.notify_one();
        }
    };
    let x = Tensor::from_f32(vec![1, 2], &[0.0, 1.0]).unwrap();
    let request = InferenceRequest { inputs: vec![("X".into(), x)], outputs: Some(vec!["label".into()]) };
    // Driven as `respond` drives it: the producer first, then the writer
    // taking what it emitted, which notes the log when it takes a draft.
    let mut producer = pin!(draft_then_final(fake, &run, request, &sink));
    let driven = async {
        loop {
            tokio::select! {
                biased;
                outcome = &mut producer => return outcome,
                Some(()) = written_rx.recv() => fake.log_at_draft_written.lock().push(fake.log()),
            }
        }
    };
    let outcome =
        tokio::time::timeout(Duration::from_secs(5), driven).await.expect("the pair never finished");
    let seen = drafts.lock().clone();
    (outcome, seen)
}

#[tokio::test]
async fn parallel_confident_draft_is_final_and_drops_the_heavy_run() {
    let held = Arc::new(Notify::new());
    let fake =
        Fake::new(0).on("cheap", Ok(CONFIDENT.to_vec()), None).on("heavy", Ok(HEAVY.to_vec()), Some(held));
    let (outcome, drafts) = run_pair(&fake, DraftMode::Parallel, None, None).await;
    let f = outcome.unwrap();
    assert_eq!(drafts, [("cheap".to_string(), Some(0.9))]);
    assert!(f.from_draft);
    assert_eq!((f.answer.model.as_str(), f.answer.reason), ("cheap", Reason::CascadeConfident));
    assert_eq!(f.ran, Ran::Parallel);
    let log = fake.log();
    assert!(log.contains(&"start heavy".to_string()), "parallel queues heavy at once: {log:?}");
    assert!(log.contains(&"dropped heavy".to_string()), "{log:?}");
    assert!(!log.contains(&"done heavy".to_string()), "{log:?}");
}

#[tokio::test]
async fn parallel_unconfident_draft_comes_first_then_the_heavy_final() {
    let held = Arc::new(Notify::new());
    let fake = Fake::new(0).on("cheap", Ok(UNSURE.to_vec()), None).on(
        "heavy",
        Ok(HEAVY.to_vec()),
        Some(held.clone()),
    );
    // The heavy run is released only once the draft was sent.
    let (outcome, drafts) = run_pair(&fake, DraftMode::Parallel, None, Some(held)).await;
    let f = outcome.unwrap();
    assert_eq!(drafts, [("cheap".to_string(), Some(0.5))]);
    assert!(!f.from_draft);
    assert_eq!((f.answer.model.as_str(), f.answer.reason), ("heavy", Reason::CascadeEscalate));
    assert_eq!(f.confidence, Some(0.7), "the heavy answer's own confidence");
    assert!(f.answer.outputs.iter().all(|(n, _)| n == "label"));
}

#[tokio::test]
async fn parallel_heavy_first_is_final_without_a_draft() {
    let held = Arc::new(Notify::new());
    let fake =
        Fake::new(0).on("cheap", Ok(UNSURE.to_vec()), Some(held)).on("heavy", Ok(HEAVY.to_vec()), None);
    let (outcome, drafts) = run_pair(&fake, DraftMode::Parallel, None, None).await;
    let f = outcome.unwrap();
    assert!(drafts.is_empty(), "the draft never delays the final");
    assert_eq!(f.answer.model, "heavy");
    assert!(fake.log().contains(&"dropped cheap".to_string()));
}

#[tokio::test]
async fn sequential_confident_draft_never_runs_heavy() {
    let fake = Fake::new(0).on("cheap", Ok(CONFIDENT.to_vec()), None).on("heavy", Ok(HEAVY.to_vec()), None);
    let (outcome, drafts) = run_pair(&fake, DraftMode::Sequential, None, None).await;
    let f = outcome.unwrap();
    assert_eq!(drafts.len(), 1);
    assert!(f.from_draft);
    assert_eq!(f.ran, Ran::Sequential);
    assert_eq!(fake.log(), ["start cheap", "done cheap"]);
}

#[tokio::test]
async fn sequential_unconfident_draft_runs_heavy_after_it() {
    let fake = Fake::new(0).on("cheap", Ok(UNSURE.to_vec()), None).on("heavy", Ok(HEAVY.to_vec()), None);
    let (outcome, drafts) = run_pair(&fake, DraftMode::Sequential, None, None).await;
    assert_eq!(outcome.unwrap().answer.model, "heavy");
    assert_eq!(drafts.len(), 1);
    assert_eq!(fake.log(), ["start cheap", "done cheap", "start heavy", "done heavy"]);
    let at_draft = fake.log_at_draft_written.lock().clone();
    assert_eq!(
        at_draft,
        [["start cheap", "done cheap"]],
        "the draft is written before the heavy run is queued"
    );
}

#[tokio::test]
async fn heavy_failure_after_the_draft_is_the_streams_error() {
    for mode in [DraftMode::Parallel, DraftMode::Sequential] {
        let fake =
            Fake::new(0).on("cheap", Ok(UNSURE.to_vec()), None).on("heavy", Err(failed("heavy")), None);
        let (outcome, drafts) = run_pair(&fake, mode, None, None).await;
        assert_eq!(drafts.len(), 1, "{mode:?}: the draft was sent and stays valid");
        assert_eq!(outcome.unwrap_err().status(), 500, "{mode:?}");
    }
}

#[tokio::test]
async fn heavy_failure_does_not_matter_when_the_draft_is_confident() {
    let fake = Fake::new(0).on("cheap", Ok(CONFIDENT.to_vec()), None).on("heavy", Err(failed("heavy")), None);
    let (outcome, _) = run_pair(&fake, DraftMode::Parallel, None, None).await;
    assert!(outcome.unwrap().from_draft);
}

#[tokio::test]
async fn cheap_failure_leaves_the_heavy_answer_without_a_draft() {
    for mode in [DraftMode::Parallel, DraftMode::Sequential] {
        let fake = Fake::new(0).on("cheap", Err(failed("cheap")), None).on("heavy", Ok(HEAVY.to_vec()), None);
        let (outcome, drafts) = run_pair(&fake, mode, None, None).await;
        let f = outcome.unwrap();
        assert!(drafts.is_empty(), "{mode:?}");
        assert_eq!((f.answer.model.as_str(), f.answer.reason), ("heavy", Reason::Fallback), "{mode:?}");
    }
}

#[tokio::test]
async fn a_loaded_heavy_pool_turns_parallel_sequential() {
    let fake = Fake::new(3).on("cheap", Ok(CONFIDENT.to_vec()), None).on("heavy", Ok(HEAVY.to_vec()), None);
    let (outcome, _) = run_pair(&fake, DraftMode::Parallel, Some(3), None).await;
    assert_eq!(outcome.unwrap().ran, Ran::SequentialUnderLoad);
    assert_eq!(fake.log(), ["start cheap", "done cheap"], "no speculative heavy run");
    // Below the limit (default: 1 worker x batch 4), it stays parallel.
    let fake = Fake::new(3).on("cheap", Ok(CONFIDENT.to_vec()), None).on("heavy", Ok(HEAVY.to_vec()), None);
    let (outcome, _) = run_pair(&fake, DraftMode::Parallel, None, None).await;
    assert_eq!(outcome.unwrap().ran, Ran::Parallel);
}

#[tokio::test]
async fn without_a_usable_heavy_model_one_final_answers() {
    let mut fake = Fake::new(0).on("cheap", Ok(UNSURE.to_vec()), None);
    fake.fleet.candidates[1] = model("heavy", 1, false, 0);
    let (outcome, drafts) = run_pair(&fake, DraftMode::Parallel, None, None).await;
    let f = outcome.unwrap();
    assert!(drafts.is_empty());
    assert_eq!((f.answer.model.as_str(), f.ran), ("cheap", Ran::Single));
}
