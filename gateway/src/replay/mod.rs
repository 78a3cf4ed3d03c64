//! `switchyard replay`: a recorded traffic sample ([`crate::record`]) run
//! offline through a candidate config, with its real models, beside the
//! current config, so an operator sees what a change of policy, threshold
//! or models would do before applying it.
//!
//! Each config is prepared as `serve` prepares it (the same checks; its
//! problems are reported with their field paths and nothing runs), without
//! listeners. Every recorded call of a route the config has runs through
//! [`crate::inference::run`] (the same routing as live, under the
//! recorded budget, cache bypassed so every call shows its policy's
//! decision), and the route's heaviest model (its last) runs on the same
//! inputs as the reference. Reported per config:
//!
//! - `escalated_share`: calls a cascade escalated to the heavy model;
//! - `agreement_with_heaviest`: calls whose answer has the heaviest model's
//!   top class in every row (of the route's confidence output, else of
//!   every output equal);
//! - `cost_per_call`: the models run per call weighed by their `cost`
//!   (default: 1 + position in the route), a cascade's cheap run included;
//! - `same_decision_as_live`: calls answered by the model that answered
//!   them live; `models`: the answering models;
//! - `cache_hit_ratio`: the exact-match L1 the candidate's `[cache]` and
//!   route TTLs would have had over the recorded arrivals
//!   ([`cache_sim`]), beside the live ratio the sample recorded.
//!
//! - `calibration`: per cascade route, the threshold the replayed calls
//!   suggest, as the live calibration ([`crate::routing::calibration`])
//!   computes it: the cheap model's confidence and agreement with the
//!   heaviest model per row, over every call (the route's
//!   `calibrate.target`, else 99.5%).
//!
//! - `latency`: each call's time from the pools' execution tables measured
//!   during the replay (its models' batch times for its rows, a cascade's
//!   cheap run included): p50, p99 and the share over the recorded budget,
//!   beside the live p50/p99 the sample recorded ([`latency`]).

pub mod cache_sim;
pub mod latency;
pub mod pacing;
pub mod report;
pub mod traffic;

use crate::config::calibrate_section::DEFAULT_TARGET;
use crate::config::{self, Config, RouteConfig};
use crate::error::GatewayError;
use crate::inference::{self, Call, Outcome};
use crate::routing::calibration::Curve;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::target::resolve;
use crate::upstream::Upstreams;
use cache_sim::CacheSim;
use http::{HeaderMap, HeaderValue};
use report::ConfigReport;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use switchyard_runtime::{InferenceRequest, Tensor};
use traffic::RecordedCall;

/// Replays `traffic` through the config at `candidate` and, when given,
/// through `against` (the current one), in that order.
pub fn replay(
    candidate: &Path,
    traffic: &Path,
    against: Option<&Path>,
    pace: Pace,
) -> Result<report::Report, String> {
    let mut configs = Vec::new();
    for path in against.into_iter().chain(std::iter::once(candidate)) {
        let config = config::load_file(path).map_err(|issues| {
            let lines: Vec<String> = issues.iter().map(|i| format!("  {i}")).collect();
            format!("{}: {} problem(s)\n{}", path.display(), issues.len(), lines.join("\n"))
        })?;
        configs.push((path.display().to_string(), config));
    }
    replay_loaded(configs, traffic, pace)
}

/// Replays `traffic` through already checked configs, each named by its
/// label, in order (the admin endpoint passes the config in force and a
/// posted candidate).
pub fn replay_loaded(
    configs: Vec<(String, Config)>,
    traffic: &Path,
    pace: Pace,
) -> Result<report::Report, String> {
    let calls = traffic::read(traffic)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the replay runtime: {e}"))?;
    let mut reports = Vec::new();
    for (label, config) in configs {
        reports.push(runtime.block_on(replay_config(label, config, &calls, pace))?);
    }
    Ok(report::Report { traffic: traffic.display().to_string(), calls: calls.len(), configs: reports })
}

/// How the replay spaces the calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// One call after the other, as fast as they run; latency is
    /// simulated from the pools' execution tables ([`latency::simulate`]).
    Fast,
    /// Each call starts at its recorded arrival time (offsets from the
    /// first call, divided by `speed`), so calls overlap, queue and batch as
    /// they did live; latency is measured, from each call's scheduled
    /// start to its answer ([`latency::measured`]). The heaviest model's
    /// reference runs happen afterwards, so they add no load. A replay
    /// that would take longer than [`pacing::MAX_PACED`] is refused.
    Recorded {
        /// Time compression: 2.0 replays an hour in half an hour.
        speed: f64,
    },
}

