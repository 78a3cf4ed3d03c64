//! Runtime benchmark (no HTTP): what the runtime's device pools and
//! dynamic batcher deliver, measured side by side in one run.
//!
//! 1. Batching gain: `synth-wide`, 32 concurrent callers sending one row
//!    each, with dynamic batching (max 32) vs without (batch size 1).
//! 2. Overhead: the runtime path vs calling `Session::run` directly at the
//!    same batch size, on the same model and thread settings.
//! 3. Cold start: load time of each example model.
//!
//! With `--section raw-limit` it measures only the raw runtime limit:
//! `Session::run` called in a loop at several batch sizes per model (one
//! thread, no queue, no HTTP), the ceiling a gateway serving that model on
//! the same core could approach; and the runtime alone with the gateway's
//! batching and 40 one-row callers (the gateway minus HTTP). The suite runs
//! it pinned to the servers' core.
//!
//! `runtime-bench --models-dir models --mode quick --json-out out.json`
//! `runtime-bench --section raw-limit --models digits-cheap,synth-heavy --json-out raw.json`

use anyhow::Result;
use clap::Parser;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use switchyard_benchmarks::runtime_loops::{direct_loop, model_spec, parse_list, pool, runtime_loop};
use switchyard_runtime::{init_onnxruntime, DeviceKind, ModelRepository, ModelSpec};

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
    /// What to measure: `all` (batching gain, overhead, cold start) or
    /// `raw-limit` (direct `Session::run` at several batch sizes).
    #[arg(long, default_value = "all")]
    section: String,
    /// Models of the raw-limit section, comma-separated.
    #[arg(long, default_value = "digits-cheap,synth-heavy")]
    models: String,
    /// Batch sizes of the raw-limit section, comma-separated (default:
    /// 1,16,64 in quick mode, 1,4,16,32,64,128 in full mode).
    #[arg(long)]
    batches: Option<String>,
}

fn spec(dir: &Path, model: &str, max_batch: usize, delay: Duration) -> ModelSpec {
    model_spec(dir, model, pool(DeviceKind::Cpu, 1), max_batch, delay)
}

/// Rows per second of `callers` closed-loop callers through the runtime.
async fn runtime_rows_per_s(
    repo: Arc<ModelRepository>,
    model: &str,
    callers: usize,
    rows_per_request: usize,
    duration: Duration,
) -> Result<f64> {
    Ok(runtime_loop(repo, model, callers, rows_per_request, duration).await?.rows_per_s)
}

/// Rows per second of a bare `Session::run` loop on one CPU thread.
fn direct_rows_per_s(path: &Path, batch: usize, duration: Duration) -> Result<f64> {
    Ok(direct_loop(path, &pool(DeviceKind::Cpu, 1), batch, duration)?.rows_per_s)
}

async fn cold_start(dir: &Path, model: &str) -> Result<Duration> {
    let repo = ModelRepository::new(vec![spec(dir, model, 32, Duration::from_micros(500))])?;
    let report = repo.load(model).await?;
    Ok(report.cold_start)
}

/// The batching of each example model in the gateway's built-in config
/// (`gateway/src/config/default.toml`): max batch size, queue delay.
fn gateway_batching(model: &str) -> (usize, Duration) {
    match model {
        "digits-cheap" => (64, Duration::from_micros(200)),
        "digits-heavy" => (64, Duration::from_micros(300)),
        "synth-heavy" => (16, Duration::from_micros(500)),
        _ => (64, Duration::from_micros(1000)),
    }
}

/// The raw runtime limit: direct `Session::run` rows/s of each model at
/// each batch size, and the best batch size per model; then the runtime
/// alone (queue, batcher, worker) with the gateway's batching and 40
/// one-row callers, on the same CPUs: the gateway minus HTTP.
async fn raw_limit(args: &Args) -> Result<serde_json::Value> {
    let full = args.mode == "full";
    let duration = Duration::from_secs(if full { 5 } else { 2 });
    let default_batches = if full { "1,4,16,32,64,128" } else { "1,16,64" };
    let batches: Vec<usize> = parse_list(args.batches.as_deref().unwrap_or(default_batches), "batch size")?;
    let models: Vec<String> = parse_list(&args.models, "model")?;
    let mut runs = Vec::new();
    let mut best = Vec::new();
    for model in &models {
        let path = args.models_dir.join(format!("{model}.onnx"));
        let mut top: Option<(usize, f64)> = None;
        for &batch in &batches {
            eprintln!("[runtime-bench] raw limit: {model}, Session::run at batch {batch}");
            let rows_per_s = direct_rows_per_s(&path, batch, duration)?;
            runs.push(json!({"model": model, "batch": batch, "rows_per_s": rows_per_s}));
            if top.is_none_or(|(_, r)| rows_per_s > r) {
                top = Some((batch, rows_per_s));
            }
        }
        if let Some((batch, rows_per_s)) = top {
            best.push(json!({"model": model, "batch": batch, "rows_per_s": rows_per_s}));
        }
    }
    let mut alone = Vec::new();
    for model in &models {
        let (max_batch, delay) = gateway_batching(model);
        eprintln!("[runtime-bench] runtime alone: {model}, 40 one-row callers, gateway batching");
        let repo = ModelRepository::new(vec![spec(&args.models_dir, model, max_batch, delay)])?;
        let rows_per_s = runtime_rows_per_s(repo, model, 40, 1, duration).await?;
        alone.push(json!({"model": model, "callers": 40, "max_batch_size": max_batch,
                          "max_queue_delay_us": delay.as_micros() as u64, "rows_per_s": rows_per_s}));
    }
    Ok(json!({"raw_limit": runs, "best": best, "runtime_alone": alone, "duration_s": duration.as_secs_f64(),
              "threads": 1, "what": "Session::run in a loop, one intra-op thread, outputs copied out"}))
}

fn write_result(args: &Args, result: &serde_json::Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(result)?);
    if let Some(path) = &args.json_out {
        std::fs::write(path, serde_json::to_vec_pretty(result)?)?;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    init_onnxruntime(None)?;
    match args.section.as_str() {
        "all" => {}
        "raw-limit" => return write_result(&args, &raw_limit(&args).await?),
        other => anyhow::bail!("unknown --section {other:?}: use all or raw-limit"),
    }
    let secs = if args.mode == "full" { 10 } else { 2 };
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

    let mut cold = Vec::new();
    for model in ["digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"] {
        let t = cold_start(&dir, model).await?;
        cold.push(json!({"model": model, "cold_start_ms": t.as_secs_f64() * 1e3}));
    }

    let result = json!({
        "batching": {"model": "synth-wide", "callers": 32, "unbatched_rows_per_s": unbatched,
                     "batched_rows_per_s": batched, "gain": batched / unbatched},
        "overhead": overhead,
        "cold_start": cold,
        "duration_s": secs,
    });
    write_result(&args, &result)
}
