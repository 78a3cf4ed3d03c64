//! Draft-then-final orchestration against a scripted backend whose runs can
//! be held until released ([`crate::test_util::Fake`]), so that
//! ordering and cancellation are checked deterministically. The same paths
//! run on the real runtime in `gateway/tests/python/test_sse.py`; that
//! `execute` counts and shadows these calls is `super::super::execute::tests`.

use super::*;
use crate::test_util::{failed, model, pair, Fake, CONFIDENT, HEAVY, UNSURE};
use parking_lot::Mutex;
use router_policies::{Budget, Estimator, PolicyConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_runtime::Tensor;
use tokio::sync::Notify;

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