/// Prepares one config (as `serve` does), then replays every call through it.
async fn replay_config(
    label: String,
    mut config: Config,
    calls: &[RecordedCall],
    pace: Pace,
) -> Result<ConfigReport, String> {
    // The pace is checked before the models are prepared.
    let offsets = match pace {
        Pace::Fast => None,
        Pace::Recorded { speed } => {
            let arrivals: Vec<pacing::Arrival> = calls
                .iter()
                .filter(|call| config.route(&call.route).is_some())
                .map(|call| pacing::Arrival { line: call.line, arrived_ms: call.arrived_ms })
                .collect();
            Some(pacing::offsets(&arrivals, speed).map_err(|e| format!("{label}: {e}"))?)
        }
    };
    let upstreams = Arc::new(Upstreams::new(&config.proxy));
    let repo = crate::prepare::prepare(&mut config, &upstreams).map_err(|e| format!("{label}: {e:#}"))?;
    let state = AppState::with_upstreams(config, repo, upstreams);
    let snap = state.snapshot.load_full();
    let mut report = ConfigReport::new(label);
    let mut cache = snap.config.cache.as_ref().map(|c| CacheSim::new(c.l1_max_bytes));
    let routed: Vec<(&RecordedCall, &RouteConfig)> =
        calls.iter().filter_map(|call| snap.config.route(&call.route).map(|route| (call, route))).collect();
    report.skipped = calls.len() - routed.len();
    let mut paced = match offsets {
        None => None,
        Some(offsets) => Some(answer_at_recorded_times(&state, &snap, &routed, &offsets).await.into_iter()),
    };
    let mut runs = Vec::new();
    let mut measured_ms = Vec::new();
    let mut curves: std::collections::BTreeMap<String, (Curve, f64)> = Default::default();
    for &(call, route) in &routed {
        let answered = match paced.as_mut().and_then(Iterator::next) {
            Some((answered, took)) => answered.map(|a| (a, Some(took))),
            None => answer_call(&state, &snap, call).await.map(|a| (a, None)),
        };
        let judged = match answered {
            Ok((answered, took)) => judge_call(&snap, route, answered).await.map(|outcome| (outcome, took)),
            Err(e) => Err(e),
        };
        match judged {
            Ok((outcome, took)) => {
                if let Some(cache) = cache.as_mut().filter(|_| route.cache.enabled) {
                    let ttl_ms = u64::try_from(route.cache.ttl.as_millis()).unwrap_or(u64::MAX);
                    cache.call(call.cache_key(), call.arrived_ms, ttl_ms, outcome.answer_bytes);
                }
                runs.push(latency::Run {
                    steps: outcome.steps.clone(),
                    rows: call
                        .request
                        .inputs
                        .first()
                        .and_then(|(_, t)| t.shape().first().copied())
                        .unwrap_or(1),
                    budget_ms: call.budget_ms,
                    live_latency_us: call.live_latency_us,
                });
                measured_ms.extend(took.map(|d| d.as_secs_f64() * 1e3));
                if !outcome.calibration_rows.is_empty() {
                    let target = route.calibrate.as_ref().map_or(DEFAULT_TARGET, |c| c.target);
                    let (curve, _) =
                        curves.entry(route.name.clone()).or_insert_with(|| (Curve::default(), target));
                    for &(confidence, agrees) in &outcome.calibration_rows {
                        curve.add(confidence, agrees);
                    }
                }
                report.add(&outcome, call);
            }
            Err(e) => report.fail(call.line, &e),
        }
    }
    report.cache_hit_ratio = cache.and_then(|c| c.hit_ratio());
    report.calibration =
        curves.into_iter().map(|(route, (curve, target))| (route, curve.view(target))).collect();
    report.latency = Some(match pace {
        Pace::Fast => latency::simulate(&snap.repo.stats(), &runs),
        Pace::Recorded { .. } => latency::measured(&runs, &measured_ms),
    });
    Ok(report)
}

