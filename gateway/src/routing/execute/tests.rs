//! [`super::execute`]'s one path, on the scripted backend and shadow models
//! of [`crate::test_util`]: a draft-then-final call is resolved from the
//! route's `draft` settings, shadowed for calibration and counted like a
//! plain call. The real binary's side is in
//! `gateway/tests/python/test_calibration.py` (SSE and gRPC streams).

use super::{Execution, Observers, RouteRequest, Strategy};
use crate::config::{parse, Config};
use crate::error::GatewayError;
use crate::routing::calibration::Calibration;
use crate::routing::decisions::DecisionCounters;
use crate::routing::draft::{Finished, Ran};
use crate::target::Target;
use crate::test_util::{Fake, Shadows, HEAVY, UNSURE};
use parking_lot::Mutex;
use router_policies::{Budget, Device, Reason};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_protocol::answer::Answer;
use switchyard_runtime::{InferenceRequest, Tensor};

/// Route `r`: a calibrated cascade over cheap and heavy (every call
/// shadowed), streams drafting sequentially; route `plain`: no pair.
fn config() -> Config {
    let text = r#"
[[models]]
name = "cheap"
path = "cheap.onnx"
[[models]]
name = "heavy"
path = "heavy.onnx"

[[routes]]
name = "r"
models = ["cheap", "heavy"]
budget_ms = { default = 100, max = 3000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
calibrate = { shadow = 1.0 }
draft = { mode = "sequential" }

[[routes]]
name = "plain"
models = ["cheap", "heavy"]
budget_ms = { default = 100, max = 3000 }
"#;
    parse(text, Path::new("/")).unwrap()
}

fn target(route: &str) -> Target {
    Target {
        public_name: route.into(),
        version: 1,
        models: vec!["cheap".into(), "heavy".into()],
        is_route: true,
    }
}

fn request(target: &Target) -> RouteRequest<'_> {
    let x = Tensor::from_f32(vec![1, 2], &[0.0, 1.0]).unwrap();
    let request = InferenceRequest { inputs: vec![("X".into(), x)], outputs: Some(vec!["label".into()]) };
    RouteRequest {
        target,
        request,
        budget: Budget::new(Duration::from_millis(100)),
        received: Instant::now(),
        draw: None,
        class: switchyard_runtime::DEFAULT_CLASS,
    }
}

/// What one test's calls were counted and shadowed by.
struct Seen {
    decisions: DecisionCounters,
    calibration: Arc<Calibration>,
    rollouts: Arc<crate::routing::rollout::Rollouts>,
    shadows: Arc<Shadows>,
}

impl Seen {
    fn new() -> Seen {
        let shadows = Shadows::new(&[("cheap", &UNSURE), ("heavy", &HEAVY)]);
        Seen {
            decisions: DecisionCounters::default(),
            calibration: Arc::default(),
            rollouts: Arc::default(),
            shadows,
        }
    }

    /// Runs one call to `route` through `execute`'s path with `strategy`.
    async fn call(
        &self,
        config: &Config,
        fake: &Fake,
        route: &str,
        strategy: Strategy<'_>,
    ) -> Result<Finished, GatewayError> {
        let target = target(route);
        let req = request(&target);
        let execution = Execution::of(target.route(config), &req, strategy);
        let observers = Observers {
            decisions: &self.decisions,
            calibration: &self.calibration,
            rollouts: &self.rollouts,
            models: &self.shadows,
        };
        execution.run(fake, &observers, req.request).await
    }

    /// The decisions counted, as (route, model, reason, count).
    fn decisions(&self) -> Vec<(String, String, Reason, u64)> {
        let all = self.decisions.snapshot().into_iter();
        all.map(|(k, n)| {
            assert_eq!(k.device, Some(Device::Cpu));
            (k.route, k.model, k.reason, n)
        })
        .collect()
    }

    /// Waits (without a clock: the shadow runs on this test's runtime)
    /// until route `r`'s curve holds `runs` shadow runs; returns its rows.
    async fn shadowed(&self, runs: u64) -> u64 {
        let wait = async {
            loop {
                let views = self.calibration.views();
                if let Some((_, view)) = views.iter().find(|(r, v)| r == "r" && v.shadow_runs >= runs) {
                    return view.rows;
                }
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), wait).await.expect("the shadow never ran")
    }
}

#[tokio::test]
async fn a_draft_then_final_call_is_shadowed_and_counted_like_a_plain_one() {
    let (config, seen) = (config(), Seen::new());
    let fake = Fake::new(0).on("cheap", Ok(UNSURE.to_vec()), None).on("heavy", Ok(HEAVY.to_vec()), None);
    let drafts = Mutex::new(Vec::new());
    let sink = |answer: &Answer, _: Option<f32>| drafts.lock().push(answer.model.clone());

    let f = seen.call(&config, &fake, "r", Strategy::DraftThenFinal { on_draft: &sink }).await.unwrap();
    assert_eq!(*drafts.lock(), ["cheap"]);
    assert_eq!((f.answer.model.as_str(), f.ran, f.from_draft), ("heavy", Ran::Sequential, false));
    let escalated = ("r".to_string(), "heavy".to_string(), Reason::CascadeEscalate);
    assert_eq!(seen.decisions(), [(escalated.0.clone(), escalated.1.clone(), escalated.2, 1)]);
    assert_eq!(seen.shadowed(1).await, 1, "the streamed call's row is on the curve");
    assert_eq!(*seen.shadows.runs.lock(), ["cheap", "heavy"]);

    // A plain call to the same route: the same counters and the same shadow.
    let f = seen.call(&config, &fake, "r", Strategy::Single).await.unwrap();
    assert_eq!((f.answer.model.as_str(), f.ran), ("heavy", Ran::Single));
    assert_eq!(seen.decisions(), [(escalated.0, escalated.1, escalated.2, 2)]);
    assert_eq!(seen.shadowed(2).await, 2);
    assert_eq!(*drafts.lock(), ["cheap"], "a plain call sends no draft");
}

#[tokio::test]
async fn a_stream_without_a_pair_is_one_answer_from_the_routes_policy() {
    let (config, seen) = (config(), Seen::new());
    let fake = Fake::new(0).on("heavy", Ok(HEAVY.to_vec()), None);
    let sink = |_: &Answer, _: Option<f32>| panic!("no draft without a pair");
    let f = seen.call(&config, &fake, "plain", Strategy::DraftThenFinal { on_draft: &sink }).await.unwrap();
    assert_eq!((f.answer.model.as_str(), f.answer.reason, f.ran), ("heavy", Reason::Fixed, Ran::Single));
    assert_eq!(seen.decisions(), [("plain".into(), "heavy".into(), Reason::Fixed, 1)]);
    assert!(seen.calibration.views().is_empty(), "an uncalibrated route is not shadowed");
}

#[test]
fn a_draft_waits_for_its_final_up_to_the_routes_maximum_budget() {
    let config = config();
    let sink = |_: &Answer, _: Option<f32>| {};
    for (route, strategy, wait) in [
        ("r", Strategy::Single, 100),
        ("r", Strategy::DraftThenFinal { on_draft: &sink }, 3000),
        ("plain", Strategy::DraftThenFinal { on_draft: &sink }, 100),
    ] {
        let target = target(route);
        let req = request(&target);
        let execution = Execution::of(target.route(&config), &req, strategy);
        assert_eq!(execution.deadline, req.received + Duration::from_millis(wait), "{route}");
    }
}
