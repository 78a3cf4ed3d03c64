//! Device benchmark (no HTTP): a CUDA pool against a CPU pool and against
//! a bare `Session::run` loop on the same GPU, side by side in one run.
//!
//! For each model and batch size: the runtime path on the GPU (callers
//! each sending `batch` rows, batches of exactly `batch` rows), a direct
//! `Session::run` loop on a CUDA session built the same way (the ceiling;
//! the runtime's share of it is the "ratio"), and the runtime path on a
//! CPU pool with `--cpu-threads` intra-op threads. Then dynamic batching on
//! the GPU: one-row callers with batching off vs on.
//!
//! Needs a build with `--features cuda`, the `onnxruntime-gpu` library in
//! `ORT_DYLIB_PATH` and CUDA's libraries on `LD_LIBRARY_PATH`
//! (`benchmarks/gpu/README.md`):
//! `device-bench --models synth-wide,synth-heavy --batches 1,8,32 --json-out gpu.json`

use anyhow::Result;
use clap::Parser;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;
use switchyard_benchmarks::runtime_loops::{direct_loop, parse_list, pool, repository, runtime_loop};
use switchyard_runtime::{init_onnxruntime, DeviceKind};

#[derive(Parser)]
struct Args {
    /// Folder with the example models.
    #[arg(long, default_value = "models")]
    models_dir: PathBuf,
    /// Models, comma-separated (each takes `X: [rows, 64]`).
    #[arg(long, default_value = "synth-wide,synth-heavy")]
    models: String,
    /// Batch sizes, comma-separated.
    #[arg(long, default_value = "1,8,32")]
    batches: String,
    /// Seconds measured per figure (a fifth more warms up).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Closed-loop callers of the runtime path.
    #[arg(long, default_value_t = 4)]
    callers: usize,
    /// Intra-op threads of the CPU pool compared against (default: all cores).
    #[arg(long)]
    cpu_threads: Option<usize>,
    /// Where to write the results as JSON.
    #[arg(long)]
    json_out: Option<PathBuf>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Args::parse();
    init_onnxruntime(None)?;
    let duration = Duration::from_secs_f64(args.seconds);
    let cpu_threads =
        args.cpu_threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let dir = &args.models_dir;
    let models = parse_list::<String>(&args.models, "model")?;
    let batches = parse_list::<usize>(&args.batches, "batch size")?;
    let mut figures = Vec::new();
    for model in &models {
        let path = dir.join(format!("{model}.onnx"));
        for &batch in &batches {
            eprintln!("[device-bench] {model} at batch {batch}: GPU direct, GPU runtime, CPU runtime");
            let direct = direct_loop(&path, &pool(DeviceKind::Cuda, 1), batch, duration)?;
            let gpu = repository(dir, model, pool(DeviceKind::Cuda, 1), batch, Duration::ZERO)?;
            let gpu = runtime_loop(gpu, model, args.callers, batch, duration).await?;
            let cpu = repository(dir, model, pool(DeviceKind::Cpu, cpu_threads), batch, Duration::ZERO)?;
            let cpu = runtime_loop(cpu, model, args.callers, batch, duration).await?;
            figures.push(json!({
                "model": model, "batch": batch,
                "gpu_direct": direct.json(), "gpu_runtime": gpu.json(), "cpu_runtime": cpu.json(),
                "runtime_vs_direct": gpu.rows_per_s / direct.rows_per_s,
                "gpu_vs_cpu": gpu.rows_per_s / cpu.rows_per_s,
            }));
        }
    }
    let mut batching = Vec::new();
    for model in &models {
        eprintln!("[device-bench] {model}: 32 one-row callers on the GPU, batching off vs on");
        let off = repository(dir, model, pool(DeviceKind::Cuda, 1), 1, Duration::ZERO)?;
        let off = runtime_loop(off, model, 32, 1, duration).await?;
        let on = repository(dir, model, pool(DeviceKind::Cuda, 1), 32, Duration::from_micros(500))?;
        let on = runtime_loop(on, model, 32, 1, duration).await?;
        batching.push(json!({"model": model, "off": off.json(), "on": on.json(), "gain": on.rows_per_s / off.rows_per_s}));
    }
    let result = json!({"figures": figures, "batching": batching, "callers": args.callers,
                        "cpu_threads": cpu_threads, "seconds": args.seconds});
    println!("{}", serde_json::to_string_pretty(&result)?);
    if let Some(path) = &args.json_out {
        std::fs::write(path, serde_json::to_vec_pretty(&result)?)?;
    }
    Ok(())
}