/// Answers every call, each started at its offset ([`pacing::offsets`],
/// one per call) and overlapping the others; gives back, in the calls'
/// order, each answer and the time from its scheduled start.
async fn answer_at_recorded_times(
    state: &AppState,
    snap: &Snapshot,
    routed: &[(&RecordedCall, &RouteConfig)],
    offsets: &[std::time::Duration],
) -> Vec<(Result<AnsweredCall, GatewayError>, std::time::Duration)> {
    use futures::stream::{FuturesUnordered, StreamExt};
    let start = tokio::time::Instant::now();
    let mut pending: FuturesUnordered<_> = routed
        .iter()
        .zip(offsets)
        .enumerate()
        .map(|(i, (&(call, _), &offset))| {
            // At most `pacing::MAX_PACED` from now: this cannot overflow.
            let at = start.checked_add(offset).unwrap_or(start);
            async move {
                tokio::time::sleep_until(at).await;
                let answered = answer_call(state, snap, call).await;
                (i, answered, at.elapsed())
            }
        })
        .collect();
    let mut done: Vec<Option<(Result<AnsweredCall, GatewayError>, std::time::Duration)>> =
        (0..routed.len()).map(|_| None).collect();
    while let Some((i, answered, took)) = pending.next().await {
        done[i] = Some((answered, took));
    }
    done.into_iter()
        .map(|d| {
            d.unwrap_or_else(|| {
                (Err(GatewayError::Internal("a paced call never ran".into())), Default::default())
            })
        })
        .collect()
}

/// What one replayed call gave.
pub struct CallOutcome {
    /// The model that answered.
    pub model: String,
    /// Whether a cascade escalated it.
    pub escalated: bool,
    /// Whether the answer agrees with the heaviest model's.
    pub agrees: bool,
    /// The compute cost of the models it ran.
    pub cost: f64,
    /// The answer's output bytes (its weight in the simulated cache).
    pub answer_bytes: u64,
    /// The (model, pool) runs it took, in order.
    pub steps: Vec<(String, String)>,
    /// On a cascade route: per row, the cheap model's confidence and
    /// whether its top class is the heaviest model's (for the suggested
    /// threshold, as the live calibration computes it).
    pub calibration_rows: Vec<(f32, bool)>,
}

/// A replayed call's answer, with the inputs it ran on (for the reference).
pub struct AnsweredCall {
    answer: Arc<switchyard_protocol::answer::Answer>,
    inputs: Vec<(String, Tensor)>,
}

/// Runs one recorded call through the config's routing, under its recorded budget.
async fn answer_call(
    state: &AppState,
    snap: &Snapshot,
    call: &RecordedCall,
) -> Result<AnsweredCall, GatewayError> {
    let config = &snap.config;
    let target = resolve(config, &state.catalog(snap), &call.route, None)?;
    let mut headers = HeaderMap::new();
    headers.insert(router_policies::BUDGET_HEADER, HeaderValue::from(call.budget_ms.max(1)));
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let (_, signature) = inference::decode_limits(state, snap, &target)?;
    let mut decoded = call.request.clone();
    inference::check_decoded(snap, &target, &signature, &mut decoded)?;
    let inputs = decoded.inputs.clone();
    let replayed = Call {
        target,
        decoded,
        headers: &headers,
        tenant: None,
        received: Instant::now(),
        stream: false,
        sampled: false,
        protocol: "replay",
    };
    match inference::run(state, snap, replayed).await? {
        Outcome::Answered(answered) => Ok(AnsweredCall { answer: answered.answer, inputs }),
        Outcome::Events(_) => {
            Err(GatewayError::Internal("a replayed call was answered with a stream".into()))
        }
    }
}

