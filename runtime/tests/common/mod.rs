//! Helpers shared by the runtime's integration tests (and the model
//! store's, `runtime/store/tests`, which include this file): ONNX Runtime
//! set-up, fixture paths, specs and inputs. Tests run against the real
//! library.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod ranked;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_runtime::{
    init_onnxruntime, BatchingSpec, DeviceKind, InferenceRequest, ModelRepository, ModelSpec, PoolSpec,
    Tensor,
};

/// The workspace root: the nearest folder above the crate under test that
/// holds `Cargo.lock` (the runtime's or the store's).
pub fn workspace() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().find(|dir| dir.join("Cargo.lock").is_file()).unwrap_or(manifest).to_path_buf()
}

/// Loads ONNX Runtime from `$ORT_DYLIB_PATH` or the workspace's `.cache`.
pub fn init() {
    let library = match std::env::var("ORT_DYLIB_PATH") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace().join(".cache/onnxruntime/libonnxruntime.so.1.31.1"),
    };
    init_onnxruntime(Some(&library)).expect("ONNX Runtime library (run the set-up or set ORT_DYLIB_PATH)");
}

pub fn fixture(name: &str) -> PathBuf {
    workspace().join("runtime/tests/fixtures").join(name)
}

pub fn cpu_pool(name: &str, workers: usize) -> PoolSpec {
    PoolSpec { name: name.into(), device: DeviceKind::Cpu, workers, intra_op_threads: 1, batching: None }
}

/// A spec for a fixture model with one CPU pool of one worker.
pub fn spec(name: &str, file: &str, max_batch: usize, delay_ms: u64, capacity: usize) -> ModelSpec {
    ModelSpec {
        name: name.into(),
        version: 1,
        path: fixture(file),
        pools: vec![cpu_pool("cpu", 1)],
        batching: BatchingSpec {
            max_batch_size: max_batch,
            max_queue_delay: Duration::from_millis(delay_ms),
            queue_capacity: capacity,
            idle_dispatch: true,
            inline_max: BatchingSpec::DEFAULT_INLINE_MAX,
            queue_order: switchyard_runtime::QueueOrder::Deadline,
            preempt: BatchingSpec::DEFAULT_PREEMPT,
            reserve_top_class: BatchingSpec::DEFAULT_RESERVE_TOP_CLASS,
            max_batch_tokens: None,
        },
        idle_unload: None,
        warmup: false,
        text: None,
        limits: Default::default(),
        source: None,
    }
}

pub fn repo(specs: Vec<ModelSpec>) -> Arc<ModelRepository> {
    init();
    ModelRepository::new(specs).unwrap()
}

/// `rows` x 64 distinct values derived from `seed`.
pub fn features(rows: usize, seed: usize) -> Tensor {
    let values: Vec<f32> =
        (0..rows * 64).map(|i| (((seed * 7919 + i * 31) % 1000) as f32 / 500.0) - 1.0).collect();
    Tensor::from_f32(vec![rows, 64], &values).unwrap()
}

pub fn classify(rows: usize, seed: usize) -> InferenceRequest {
    InferenceRequest::new(vec![("X".into(), features(rows, seed))])
}

/// Polls `cond` every 2 ms; panics after a generous failsafe timeout.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Awaits `fut` with a failsafe timeout.
pub async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(120), fut).await.expect("failsafe timeout")
}

/// The cpu pool's stats of `model`.
pub fn pool_stats(repo: &ModelRepository, model: &str, pool: &str) -> switchyard_runtime::PoolStats {
    repo.stats().model(model).unwrap().pool(pool).unwrap().clone()
}

type Handle =
    tokio::task::JoinHandle<Result<switchyard_runtime::InferenceResponse, switchyard_runtime::RuntimeError>>;

/// With `pool` paused, sends requests to it one at a time until `held`
/// are accepted (the paused worker holds one, the queue the rest); requests
/// refused meanwhile must be `Overloaded`. Returns the accepted ones.
pub async fn fill_queue(repo: &Arc<ModelRepository>, model: &str, pool: &str, held: usize) -> Vec<Handle> {
    let mut accepted = Vec::new();
    let mut seed = 1000;
    while accepted.len() < held {
        let depth = pool_stats(repo, model, pool).queue_depth;
        let h = {
            let (repo, model, pool) = (Arc::clone(repo), model.to_string(), pool.to_string());
            seed += 1;
            tokio::spawn(async move { repo.infer(&model, Some(&pool), classify(1, seed)).await })
        };
        wait_until("request queued or refused", || {
            h.is_finished() || pool_stats(repo, model, pool).queue_depth > depth
        })
        .await;
        if h.is_finished() {
            let err = h.await.unwrap().unwrap_err();
            assert!(matches!(err, switchyard_runtime::RuntimeError::Overloaded { .. }), "{err}");
        } else {
            accepted.push(h);
        }
    }
    accepted
}

/// Queues `reqs` on the paused "cpu" pool of `model`, waits until all are
/// queued, resumes the pool, and returns the results in order: with a
/// large enough `max_batch_size` they run as one batch.
pub async fn run_paused_results(
    repo: &Arc<ModelRepository>,
    model: &str,
    reqs: Vec<InferenceRequest>,
) -> Vec<Result<switchyard_runtime::InferenceResponse, switchyard_runtime::RuntimeError>> {
    repo.load(model).await.unwrap();
    repo.set_paused(model, "cpu", true).unwrap();
    let n = reqs.len();
    let handles: Vec<_> = reqs
        .into_iter()
        .map(|req| {
            let (repo, model) = (Arc::clone(repo), model.to_string());
            tokio::spawn(async move { repo.infer(&model, None, req).await })
        })
        .collect();
    wait_until("all requests queued", || pool_stats(repo, model, "cpu").queue_depth == n).await;
    repo.set_paused(model, "cpu", false).unwrap();
    let mut out = Vec::new();
    for h in handles {
        out.push(within(h).await.unwrap());
    }
    out
}
