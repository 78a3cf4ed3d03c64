//! Plan execution against a scripted backend: fallbacks, cascades, sheds.
//! The same paths run on the real runtime in the Python integration tests
//! (`gateway/tests/python/test_routing.py`).

use super::route;
use crate::error::GatewayError;
use crate::routing::backend::{Backend, BackendError, BackendResponse};
use crate::routing::placements::Routing;
use crate::test_util::response;
use crate::upstream_error::{UpstreamError, UpstreamFailure};
use parking_lot::Mutex;
use router_policies::{
    Budget, CandidateModel, CascadePolicy, Device, Draw, Estimator, FixedPolicy, FleetView, LatencyBucket,
    LatencyBudgetPolicy, LatencyModel, PolicyConfig, PoolView, Reason,
};
use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};
use switchyard_runtime::{InferenceRequest, RuntimeError, Tensor};

type Outcome = Result<Vec<f32>, BackendError>;
/// One recorded call: model, pool, requested outputs.
type Call = (String, Option<String>, Option<Vec<String>>);

/// Answers from a script per (model, pool); records every call.
struct Fake {
    fleet: FleetView,
    script: HashMap<(String, String), Outcome>,
    calls: Mutex<Vec<Call>>,
}

impl Fake {
    fn new(fleet: FleetView) -> Fake {
        Fake { fleet, script: HashMap::new(), calls: Mutex::new(Vec::new()) }
    }

    /// `model` on `pool` answers `probabilities` (one row) or fails.
    fn on(mut self, model: &str, pool: &str, outcome: Outcome) -> Fake {
        self.script.insert((model.into(), pool.into()), outcome);
        self
    }

    fn calls(&self) -> Vec<(String, Option<String>)> {
        self.calls.lock().iter().map(|(m, p, _)| (m.clone(), p.clone())).collect()
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
        self.calls.lock().push((model.into(), pool.map(str::to_string), request.outputs.clone()));
        let pool = pool.unwrap_or("cpu").to_string();
        let outcome = self.script.get(&(model.to_string(), pool.clone())).cloned().unwrap_or_else(|| {
            Err(RuntimeError::UnknownPool { model: model.into(), pool: pool.clone() }.into())
        });
        let model = model.to_string();
        async move {
            let probs = outcome?;
            Ok(response(model, pool, &probs, request.outputs))
        }
    }
}

fn pool(name: &str, queue_depth: usize, ms: u64) -> PoolView {
    PoolView {
        name: name.into(),
        device: Device::Cpu,
        available: true,
        paused: false,
        workers: 1,
        queue_depth,
        in_flight: 0,
        queue_capacity: Some(100),
        max_batch_size: 1,
        relative_cost: 1.0,
        latency: LatencyModel {
            buckets: vec![LatencyBucket { max_batch: 1, latency: Duration::from_millis(ms), samples: 10 }],
            stats_age: Duration::ZERO,
        },
    }
}

fn model(name: &str, rank: u32, pools: Vec<PoolView>) -> CandidateModel {
    CandidateModel {
        name: name.into(),
        quality_rank: rank,
        relative_cost: 1.0 + rank as f64,
        available: true,
        pools,
    }
}

fn fleet() -> FleetView {
    FleetView {
        candidates: vec![
            model("cheap", 0, vec![pool("cpu", 0, 1)]),
            model("heavy", 1, vec![pool("fast", 0, 2), pool("slow", 0, 5)]),
        ],
    }
}

fn models() -> Vec<String> {
    vec!["cheap".into(), "heavy".into()]
}

fn routing<'a>(
    policy: &'a PolicyConfig,
    models: &'a [String],
    estimator: &'a Estimator,
    ms: u64,
) -> Routing<'a> {
    Routing {
        route: "r",
        models,
        policy,
        estimator,
        budget: Budget::new(Duration::from_millis(ms)),
        received: Instant::now(),
    }
}

fn request(outputs: Option<Vec<&str>>) -> InferenceRequest {
    let x = Tensor::from_f32(vec![1, 2], &[0.0, 1.0]).unwrap();
    InferenceRequest {
        inputs: vec![("X".into(), x)],
        outputs: outputs.map(|o| o.into_iter().map(String::from).collect()),
    }
}

fn fixed(model: &str) -> PolicyConfig {
    PolicyConfig::Fixed(FixedPolicy { model: model.into() })
}

fn cascade() -> PolicyConfig {
    PolicyConfig::Cascade(CascadePolicy {
        confidence_output: "probabilities".into(),
        threshold: 0.8,
        cheap: None,
        heavy: None,
    })
}

fn unavailable(model: &str) -> BackendError {
    RuntimeError::DeviceUnavailable { model: model.into(), reason: "CUDA missing".into() }.into()
}

