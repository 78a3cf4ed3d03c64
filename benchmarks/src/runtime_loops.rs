//! Closed loops over the runtime without HTTP, shared by `runtime-bench`
//! (CPU: the runtime's overhead and batching gain) and `device-bench`
//! (a CUDA pool against the CPU and against a bare `Session::run` on the
//! GPU). Every example model of this shape takes one `X: [rows, 64]` f32
//! input and answers `probabilities` and `label`.

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchyard_runtime::{
    BatchingSpec, DeviceKind, InferenceRequest, ModelRepository, ModelSpec, PoolSpec, Tensor,
};

use crate::loadgen::stats::{micros, new_histogram};

/// One pool of one worker on `device` with `intra_op_threads` threads.
pub fn pool(device: DeviceKind, intra_op_threads: usize) -> PoolSpec {
    PoolSpec { name: device.to_string(), device, workers: 1, intra_op_threads, batching: None }
}

/// `models/<model>.onnx` served by `pool`, batches of up to `max_batch`
/// rows gathered for at most `delay`.
pub fn model_spec(dir: &Path, model: &str, pool: PoolSpec, max_batch: usize, delay: Duration) -> ModelSpec {
    ModelSpec {
        name: model.to_string(),
        version: 1,
        path: dir.join(format!("{model}.onnx")),
        pools: vec![pool],
        batching: BatchingSpec {
            max_batch_size: max_batch,
            max_queue_delay: delay,
            queue_capacity: 4096,
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

/// A repository serving only [`model_spec`]`(dir, model, pool, max_batch, delay)`.
pub fn repository(
    dir: &Path,
    model: &str,
    pool: PoolSpec,
    max_batch: usize,
    delay: Duration,
) -> Result<Arc<ModelRepository>> {
    Ok(ModelRepository::new(vec![model_spec(dir, model, pool, max_batch, delay)])?)
}

/// A comma-separated list of `what`s (models, batch sizes) from the
/// command line.
pub fn parse_list<T: std::str::FromStr>(text: &str, what: &str) -> Result<Vec<T>> {
    text.split(',')
        .map(|item| item.trim().parse::<T>().map_err(|_| anyhow::anyhow!("bad {what} {item:?} in {text:?}")))
        .collect()
}

/// `n` deterministic rows of 64 features (small integers, as the digits
/// data), different per `seed`.
pub fn rows(n: usize, seed: u32) -> Result<Tensor> {
    let values: Vec<f32> =
        (0..n * 64).map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 17) as f32).collect();
    Tensor::from_f32(vec![n, 64], &values).context("input tensor")
}

/// What a closed loop measured: rows per second over the measured window
/// and the per-request latency percentiles, in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct LoopResult {
    /// Rows answered per second.
    pub rows_per_s: f64,
    /// Median request latency.
    pub p50_us: u64,
    /// 99th percentile request latency.
    pub p99_us: u64,
}

impl LoopResult {
    /// The result of a loop whose requests of `rows_per_request` rows
    /// took the latencies in `latency` over `elapsed`.
    fn from_latency(latency: &Histogram<u64>, rows_per_request: usize, elapsed: Duration) -> LoopResult {
        LoopResult {
            rows_per_s: (latency.len() as f64 * rows_per_request as f64) / elapsed.as_secs_f64(),
            p50_us: latency.value_at_quantile(0.5),
            p99_us: latency.value_at_quantile(0.99),
        }
    }

    /// The result as JSON fields.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"rows_per_s": self.rows_per_s, "p50_us": self.p50_us, "p99_us": self.p99_us})
    }
}

/// Lets the callers warm up for a fifth of `duration`, raises `measuring`
/// for `duration`, then raises `stop` and waits for every caller task;
/// returns the measured time.
pub async fn measured_window(
    duration: Duration,
    measuring: &AtomicBool,
    stop: &AtomicBool,
    tasks: Vec<tokio::task::JoinHandle<Result<()>>>,
) -> Result<Duration> {
    tokio::time::sleep(duration / 5).await;
    measuring.store(true, Ordering::Relaxed);
    let start = Instant::now();
    tokio::time::sleep(duration).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.context("caller task")??;
    }
    Ok(elapsed)
}

