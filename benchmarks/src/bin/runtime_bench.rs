//! Runtime benchmark (no HTTP): what the runtime's device pools and
//! dynamic batcher deliver, measured side by side in one run.
//!
//! 1. Batching gain: `synth-wide`, 32 concurrent callers sending one row
//!    each, with dynamic batching (max 32) vs without (batch size 1).
//! 2. Overhead: the runtime path vs calling `Session::run` directly at the
//!    same batch size, on the same model and thread settings.
//! 3. Cold start: load time of each example model.
//!
//! With `--section overhead` it measures only 2 (`--cases model:batch,...`).
//!
//! With `--section isolation` it measures what batch-failure isolation
//! costs when no batch fails and what it buys when some do (see
//! [`isolation`]); run it from two builds, alternately, for an A/B.
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
//! `runtime-bench --section isolation --json-out isolation.json`

use anyhow::Result;
use clap::Parser;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use switchyard_benchmarks::isolation_loops::{mixed_loop, threads_cpu_seconds};
use switchyard_benchmarks::pin::PinnedHere;
use switchyard_benchmarks::runtime_loops::{
    direct_loop, model_spec, one_caller_here, parse_list, pool, runtime_loop,
};
use switchyard_runtime::{init_onnxruntime, BatchingSpec, DeviceKind, ModelRepository, ModelSpec};

/// The same Rust heap as the `switchyard` binary (mimalloc), so the
/// runtime path is measured as the gateway runs it; the direct loop shares
/// it. ONNX Runtime's own allocations stay with glibc in both.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// What to measure: `all` (batching gain, overhead, cold start),
    /// `overhead` (only the runtime path vs `Session::run`, for A/Bs of the
    /// runtime's own cost), `raw-limit` (direct `Session::run` at several
    /// batch sizes) or `isolation` (batches with and without bad requests).
    #[arg(long, default_value = "all")]
    section: String,
    /// The string-to-integer model of the isolation section.
    #[arg(long, default_value = "runtime/tests/fixtures/str-to-int.onnx")]
    isolation_model: PathBuf,
    /// Models of the raw-limit section, comma-separated.
    #[arg(long, default_value = "digits-cheap,synth-heavy")]
    models: String,
    /// Cases of the overhead section, `model:batch` comma-separated.
    #[arg(long, default_value = "synth-wide:32,synth-heavy:8,digits-cheap:1,digits-heavy:32")]
    cases: String,
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

