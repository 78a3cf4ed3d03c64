//! End-to-end overload test on the real runtime (issue 5, "What it must
//! show"): one model with two CPU pools of different capacity; an
//! open-loop load at 2x the preferred pool's capacity; with spill-over
//! (the `fixed` policy placing each request on the cheapest pool whose
//! predicted completion fits the budget) nearly every request finishes
//! inside its budget, while the same load pinned to the preferred pool
//! misses far more.
//!
//! The model is `synth-wide` (memory-bound: batching 32 rows runs ~9x the
//! rows per second of batch 1). The pools, named for what they are:
//! - `cpu-unbatched`: 1 worker, batch size 1, cost 1 (preferred: lowest
//!   latency when idle, like a GPU pool with little queue);
//! - `cpu-batched`: 1 worker, batches of up to 32 rows, cost 2 (the
//!   overflow pool, like a CPU pool beside a saturated GPU).
//!
//! Their capacity differs through batching rather than through cores, so
//! the test means the same on a 2-vCPU machine (where a second
//! compute-bound pool adds little) as on a large one. `SPILL_LOAD_FACTOR`
//! (default 2.0) and `SPILL_PHASE_S` (default 5) tune it.
//!
//! On a GPU machine, `SPILL_PREFERRED_DEVICE=cuda` makes the preferred
//! pool a CUDA pool (`cuda-unbatched`, a build with `--features cuda`)
//! and `SPILL_CPU_WORKERS` (default 1) gives the CPU overflow pool enough
//! workers to take what a GPU's overflow is (`benchmarks/gpu/README.md`).
//!
//! What it asserts is the behaviour, with room for a busy machine: the
//! spill pool is used, spill-over keeps at least `SPILL_MIN_SHARE` of the
//! requests inside their budget (default 0.8; the benchmark suite's
//! `overload` stage and a GPU check report the share itself, 96-100% on
//! a quiet machine) and misses far fewer than pinning. `make test` runs
//! beside other builds and tests: a share asserted at 99% failed there
//! at 96.4% while the pinned share was 1%.
//!
//! Run: `cargo test -p switchyard --test spill_over -- --nocapture`.
//! With `SPILL_JSON_OUT=FILE` the figures are also written to FILE as JSON
//! (before the assertions, so a failing run still leaves them), which is
//! how the benchmark suite's `overload` stage reads them.

// Test helpers outside #[test] functions: a failed set-up should stop the test loudly.
#![allow(clippy::expect_used)]

use http::HeaderMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard::{
    execute, open_repository, parse_config, resolve_budget, resolve_target, route_budget, AppState, Config,
    RouteRequest, Strategy, Target,
};
use switchyard_runtime::{InferenceRequest, Tensor};

/// Rows per request.
const ROWS: usize = 1;
/// The latency budget every request gets.
const BUDGET_MS: u64 = 250;
/// The preferred pool's device: `cpu` unless `SPILL_PREFERRED_DEVICE` says `cuda`.
fn preferred_device() -> String {
    std::env::var("SPILL_PREFERRED_DEVICE").unwrap_or_else(|_| "cpu".into())
}

/// The preferred pool, named for its device.
fn preferred() -> String {
    format!("{}-unbatched", preferred_device())
}

fn config() -> Config {
    let models = concat!(env!("CARGO_MANIFEST_DIR"), "/../models/synth-wide.onnx");
    let (device, preferred) = (preferred_device(), preferred());
    let cpu_workers = env_f64("SPILL_CPU_WORKERS", 1.0).max(1.0) as usize;
    let text = format!(
        r#"
[[models]]
name = "wide-spill"
path = "{models}"
warmup = true
batching = {{ max_batch_size = 32, max_queue_delay_us = 2000, queue_capacity = 100000 }}
pools = [
  {{ name = "{preferred}", device = "{device}", cost = 1.0, batching = {{ max_batch_size = 1 }} }},
  {{ name = "cpu-batched", device = "cpu", cost = 2.0, workers = {cpu_workers} }},
]
[[models]]
name = "wide-pinned"
path = "{models}"
warmup = true
batching = {{ max_batch_size = 1, queue_capacity = 100000 }}
pools = [{{ name = "{preferred}", device = "{device}" }}]

[[routes]]
name = "spill"
models = ["wide-spill"]
budget_ms = {{ default = {BUDGET_MS}, max = 10000 }}
[[routes]]
name = "pinned"
models = ["wide-pinned"]
budget_ms = {{ default = {BUDGET_MS}, max = 10000 }}
"#
    );
    parse_config(&text, std::path::Path::new("/")).expect("test config")
}

