//! Runtime benchmark (no HTTP): what the runtime's device pools and
//! dynamic batcher deliver, measured side by side in one run.
//!
//! 1. Batching gain: `synth-wide`, 32 concurrent callers sending one row
//!    each, with dynamic batching (max 32) vs without (batch size 1).
//! 2. Overhead: the runtime path vs calling `Session::run` directly at the
//!    same batch size, on the same model and thread settings.
//! 3. Cold start: load time of each example model.
//!
//! `runtime-bench --models-dir models --mode quick --json-out out.json`

use anyhow::{Context, Result};
use clap::Parser;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_runtime::{
    init_onnxruntime, BatchingSpec, DeviceKind, InferenceRequest, ModelRepository, ModelSpec, PoolSpec,
    Tensor,
};

#[derive(Parser)]
struct Args {
    /// Folder with the example models.
    #[arg(long, default_value = "models")]
    models_dir: PathBuf,
    /// `quick` (short runs) or `full`.
    #[arg(long, default_value = "quick")]
    mode: String,
    /// Where to write the results as JSON.
    #[arg(long)]
    json_out: Option<PathBuf>,
}

fn spec(dir: &Path, model: &str, max_batch: usize, delay: Duration) -> ModelSpec {
    ModelSpec {
        name: model.to_string(),
        version: 1,
        path: dir.join(format!("{model}.onnx")),
        pools: vec![PoolSpec {
            name: "cpu".into(),
            device: DeviceKind::Cpu,
            workers: 1,
            intra_op_threads: 1,
            batching: None,
        }],
        batching: BatchingSpec { max_batch_size: max_batch, max_queue_delay: delay, queue_capacity: 4096 },
        idle_unload: None,
        warmup: false,
        text: None,
    }
}

fn rows(n: usize, seed: u32) -> Result<Tensor> {
    let values: Vec<f32> =
        (0..n * 64).map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 17) as f32).collect();
    Tensor::from_f32(vec![n, 64], &values).context("input tensor")
}

/// Closed loop through the runtime: `callers` tasks each sending requests of
/// `rows_per_request` rows for `duration`; returns rows per second.
async fn runtime_rows_per_s(
    repo: Arc<ModelRepository>,
    model: &str,
    callers: usize,
    rows_per_request: usize,
    duration: Duration,
) -> Result<f64> {
    repo.load(model).await.context("load")?;
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..callers {
        let (repo, stop, done, model) = (repo.clone(), stop.clone(), done.clone(), model.to_string());
        let input = rows(rows_per_request, c as u32)?;
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let req = InferenceRequest::new(vec![("X".to_string(), input.clone())]);
                if repo.infer(&model, None, req).await.is_ok() {
                    done.fetch_add(rows_per_request as u64, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(duration / 5).await; // warm-up
    let start_rows = done.load(Ordering::Relaxed);
    let start = Instant::now();
    tokio::time::sleep(duration).await;
    let rows_done = done.load(Ordering::Relaxed) - start_rows;
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    Ok(rows_done as f64 / elapsed.as_secs_f64())
}

/// `Session::run` called directly in a loop at `batch` rows, copying the
/// outputs out as a caller would; returns rows per second.
fn direct_rows_per_s(path: &Path, batch: usize, duration: Duration) -> Result<f64> {
    let pool = PoolSpec {
        name: "cpu".into(),
        device: DeviceKind::Cpu,
        workers: 1,
        intra_op_threads: 1,
        batching: None,
    };
    let mut session = switchyard_runtime::session::build_session(path, &pool).map_err(anyhow::Error::msg)?;
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
    let start = Instant::now();
    let mut done = 0usize;
    while start.elapsed() < duration {
        run_once()?;
        done += batch;
    }
    Ok(done as f64 / start.elapsed().as_secs_f64())
}

async fn cold_start(dir: &Path, model: &str) -> Result<Duration> {
    let repo = ModelRepository::new(vec![spec(dir, model, 32, Duration::from_micros(500))])?;
    let report = repo.load(model).await?;
    Ok(report.cold_start)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    init_onnxruntime(None)?;
    let secs = if args.mode == "full" { 10 } else { 3 };
    let duration = Duration::from_secs(secs);
    let dir = args.models_dir.clone();

    eprintln!("[runtime-bench] synth-wide, 32 callers x 1 row: batching off vs on");
    let off = ModelRepository::new(vec![spec(&dir, "synth-wide", 1, Duration::ZERO)])?;
    let unbatched = runtime_rows_per_s(off, "synth-wide", 32, 1, duration).await?;
    let on = ModelRepository::new(vec![spec(&dir, "synth-wide", 32, Duration::from_millis(2))])?;
    let batched = runtime_rows_per_s(on, "synth-wide", 32, 1, duration).await?;

    let mut overhead = Vec::new();
    for (model, batch) in
        [("synth-wide", 32usize), ("synth-heavy", 8), ("digits-cheap", 1), ("digits-heavy", 32)]
    {
        eprintln!("[runtime-bench] {model}: runtime vs direct Session::run at batch {batch}");
        let direct = direct_rows_per_s(&dir.join(format!("{model}.onnx")), batch, duration)?;
        let repo = ModelRepository::new(vec![spec(&dir, model, batch, Duration::ZERO)])?;
        let via_runtime = runtime_rows_per_s(repo, model, 16, batch, duration).await?;
        overhead.push(json!({"model": model, "batch": batch, "direct_rows_per_s": direct,
            "runtime_rows_per_s": via_runtime, "ratio": via_runtime / direct}));
    }

    // The gateway's own config for synth-heavy (batching max 16, 500 us):
    // what the runtime alone delivers to 40 one-row callers, the reference
    // for the gateway's synth-heavy throughput.
    eprintln!("[runtime-bench] synth-heavy, 40 callers x 1 row, gateway batching (max 16, 500 us)");
    let reference = ModelRepository::new(vec![spec(&dir, "synth-heavy", 16, Duration::from_micros(500))])?;
    let gateway_reference = runtime_rows_per_s(reference, "synth-heavy", 40, 1, duration).await?;

    let mut cold = Vec::new();
    for model in ["digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"] {
        let t = cold_start(&dir, model).await?;
        cold.push(json!({"model": model, "cold_start_ms": t.as_secs_f64() * 1e3}));
    }

    let result = json!({
        "batching": {"model": "synth-wide", "callers": 32, "unbatched_rows_per_s": unbatched,
                     "batched_rows_per_s": batched, "gain": batched / unbatched},
        "overhead": overhead,
        "synth_heavy_gateway_reference_rows_per_s": gateway_reference,
        "cold_start": cold,
        "duration_s": secs,
    });
    println!("{}", serde_json::to_string_pretty(&result)?);
    if let Some(path) = args.json_out {
        std::fs::write(&path, serde_json::to_vec_pretty(&result)?)?;
    }
    Ok(())
}