fn upstream(model: &str, failure: UpstreamFailure) -> BackendError {
    let message = "scripted".into();
    UpstreamError { model: model.into(), upstream: "remote".into(), failure, message }.into()
}

fn s(a: &str, b: &str) -> (String, Option<String>) {
    (a.to_string(), Some(b.to_string()))
}

#[tokio::test]
async fn single_placement_runs_on_the_chosen_pool() {
    let fake = Fake::new(fleet()).on("heavy", "fast", Ok(vec![0.9, 0.1]));
    let (policy, models, est) = (fixed("heavy"), models(), Estimator::default());
    let a = route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap();
    assert_eq!(
        (a.model.as_str(), a.pool.as_str(), a.reason, a.budget_ms),
        ("heavy", "fast", Reason::Fixed, 100)
    );
    assert_eq!(fake.calls(), vec![s("heavy", "fast")]);
}

#[tokio::test]
async fn unavailable_pool_falls_back_to_the_next_one() {
    let fake =
        Fake::new(fleet()).on("heavy", "fast", Err(unavailable("heavy"))).on("heavy", "slow", Ok(vec![1.0]));
    let (policy, models, est) = (fixed("heavy"), models(), Estimator::default());
    let a = route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap();
    assert_eq!((a.pool.as_str(), a.reason), ("slow", Reason::Fallback));
    assert_eq!(fake.calls(), vec![s("heavy", "fast"), s("heavy", "slow")]);
}

#[tokio::test]
async fn overloaded_model_falls_back_to_another_model() {
    let overloaded = |p: &str| -> BackendError {
        RuntimeError::Overloaded { model: "heavy".into(), pool: p.into(), retry_after: Duration::ZERO }.into()
    };
    let fake = Fake::new(fleet())
        .on("heavy", "fast", Err(overloaded("fast")))
        .on("heavy", "slow", Err(overloaded("slow")))
        .on("cheap", "cpu", Ok(vec![0.5, 0.5]));
    let (policy, models, est) = (fixed("heavy"), models(), Estimator::default());
    let a = route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap();
    assert_eq!((a.model.as_str(), a.reason), ("cheap", Reason::Fallback));
    assert_eq!(fake.calls().len(), 3);
}

#[tokio::test]
async fn client_errors_do_not_fall_back() {
    let bad =
        RuntimeError::UnknownOutput { model: "heavy".into(), output: "x".into(), expected: "label".into() };
    let fake = Fake::new(fleet()).on("heavy", "fast", Err(bad.into())).on("heavy", "slow", Ok(vec![1.0]));
    let (policy, models, est) = (fixed("heavy"), models(), Estimator::default());
    let e =
        route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap_err();
    assert_eq!(e.status(), 404);
    assert_eq!(fake.calls().len(), 1);
}

#[tokio::test]
async fn upstream_failures_fall_back_unless_the_request_was_refused() {
    let (policy, models, est) = (fixed("heavy"), models(), Estimator::default());
    for failure in [UpstreamFailure::TimedOut, UpstreamFailure::BadResponse, UpstreamFailure::Unavailable] {
        let fake = Fake::new(fleet()).on("heavy", "fast", Err(upstream("heavy", failure))).on(
            "heavy",
            "slow",
            Ok(vec![1.0]),
        );
        let a =
            route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap();
        assert_eq!((a.pool.as_str(), a.reason), ("slow", Reason::Fallback), "{failure:?}");
    }
    let fake = Fake::new(fleet()).on("heavy", "fast", Err(upstream("heavy", UpstreamFailure::Rejected))).on(
        "heavy",
        "slow",
        Ok(vec![1.0]),
    );
    let e =
        route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap_err();
    assert!(matches!(&e, GatewayError::Upstream(u) if u.failure == UpstreamFailure::Rejected), "{e:?}");
    assert_eq!((e.status(), e.label()), (400, "upstream_rejected"));
    assert_eq!(fake.calls().len(), 1);
}

#[tokio::test]
async fn spent_budget_stops_fallbacks_and_returns_the_error() {
    let fake =
        Fake::new(fleet()).on("heavy", "fast", Err(unavailable("heavy"))).on("heavy", "slow", Ok(vec![1.0]));
    let (policy, models, est) = (fixed("heavy"), models(), Estimator::default());
    let mut r = routing(&policy, &models, &est, 5);
    r.received = Instant::now() - Duration::from_millis(50);
    let e = route(&fake, &r, Draw::new(0.0), request(None)).await.unwrap_err();
    assert_eq!(e.status(), 503);
    assert_eq!(fake.calls(), vec![s("heavy", "fast")]);
}

