//! Rebuilding a repository for a reload: unchanged models are shared with
//! their sessions and statistics, changed files are new models loaded
//! before the rebuild returns, and a broken new file fails the rebuild.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use switchyard_runtime::{ModelChange, ModelRepository, ModelState, RuntimeError};

/// A copy of a fixture in a temporary folder, so tests can replace it.
fn copied(dir: &std::path::Path, fixture_name: &str, as_name: &str) -> std::path::PathBuf {
    let path = dir.join(as_name);
    std::fs::copy(fixture(fixture_name), &path).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_models_keep_sessions_and_statistics() {
    let repo =
        repo(vec![spec("tiny", "tiny-classifier.onnx", 4, 0, 8), spec("sum", "total-sum.onnx", 1, 0, 8)]);
    within(repo.infer("tiny", None, classify(1, 1))).await.unwrap();
    let (next, report) =
        ModelRepository::rebuild(vec![spec("tiny", "tiny-classifier.onnx", 4, 0, 8)], &repo).unwrap();
    assert_eq!(report.reused, vec!["tiny".to_string()]);
    assert!(report.changed.is_empty() && report.loaded.is_empty(), "{report:?}");
    assert_eq!(report.removed, vec!["sum".to_string()]);
    assert_eq!(next.state("tiny").unwrap(), ModelState::Ready, "no new cold start");
    assert_eq!(pool_stats(&next, "tiny", "cpu").requests, 1, "statistics carry over");
    assert_eq!(next.stats().model("tiny").unwrap().loads, 1);
    assert!(matches!(next.state("sum"), Err(RuntimeError::UnknownModel { .. })));
    assert_eq!(repo.state("sum").unwrap(), ModelState::Unloaded, "the previous repository is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_file_is_a_new_model_loaded_before_the_swap() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("m", "tiny-classifier.onnx", 1, 0, 8);
    s.path = copied(dir.path(), "tiny-classifier.onnx", "m.onnx");
    let repo = ModelRepository::new(vec![s.clone()]).unwrap();
    let before = within(repo.infer("m", None, classify(1, 3))).await.unwrap();
    // Replace the file the way deployments do (write a copy, rename over):
    // same contents, but another file, so a new model.
    std::fs::copy(fixture("tiny-classifier.onnx"), dir.path().join("tmp.onnx")).unwrap();
    std::fs::rename(dir.path().join("tmp.onnx"), &s.path).unwrap();
    let (next, report) = ModelRepository::rebuild(vec![s.clone()], &repo).unwrap();
    assert_eq!(report.changed, vec![("m".to_string(), ModelChange::FileChanged)]);
    assert_eq!(report.loaded.len(), 1, "was loaded before, so loaded again before the swap: {report:?}");
    assert_eq!(next.state("m").unwrap(), ModelState::Ready);
    assert_eq!(next.stats().model("m").unwrap().loads, 1);
    let after = within(next.infer("m", None, classify(1, 3))).await.unwrap();
    assert_eq!(before.outputs, after.outputs);
    // The previous repository still serves its own model meanwhile.
    within(repo.infer("m", None, classify(1, 4))).await.unwrap();

    let mut bumped = s.clone();
    bumped.version = 2;
    let (_, report) = ModelRepository::rebuild(vec![bumped], &next).unwrap();
    assert_eq!(report.changed, vec![("m".to_string(), ModelChange::SpecChanged)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_new_file_fails_the_rebuild() {
    init();
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec("m", "tiny-classifier.onnx", 1, 0, 8);
    s.path = copied(dir.path(), "tiny-classifier.onnx", "m.onnx");
    let repo = ModelRepository::new(vec![s.clone()]).unwrap();
    std::fs::write(&s.path, b"not an onnx model").unwrap();
    let err = ModelRepository::rebuild(vec![s.clone()], &repo).unwrap_err();
    assert!(matches!(*err.error, RuntimeError::CorruptModel { .. }), "{err}");
    assert_eq!(err.model.as_deref(), Some("m"));
    let mut added = spec("other", "missing.onnx", 1, 0, 8);
    added.path = dir.path().join("missing.onnx");
    let err = ModelRepository::rebuild(vec![added], &repo).unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warmup_models_are_loaded_by_the_rebuild() {
    let repo: Arc<ModelRepository> = repo(vec![]);
    let mut s = spec("tiny", "tiny-classifier.onnx", 1, 0, 8);
    s.warmup = true;
    let (next, report) = ModelRepository::rebuild(vec![s], &repo).unwrap();
    assert_eq!(report.changed, vec![("tiny".to_string(), ModelChange::Added)]);
    assert_eq!(next.state("tiny").unwrap(), ModelState::Ready);
}
