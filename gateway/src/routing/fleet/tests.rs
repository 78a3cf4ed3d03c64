//! Fleet-view construction and the routing fields of the config.

use super::*;
use crate::config::parse;
use router_policies::{Device, PolicyConfig};
use std::path::Path;
use switchyard_runtime::{LatencyBucket as RuntimeBucket, ModelState, ModelStats, PoolStats};

const CONFIG: &str = r#"
[[models]]
name = "cheap"
path = "cheap.onnx"
batching = { max_batch_size = 8 }
[[models]]
name = "heavy"
path = "heavy.onnx"
quality = 7
cost = 10.0
pools = [{ name = "gpu", device = "cuda", cost = 0.5 }, { name = "cpu-slow", device = "cpu", workers = 2 }]
[[routes]]
name = "r"
models = ["cheap", "heavy"]
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
"#;

fn pool(name: &str, device: DeviceKind, available: bool, max_batch_size: usize) -> PoolStats {
    PoolStats {
        max_batch_size,
        name: name.into(),
        device,
        available,
        unavailable_reason: None,
        paused: false,
        workers: 2,
        queue_depth: 5,
        queue_capacity: 64,
        lowest_queued_class: None,
        in_flight: 3,
        requests: 0,
        executions: 0,
        executed_rows: 0,
        cancelled: 0,
        rejected: 0,
        errors: 0,
        inline_runs: 0,
        caller_batches: 0,
        preemptions: 0,
        reserved_batches: 0,
        isolated_batches: 0,
        latency: vec![
            RuntimeBucket { max_batch: 1, ewma: Duration::from_millis(4), samples: 10 },
            RuntimeBucket { max_batch: 2, ewma: Duration::ZERO, samples: 0 },
        ],
        histograms: Default::default(),
    }
}

fn model(name: &str, state: ModelState, pools: Vec<PoolStats>) -> ModelStats {
    ModelStats {
        name: name.into(),
        version: 1,
        state,
        last_cold_start: None,
        loads: 1,
        unloads: 0,
        cold_starts: Default::default(),
        pools,
    }
}

fn snapshot() -> RuntimeSnapshot {
    RuntimeSnapshot {
        models: vec![
            model("cheap", ModelState::Unloaded, vec![pool("cpu", DeviceKind::Cpu, true, 8)]),
            model(
                "heavy",
                ModelState::Ready,
                vec![pool("gpu", DeviceKind::Cuda, false, 32), pool("cpu-slow", DeviceKind::Cpu, true, 32)],
            ),
        ],
    }
}

#[test]
fn view_carries_load_capacity_latency_and_defaults() {
    let config = parse(CONFIG, Path::new("/m")).unwrap();
    let models = vec!["cheap".to_string(), "heavy".to_string()];
    let fleet = fleet_view(&snapshot(), &config, &models, switchyard_runtime::DEFAULT_CLASS);
    let cheap = &fleet.candidates[0];
    assert_eq!((cheap.quality_rank, cheap.relative_cost, cheap.available), (0, 1.0, true));
    let p = &cheap.pools[0];
    assert_eq!((p.workers, p.queue_depth, p.in_flight, p.queue_capacity), (2, 5, 3, Some(64)));
    assert_eq!(p.max_batch_size, 8);
    assert_eq!(p.relative_cost, 1.0);
    assert_eq!(p.latency.buckets[0].latency, Duration::from_millis(4).mul_f64(LATENCY_HEADROOM));
    assert_eq!(p.latency.buckets[1].samples, 0);
    // Not loaded: its statistics describe warm sessions it no longer has.
    assert_eq!(p.latency.stats_age, Duration::MAX);

    let heavy = &fleet.candidates[1];
    assert_eq!((heavy.quality_rank, heavy.relative_cost), (7, 10.0));
    assert_eq!(heavy.pools[0].device, Device::Cuda);
    assert!(!heavy.pools[0].available);
    assert_eq!(heavy.pools[0].relative_cost, 0.5);
    assert_eq!(heavy.pools[0].max_batch_size, 32, "each pool reports its own batching");
    assert_eq!(heavy.pools[1].latency.stats_age, Duration::ZERO);
}

#[test]
fn unknown_or_failed_models_are_unavailable() {
    let config = parse(CONFIG, Path::new("/m")).unwrap();
    let mut snap = snapshot();
    snap.models[1].state = ModelState::Failed("corrupt".into());
    let models = vec!["heavy".to_string(), "ghost".to_string()];
    let fleet = fleet_view(&snap, &config, &models, switchyard_runtime::DEFAULT_CLASS);
    assert!(!fleet.candidates[0].available);
    assert!(!fleet.candidates[1].available);
    assert!(fleet.candidates[1].pools.is_empty());
}

#[test]
fn policy_defaults_to_fixed_on_the_last_model() {
    let text = CONFIG.replace(
        "policy = { type = \"cascade\", confidence_output = \"probabilities\", threshold = 0.8 }",
        "",
    );
    let config = parse(&text, Path::new("/m")).unwrap();
    let route = config.route("r").unwrap();
    assert!(matches!(&route.policy, PolicyConfig::Fixed(f) if f.model == "heavy"));
    let parsed = parse(CONFIG, Path::new("/m")).unwrap();
    assert_eq!(parsed.route("r").unwrap().policy.kind(), "cascade");
}

#[test]
fn policy_and_cost_mistakes_name_their_fields() {
    let text = CONFIG.replace("threshold = 0.8", "threshold = 1.5").replace("cost = 0.5", "cost = -1");
    let issues = parse(&text, Path::new("/m")).unwrap_err();
    let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
    assert!(paths.contains(&"routes[0].policy.threshold"), "{issues:?}");
    assert!(paths.contains(&"models[1].pools[0].cost"), "{issues:?}");
    let unknown = CONFIG.replace("type = \"cascade\"", "type = \"roulette\"");
    let issues = parse(&unknown, Path::new("/m")).unwrap_err();
    assert!(
        issues[0].path.starts_with("routes[0].policy") || issues[0].path.starts_with("routes"),
        "{issues:?}"
    );
    assert!(issues[0].message.contains("roulette"), "{issues:?}");
}

#[test]
fn fixed_policy_must_name_a_route_model() {
    let text = CONFIG.replace(
        "policy = { type = \"cascade\", confidence_output = \"probabilities\", threshold = 0.8 }",
        "policy = { type = \"fixed\", model = \"nope\" }",
    );
    let issues = parse(&text, Path::new("/m")).unwrap_err();
    assert_eq!(issues[0].path, "routes[0].policy.model", "{issues:?}");
}