/// Judges an answer against the route's heaviest model on the same inputs
/// and works out its cost and model runs.
async fn judge_call(
    snap: &Snapshot,
    route: &RouteConfig,
    answered: AnsweredCall,
) -> Result<CallOutcome, GatewayError> {
    let config = &snap.config;
    let AnsweredCall { answer, inputs } = answered;
    let heaviest = route.models.last().map(String::as_str).unwrap_or(answer.model.as_str());
    let cascade = route.policy.as_cascade();
    let cheap_run = match cascade {
        Some(policy) => {
            let cheap = policy.cheap.clone().or_else(|| route.models.first().cloned()).unwrap_or_default();
            let request = InferenceRequest {
                inputs: inputs.clone(),
                outputs: Some(vec![policy.confidence_output.clone()]),
            };
            snap.repo.infer(&cheap, None, request).await.ok().map(|r| r.outputs)
        }
        None => None,
    };
    let reference = snap.repo.infer(heaviest, None, InferenceRequest { inputs, outputs: None }).await?;
    let confidence_output = cascade.map(|p| p.confidence_output.as_str());
    let calibration_rows = match (cheap_run, confidence_output) {
        (Some(outputs), Some(output)) => {
            crate::routing::calibration::rows(&outputs, &reference.outputs, output)
        }
        _ => Vec::new(),
    };
    let escalated = answer.reason == router_policies::Reason::CascadeEscalate;
    let cost_of = |model: &str| {
        let position = route.models.iter().position(|m| m == model).unwrap_or(0);
        config.model_routing.get(model).and_then(|r| r.cost).unwrap_or(1.0 + position as f64)
    };
    // A cascade ran its cheap model first (on its first pool); one that
    // escalated ran the answering model after it.
    let cheap = route.models.first().map(String::as_str).unwrap_or_default();
    let mut steps = Vec::new();
    let cost = if cascade.is_some() && answer.model != cheap {
        let pool = snap
            .repo
            .spec(cheap)
            .ok()
            .and_then(|s| s.pools.first().map(|p| p.name.clone()))
            .unwrap_or_default();
        steps.push((cheap.to_string(), pool));
        cost_of(cheap) + cost_of(&answer.model)
    } else {
        cost_of(&answer.model)
    };
    steps.push((answer.model.clone(), answer.pool.clone()));
    Ok(CallOutcome {
        agrees: agrees(&answer.outputs, &reference.outputs, confidence_output),
        model: answer.model.clone(),
        escalated,
        cost,
        answer_bytes: answer.outputs.iter().map(|(_, t)| t.byte_size() as u64).sum(),
        steps,
        calibration_rows,
    })
}

/// Whether `answer` agrees with `reference`: the same top class in every
/// row of `confidence_output` (when both have it), else every output the
/// answer has equal to the reference's.
fn agrees(
    answer: &[(String, Tensor)],
    reference: &[(String, Tensor)],
    confidence_output: Option<&str>,
) -> bool {
    let find = |outputs: &[(String, Tensor)], name: &str| {
        outputs.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone())
    };
    if let Some(name) = confidence_output {
        if let (Some(a), Some(b)) = (find(answer, name), find(reference, name)) {
            return top_classes(&a) == top_classes(&b);
        }
    }
    answer.iter().all(|(name, tensor)| find(reference, name).is_some_and(|r| r == *tensor))
}

/// The index of each row's largest value (`None` when not FP32).
fn top_classes(tensor: &Tensor) -> Option<Vec<usize>> {
    let values = tensor.to_f32_vec()?;
    let row = match tensor.shape() {
        [] | [_] => 1,
        [_, rest @ ..] => rest.iter().product::<usize>().max(1),
    };
    Some(
        values
            .chunks(row)
            .map(|r| {
                r.iter()
                    .enumerate()
                    .fold((0, f32::NEG_INFINITY), |best, (i, &v)| if v > best.1 { (i, v) } else { best })
                    .0
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use switchyard_runtime::tensor::{DataType, TensorData};

    fn probs(rows: &[[f32; 3]]) -> Tensor {
        let bytes: Vec<u8> = rows.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
        Tensor::new(DataType::F32, vec![rows.len(), 3], TensorData::Fixed(Bytes::from(bytes))).unwrap()
    }

    #[test]
    fn agreement_is_the_same_top_class_in_every_row() {
        let a = vec![("p".to_string(), probs(&[[0.1, 0.7, 0.2], [0.5, 0.4, 0.1]]))];
        let same = vec![("p".to_string(), probs(&[[0.0, 0.9, 0.1], [0.8, 0.1, 0.1]]))];
        let other = vec![("p".to_string(), probs(&[[0.0, 0.9, 0.1], [0.1, 0.8, 0.1]]))];
        assert!(agrees(&a, &same, Some("p")));
        assert!(!agrees(&a, &other, Some("p")));
        // Without a confidence output: exact equality of the answer's outputs.
        assert!(agrees(&a, &a, None));
        assert!(!agrees(&a, &same, None));
    }
}