fn request() -> InferenceRequest {
    let values: Vec<f32> = (0..ROWS * 64).map(|i| (i % 17) as f32 / 17.0).collect();
    InferenceRequest::new(vec![("X".into(), Tensor::from_f32(vec![ROWS, 64], &values).expect("tensor"))])
}

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One request through the real routing seam; returns (latency from the
/// scheduled send time, pool that answered) or None on error.
async fn one(state: &AppState, target: &Target, scheduled: Instant) -> Option<(Duration, String)> {
    let snap = state.snapshot.load();
    // The route's default budget, as the handler resolves it.
    let route = route_budget(target.route(&snap.config));
    let budget = resolve_budget(route, &HeaderMap::new(), &serde_json::Map::new()).ok()?.budget;
    let req = RouteRequest {
        target,
        request: request(),
        budget,
        received: scheduled,
        draw: None,
        class: switchyard_runtime::DEFAULT_CLASS,
    };
    let finished = execute(state.routing(&snap), req, Strategy::Single).await.ok()?;
    Some((scheduled.elapsed(), finished.answer.pool))
}

/// Closed-loop calibration: requests per second `route` sustains with
/// `streams` requests in flight (2 s).
async fn capacity(state: Arc<AppState>, config: Arc<Config>, route: &str, streams: usize) -> f64 {
    let target = Arc::new(
        resolve_target(&config, &state.catalog(&state.snapshot.load()), route, None).expect("route"),
    );
    let start = Instant::now();
    let deadline = start + Duration::from_secs(2);
    let mut handles = Vec::new();
    for _ in 0..streams {
        let (state, target) = (state.clone(), target.clone());
        handles.push(tokio::spawn(async move {
            let mut done = 0usize;
            while Instant::now() < deadline {
                one(&state, &target, Instant::now()).await;
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap_or(0);
    }
    total as f64 / start.elapsed().as_secs_f64()
}

struct Phase {
    sent: usize,
    inside: usize,
    errors: usize,
    p50: Duration,
    p99: Duration,
    spilled: usize,
}

/// Open loop: one request every `1/rate` s for `secs`, each timed from its
/// scheduled send time.
async fn phase(state: Arc<AppState>, config: Arc<Config>, route: &str, rate: f64, secs: f64) -> Phase {
    let preferred = Arc::new(preferred());
    let target = Arc::new(
        resolve_target(&config, &state.catalog(&state.snapshot.load()), route, None).expect("route"),
    );
    let interval = Duration::from_secs_f64(1.0 / rate);
    let total = (rate * secs) as usize;
    let start = Instant::now();
    let mut handles = Vec::with_capacity(total);
    for i in 0..total {
        let scheduled = start + interval.mul_f64(i as f64);
        tokio::time::sleep_until(scheduled.into()).await;
        let (state, target) = (state.clone(), target.clone());
        handles.push(tokio::spawn(async move { one(&state, &target, scheduled).await }));
    }
    let mut latencies = Vec::new();
    let (mut errors, mut spilled) = (0, 0);
    for h in handles {
        match h.await.ok().flatten() {
            Some((latency, pool)) => {
                spilled += usize::from(pool != *preferred);
                latencies.push(latency);
            }
            None => errors += 1,
        }
    }
    latencies.sort();
    let budget = Duration::from_millis(BUDGET_MS);
    let pct = |q: f64| {
        latencies.get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
    };
    Phase {
        sent: total,
        inside: latencies.iter().filter(|l| **l <= budget).count(),
        errors,
        p50: pct(0.5).copied().unwrap_or_default(),
        p99: pct(0.99).copied().unwrap_or_default(),
        spilled,
    }
}

fn phase_json(p: &Phase) -> serde_json::Value {
    serde_json::json!({
        "sent": p.sent,
        "inside_budget": p.inside,
        "inside_share": p.inside as f64 / p.sent.max(1) as f64,
        "errors": p.errors,
        "p50_ms": p.p50.as_secs_f64() * 1e3,
        "p99_ms": p.p99.as_secs_f64() * 1e3,
        "on_spill_pool": p.spilled,
    })
}

fn report(name: &str, p: &Phase) -> f64 {
    let share = p.inside as f64 / p.sent.max(1) as f64;
    println!(
        "{name:>9}: sent {:5}  inside {BUDGET_MS} ms budget {:6.2}%  errors {:3}  p50 {:7.1} ms  p99 {:8.1} ms  on cpu-batched {:5}",
        p.sent,
        share * 100.0,
        p.errors,
        p.p50.as_secs_f64() * 1e3,
        p.p99.as_secs_f64() * 1e3,
        p.spilled
    );
    share
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spill_over_keeps_requests_inside_their_budget() {
    let config = Arc::new(config());
    let repo = open_repository(&config).expect("ONNX Runtime and models (run the set-up)");
    let state = Arc::new(AppState::new((*config).clone(), repo));
    let cap = capacity(state.clone(), config.clone(), "pinned", 2).await;
    let factor = env_f64("SPILL_LOAD_FACTOR", 2.0);
    let secs = env_f64("SPILL_PHASE_S", 5.0);
    let rate = cap * factor;
    println!(
        "capacity: {} alone {cap:.0} req/s ({ROWS} row each); \
         offered {rate:.0} req/s = {factor:.2}x for {secs} s, budget {BUDGET_MS} ms",
        preferred()
    );
    let spill = phase(state.clone(), config.clone(), "spill", rate, secs).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pinned = phase(state.clone(), config.clone(), "pinned", rate, secs).await;
    let spill_share = report("spill-over", &spill);
    let pinned_share = report("pinned", &pinned);
    println!("decisions: {}", state.decisions.to_json());
    if let Ok(path) = std::env::var("SPILL_JSON_OUT") {
        let doc = serde_json::json!({
            "model": "synth-wide",
            "preferred_pool": preferred(),
            "spill_pool": "cpu-batched",
            "budget_ms": BUDGET_MS,
            "rows_per_request": ROWS,
            "preferred_capacity_rps": cap,
            "load_factor": factor,
            "offered_rps": rate,
            "phase_s": secs,
            "spill_over": phase_json(&spill),
            "pinned": phase_json(&pinned),
            "decisions": state.decisions.to_json(),
        });
        let text = serde_json::to_string_pretty(&doc).expect("JSON");
        std::fs::write(&path, text).expect("writing SPILL_JSON_OUT");
    }
    // Let the workers drop their sessions before the process exits (a CUDA
    // session left to the exit-time teardown can crash the test binary).
    state.snapshot.load().repo.shutdown();
    assert!(switchyard_runtime::worker_census::wait_for_workers(Duration::from_secs(10)));
    assert!(spill.spilled > 0, "the spill pool was never used");
    let min_share = std::env::var("SPILL_MIN_SHARE").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.8);
    assert!(
        spill_share >= min_share,
        "spill-over kept only {:.2}% inside the budget (SPILL_MIN_SHARE {min_share})",
        spill_share * 100.0
    );
    assert!(
        pinned_share < spill_share - 0.2,
        "pinning should miss far more: {pinned_share} vs {spill_share}"
    );
}