/// The runtime path vs a direct `Session::run` loop at the same batch
/// size, per `--cases`: 16 closed-loop callers, each request one full
/// batch (the worker's own cost, pipelined behind the callers'); and one
/// caller, as the direct loop is one (what a lone caller of the model
/// pays), with the default `inline_max` and with it off (every request
/// through the worker thread). The four take turns in `OVERHEAD_ROUNDS`
/// rounds of `duration / OVERHEAD_ROUNDS` each, so a change in the
/// machine's load hits all of them; each figure is the median over the
/// rounds (ratios per round, then the median). The direct loop and the
/// one caller with `inline_max` are both single-threaded loops: they run
/// on this same thread, held on one CPU ([`PinnedHere`]) for the pair, so
/// that their ratio compares the two paths and not two cores (unpinned,
/// the rounds' ratios ranged from 0.5 to 1.4, depending on where each loop
/// landed).
async fn overhead(args: &Args, duration: Duration) -> Result<Vec<serde_json::Value>> {
    let slice = duration / OVERHEAD_ROUNDS as u32;
    let mut overhead = Vec::new();
    for case in parse_list::<String>(&args.cases, "case")? {
        let (model, batch) =
            case.split_once(':').ok_or_else(|| anyhow::anyhow!("case {case:?} is not model:batch"))?;
        let batch: usize = batch.parse().map_err(|_| anyhow::anyhow!("bad batch size in case {case:?}"))?;
        eprintln!("[runtime-bench] {model}: runtime vs direct Session::run at batch {batch}");
        let with_inline = |inline_max| -> Result<Arc<ModelRepository>> {
            let mut one = spec(&args.models_dir, model, batch, Duration::ZERO);
            one.batching.inline_max = inline_max;
            Ok(ModelRepository::new(vec![one])?)
        };
        let (many, inline, queued) = (
            with_inline(BatchingSpec::DEFAULT_INLINE_MAX)?,
            with_inline(BatchingSpec::DEFAULT_INLINE_MAX)?,
            with_inline(Duration::ZERO)?,
        );
        let mut rounds = Vec::new();
        let mut pinned_to = None;
        for _ in 0..OVERHEAD_ROUNDS {
            let (direct, inline) = {
                let pin = PinnedHere::new();
                pinned_to = pin.as_ref().map(|p| p.cpu);
                let direct = direct_rows_per_s(&args.models_dir.join(format!("{model}.onnx")), batch, slice)?;
                let inline = one_caller_here(&inline, model, batch, slice).await?.rows_per_s;
                (direct, inline)
            };
            let many = runtime_rows_per_s(many.clone(), model, 16, batch, slice).await?;
            let queued = runtime_rows_per_s(queued.clone(), model, 1, batch, slice).await?;
            rounds.push([direct, many, inline, queued]);
        }
        let median_of = |f: &dyn Fn(&[f64; 4]) -> f64| median(rounds.iter().map(f).collect());
        let one =
            |i: usize| json!({"rows_per_s": median_of(&|r| r[i]), "ratio": median_of(&|r| r[i] / r[0])});
        overhead.push(json!({"model": model, "batch": batch, "direct_rows_per_s": median_of(&|r| r[0]),
            "runtime_rows_per_s": median_of(&|r| r[1]), "ratio": median_of(&|r| r[1] / r[0]),
            "one_caller": {"inline": one(2), "queued": one(3)},
            "inline_max_us": BatchingSpec::DEFAULT_INLINE_MAX.as_micros() as u64,
            "direct_and_inline_on_cpu": pinned_to,
            "rounds": rounds.iter().map(|r| json!({"direct": r[0], "callers_16": r[1], "one_inline": r[2],
                                                  "one_queued": r[3]})).collect::<Vec<_>>()}));
    }
    Ok(overhead)
}