/// Closed loop through the runtime: `callers` tasks each sending requests
/// of `rows_per_request` rows; a fifth of `duration` warms up, then
/// `duration` is measured.
pub async fn runtime_loop(
    repo: Arc<ModelRepository>,
    model: &str,
    callers: usize,
    rows_per_request: usize,
    duration: Duration,
) -> Result<LoopResult> {
    repo.load(model).await.context("load")?;
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let merged = Arc::new(Mutex::new(new_histogram()?));
    let mut tasks = Vec::new();
    for c in 0..callers {
        let (repo, stop, measuring, merged, model) =
            (repo.clone(), stop.clone(), measuring.clone(), merged.clone(), model.to_string());
        let input = rows(rows_per_request, c as u32)?;
        tasks.push(tokio::spawn(async move {
            let mut latency = new_histogram()?;
            while !stop.load(Ordering::Relaxed) {
                let req = InferenceRequest::new(vec![("X".to_string(), input.clone())]);
                let start = Instant::now();
                let ok = repo.infer(&model, None, req).await.is_ok();
                if ok && measuring.load(Ordering::Relaxed) {
                    latency.saturating_record(micros(start.elapsed()).max(1));
                }
            }
            let mut all = merged.lock().map_err(|_| anyhow::anyhow!("histogram lock poisoned"))?;
            all.add(&latency).map_err(|e| anyhow::anyhow!("merge histograms: {e}"))?;
            anyhow::Ok(())
        }));
    }
    let elapsed = measured_window(duration, &measuring, &stop, tasks).await?;
    let latency = merged.lock().map_err(|_| anyhow::anyhow!("histogram lock poisoned"))?;
    Ok(LoopResult::from_latency(&latency, rows_per_request, elapsed))
}

/// One caller sending requests of `rows_per_request` rows from the
/// calling task itself (nothing spawned), so that a request the runtime
/// runs inline runs on the caller's own thread, the thread a
/// [`direct_loop`] beside it uses; a fifth of `duration` warms up, then
/// `duration` is measured.
pub async fn one_caller_here(
    repo: &ModelRepository,
    model: &str,
    rows_per_request: usize,
    duration: Duration,
) -> Result<LoopResult> {
    repo.load(model).await.context("load")?;
    let input = rows(rows_per_request, 0)?;
    let call = || repo.infer(model, None, InferenceRequest::new(vec![("X".to_string(), input.clone())]));
    let warm_until = Instant::now() + duration / 5;
    while Instant::now() < warm_until {
        call().await.context("warm-up call")?;
    }
    let mut latency = new_histogram()?;
    let start = Instant::now();
    while start.elapsed() < duration {
        let t = Instant::now();
        call().await.context("call")?;
        latency.saturating_record(micros(t.elapsed()).max(1));
    }
    Ok(LoopResult::from_latency(&latency, rows_per_request, start.elapsed()))
}

/// `Session::run` called directly in a loop at `batch` rows on a session
/// built as `pool` builds its workers', copying the outputs out as a caller
/// would: the ceiling of the runtime path on the same device and threads.
pub fn direct_loop(path: &Path, pool: &PoolSpec, batch: usize, duration: Duration) -> Result<LoopResult> {
    let mut session = switchyard_runtime::session::build_session(path, pool).map_err(anyhow::Error::msg)?;
    let input = rows(batch, 7)?.to_f32_vec().context("f32 input")?;
    let mut run_once = || -> Result<()> {
        let tensor = ort::value::Tensor::from_array((vec![batch as i64, 64], input.clone()))?;
        let outputs = session.run(ort::inputs!["X" => tensor])?;
        let (_, probs) = outputs["probabilities"].try_extract_tensor::<f32>()?;
        let (_, labels) = outputs["label"].try_extract_tensor::<i64>()?;
        std::hint::black_box((probs.to_vec(), labels.to_vec()));
        Ok(())
    };
    let warm_until = Instant::now() + duration / 5;
    while Instant::now() < warm_until {
        run_once()?;
    }
    let mut latency = new_histogram()?;
    let start = Instant::now();
    while start.elapsed() < duration {
        let t = Instant::now();
        run_once()?;
        latency.saturating_record(micros(t.elapsed()).max(1));
    }
    Ok(LoopResult::from_latency(&latency, batch, start.elapsed()))
}