#[tokio::test]
async fn confident_cascade_answers_cheap_without_the_extra_output() {
    let fake = Fake::new(fleet()).on("cheap", "cpu", Ok(vec![0.9, 0.1]));
    let (policy, models, est) = (cascade(), models(), Estimator::default());
    let a = route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(Some(vec!["label"])))
        .await
        .unwrap();
    assert_eq!((a.model.as_str(), a.reason), ("cheap", Reason::CascadeConfident));
    assert_eq!(a.outputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), vec!["label"]);
    let calls = fake.calls.lock().clone();
    assert_eq!(calls[0].2, Some(vec!["label".to_string(), "probabilities".to_string()]));
}

#[tokio::test]
async fn unconfident_cascade_escalates_with_the_clients_request() {
    let fake =
        Fake::new(fleet()).on("cheap", "cpu", Ok(vec![0.6, 0.4])).on("heavy", "fast", Ok(vec![0.99, 0.01]));
    let (policy, models, est) = (cascade(), models(), Estimator::default());
    let a = route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(Some(vec!["label"])))
        .await
        .unwrap();
    assert_eq!((a.model.as_str(), a.pool.as_str(), a.reason), ("heavy", "fast", Reason::CascadeEscalate));
    let calls = fake.calls.lock().clone();
    assert_eq!(calls[1].2, Some(vec!["label".to_string()]));
}

#[tokio::test]
async fn failed_escalation_keeps_the_cheap_answer() {
    // The planned heavy pool fails, then the runtime's own choice (the fake's "cpu") fails too.
    let fake = Fake::new(fleet())
        .on("cheap", "cpu", Ok(vec![0.6, 0.4]))
        .on("heavy", "fast", Err(unavailable("heavy")))
        .on("heavy", "cpu", Err(unavailable("heavy")));
    let (policy, models, est) = (cascade(), models(), Estimator::default());
    let a = route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap();
    assert_eq!((a.model.as_str(), a.reason), ("cheap", Reason::CascadeUnavailable));
    assert_eq!(fake.calls()[2], ("heavy".to_string(), None));
}

#[tokio::test]
async fn failed_heavy_pool_escalates_on_another_pool() {
    let fake = Fake::new(fleet())
        .on("cheap", "cpu", Ok(vec![0.6, 0.4]))
        .on("heavy", "fast", Err(unavailable("heavy")))
        .on("heavy", "cpu", Ok(vec![0.9, 0.1]));
    let (policy, models, est) = (cascade(), models(), Estimator::default());
    let a = route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap();
    assert_eq!((a.model.as_str(), a.pool.as_str(), a.reason), ("heavy", "cpu", Reason::Fallback));
}

#[tokio::test]
async fn cascade_without_time_for_heavy_accepts_cheap() {
    let mut fl = fleet();
    fl.candidates[1].pools = vec![pool("fast", 0, 500)];
    let fake = Fake::new(fl).on("cheap", "cpu", Ok(vec![0.6, 0.4]));
    let (policy, models, est) = (cascade(), models(), Estimator::default());
    let a = route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap();
    assert_eq!((a.model.as_str(), a.reason), ("cheap", Reason::CascadeNoBudget));
    assert_eq!(fake.calls().len(), 1);
}

#[tokio::test]
async fn impossible_budget_is_shed_with_retry_after() {
    let mut fl = fleet();
    fl.candidates = vec![model("heavy", 1, vec![pool("cpu", 41, 50)])];
    let fake = Fake::new(fl);
    let policy = PolicyConfig::LatencyBudget(LatencyBudgetPolicy::default());
    let (models, est) = (vec!["heavy".to_string()], Estimator::default());
    let e =
        route(&fake, &routing(&policy, &models, &est, 1), Draw::new(0.0), request(None)).await.unwrap_err();
    assert!(matches!(e, GatewayError::Shed { reason: Reason::Shed, .. }), "{e:?}");
    assert_eq!(e.status(), 429);
    assert_eq!(e.retry_after(), Some(3), "41 x 50 ms queue = 2.05 s, rounded up: {e:?}");
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn nothing_available_asks_the_runtime_then_answers_503() {
    let mut fl = fleet();
    fl.candidates.iter_mut().for_each(|c| c.available = false);
    let fake = Fake::new(fl);
    let (policy, models, est) = (fixed("heavy"), models(), Estimator::default());
    let e =
        route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap_err();
    // The fake has no script for (heavy, cpu): the runtime's own error is a 404 here.
    assert_eq!(fake.calls(), vec![("heavy".to_string(), None)]);
    assert_eq!(e.status(), 404);
    let fake = Fake::new(fake.fleet.clone()).on("heavy", "cpu", Err(unavailable("heavy")));
    let e =
        route(&fake, &routing(&policy, &models, &est, 100), Draw::new(0.0), request(None)).await.unwrap_err();
    assert!(matches!(e, GatewayError::Shed { reason: Reason::Unavailable, .. }), "{e:?}");
    assert_eq!(e.status(), 503);
}