/// Batch-failure isolation, in `ISOLATION_ROUNDS` rounds of four loops of
/// `duration / 2` each (a change in the machine's load hits all four):
/// 1. `direct`: `Session::run` of digits-cheap at batch 1 on this thread,
///    the machine's pace, to which two builds' runs are compared;
/// 2. `digits_16`: digits-cheap, 16 one-row callers, batches of up to 16
///    gathered for 200 µs: float batches that never fail;
/// 3. `text_10`: the string-to-integer model (`--isolation-model`), 10
///    callers sending numbers: string batches that never fail;
/// 4. `text_8_2`: the same, 8 callers sending numbers beside 2 sending
///    text that is no number, sharing batches.
///
/// 1-3 are the path isolation must leave as it was (compare two builds'
/// ratios to `direct`); 4 shows what it buys (valid requests failed) and
/// what it costs (valid requests answered per second). Each figure is the
/// median over the rounds. At the end, digits-cheap's worker thread's CPU
/// time per executed row (warm-ups included): the worker path's own cost,
/// which waiting for a core on a busy machine does not blur.
async fn isolation(args: &Args, duration: Duration) -> Result<serde_json::Value> {
    let slice = duration / 2;
    let batching = (16, Duration::from_micros(200));
    let digits = ModelRepository::new(vec![spec(&args.models_dir, "digits-cheap", batching.0, batching.1)])?;
    let dir = args.isolation_model.parent().unwrap_or(Path::new("."));
    let name = args
        .isolation_model
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| anyhow::anyhow!("--isolation-model has no file name"))?;
    let text = ModelRepository::new(vec![spec(dir, name, batching.0, batching.1)])?;
    let mut rounds = Vec::new();
    for round in 0..ISOLATION_ROUNDS {
        eprintln!("[runtime-bench] isolation round {}/{ISOLATION_ROUNDS}", round + 1);
        let direct = {
            let _pin = PinnedHere::new();
            direct_rows_per_s(&args.models_dir.join("digits-cheap.onnx"), 1, slice)?
        };
        let digits_16 = runtime_rows_per_s(digits.clone(), "digits-cheap", 16, 1, slice).await?;
        let text_10 = mixed_loop(text.clone(), name, 10, 0, slice).await?;
        let text_8_2 = mixed_loop(text.clone(), name, 8, 2, slice).await?;
        rounds.push((direct, digits_16, text_10, text_8_2));
    }
    let worker_cpu_s = threads_cpu_seconds("sy-digits-chea")?;
    let pool = digits.stats().models.first().and_then(|m| m.pools.first().cloned());
    let (executions, rows) = pool.map_or((0, 0), |p| (p.executions, p.executed_rows));
    let med = |f: &dyn Fn(&(f64, f64, _, _)) -> f64| median(rounds.iter().map(f).collect());
    let failed: u64 = rounds.iter().map(|r| r.3.valid_failed).sum();
    let answered: f64 = rounds.iter().map(|r| r.3.valid_per_s * slice.as_secs_f64()).sum();
    Ok(json!({
        "direct_rows_per_s": med(&|r| r.0),
        "digits_16": {"rows_per_s": med(&|r| r.1), "ratio": med(&|r| r.1 / r.0)},
        "text_10": {"valid_per_s": med(&|r| r.2.valid_per_s), "ratio": med(&|r| r.2.valid_per_s / r.0)},
        "text_8_2": {"valid_per_s": med(&|r| r.3.valid_per_s), "ratio": med(&|r| r.3.valid_per_s / r.0),
                     "valid_failed": failed, "valid_answered": answered.round(),
                     "bad_rejected_400": rounds.iter().map(|r| r.3.bad_rejected).sum::<u64>(),
                     "bad_other": rounds.iter().map(|r| r.3.bad_other).sum::<u64>()},
        "batching": {"max_batch_size": batching.0, "max_queue_delay_us": batching.1.as_micros() as u64},
        "digits_worker": {"cpu_s": worker_cpu_s, "executions": executions, "executed_rows": rows,
                          "cpu_us_per_row": worker_cpu_s * 1e6 / rows.max(1) as f64,
                          "rows_per_batch": rows as f64 / executions.max(1) as f64},
        "slice_s": slice.as_secs_f64(),
        "rounds": rounds.iter().map(|r| json!({"direct": r.0, "digits_16": r.1, "text_10": r.2.json(),
                                              "text_8_2": r.3.json()})).collect::<Vec<_>>(),
    }))
}

/// Rounds of the isolation section (see [`isolation`]).
const ISOLATION_ROUNDS: usize = 6;

/// Rounds of the overhead section (see [`overhead`]). Many short rounds
/// rather than a few long ones: this VM's speed drifts within seconds (the
/// direct loop moved by up to 2x between 2 s rounds), and each ratio is
/// only as good as the likeness of the moments its two halves ran in.
const OVERHEAD_ROUNDS: usize = 15;

/// The median of `values` (the mean of the middle two for an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
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
        "all" | "overhead" => {}
        "raw-limit" => return write_result(&args, &raw_limit(&args).await?),
        "isolation" => {
            let secs = if args.mode == "full" { 10 } else { 2 };
            let result = isolation(&args, Duration::from_secs(secs)).await?;
            return write_result(&args, &json!({"isolation": result, "duration_s": secs}));
        }
        other => anyhow::bail!("unknown --section {other:?}: use all, overhead, raw-limit or isolation"),
    }
    let secs = if args.mode == "full" { 10 } else { 2 };
    let duration = Duration::from_secs(secs);
    if args.section == "overhead" {
        return write_result(
            &args,
            &json!({"overhead": overhead(&args, duration).await?, "duration_s": secs}),
        );
    }
    let dir = args.models_dir.clone();

    eprintln!("[runtime-bench] synth-wide, 32 callers x 1 row: batching off vs on");
    let off = ModelRepository::new(vec![spec(&dir, "synth-wide", 1, Duration::ZERO)])?;
    let unbatched = runtime_rows_per_s(off, "synth-wide", 32, 1, duration).await?;
    let on = ModelRepository::new(vec![spec(&dir, "synth-wide", 32, Duration::from_millis(2))])?;
    let batched = runtime_rows_per_s(on, "synth-wide", 32, 1, duration).await?;

    let overhead = overhead(&args, duration).await?;

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
