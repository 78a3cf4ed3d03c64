//! Candidates on a route (`routes[].candidate`): mirrored beside the live
//! answers, compared with them, and (with a plan) promoted step by step or
//! rolled back.
//!
//! Per call of a route with a candidate in force ([`Rollouts::after_call`],
//! from [`super::execute`] once the live answer is made):
//! 1. the live call is counted (calls, errors: the route's error rate);
//! 2. a draw below the step's share picks the call; it is mirrored only
//!    when the candidate has an idle pool and the live model no queue
//!    (otherwise counted as `skipped_busy`) and the gateway's CPU use is
//!    below the candidate's `cpu_ceiling` ([`cpu`]; otherwise
//!    `skipped_cpu`): live traffic is never delayed or shed for a
//!    candidate, and mirrors take spare CPU only;
//! 3. the mirror runs in the background on the same inputs, asking for the
//!    live answer's outputs, and its rows are compared ([`compare`]); the
//!    comparison ([`stats`]) is kept for the whole rollout and for the
//!    step in force.
//!
//! A candidate with `serve = true` is a canary instead ([`canary`]): the
//! step's share of the route's calls is answered by the candidate, and the
//! live models run those inputs in the background for the comparison.
//!
//! The plan's progress ([`Rollouts::evaluate`], called by the gateway's
//! rollout loop, and the admin API's promote / roll back) only changes
//! what this registry wants in force; it takes effect through a config
//! reload, which applies [`Rollouts::overlay`] to the file's config: the
//! step's share, the promoted route (the candidate alone, `fixed` on it),
//! or the rolled-back route (no candidate). The file is not rewritten: a
//! restart starts the plan again from its first step.

pub mod canary;
pub mod compare;
pub mod cost;
pub mod cpu;
pub mod gate;
mod overlay;
pub use overlay::Undo;
pub mod stats;
pub mod store;
pub mod upstream;

use super::calibration::ShadowModels;
use crate::config::candidate_section::{CandidateConfig, CandidateSource};
use gate::{judge, Verdict};
use parking_lot::Mutex;
use serde::Serialize;
use stats::{Comparison, ComparisonView};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use switchyard_runtime::{InferenceRequest, Tensor};

/// Who moved a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// The plan's gate.
    Gate,
    /// An operator, through the admin API.
    Operator,
}

/// Where a rollout stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// The candidate is mirrored at `steps[step]` (a mirror-only candidate
    /// stays here).
    Mirroring,
    /// The candidate serves the route.
    Promoted {
        /// Who promoted it.
        by: Actor,
    },
    /// The candidate is off the route; the file's live models serve it.
    RolledBack {
        /// Who rolled it back.
        by: Actor,
        /// Why (the gate's failures, or the operator's word).
        reasons: Vec<String>,
    },
}

impl Status {
    /// A stable label (`mirroring`, `promoted`, `rolled_back`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Mirroring => "mirroring",
            Status::Promoted { .. } => "promoted",
            Status::RolledBack { .. } => "rolled_back",
        }
    }
}

/// One route's rollout.
struct Record {
    /// The candidate as the file gives it (step 0).
    candidate: CandidateConfig,
    status: Status,
    /// The step this registry wants in force.
    step: usize,
    /// The model that answered the route's last live call: what a canary's
    /// answers are compared with.
    last_live: Option<String>,
    total: Comparison,
    at_step: Comparison,
    events: Vec<Event>,
}

/// One move of a rollout, for its history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub at_unix_s: u64,
    /// The step before the move.
    pub from_step: usize,
    /// What happened (`advanced`, `promoted`, `rolled_back`).
    pub what: &'static str,
    /// Who did it.
    pub by: Actor,
    /// Why, for a rollback.
    pub reasons: Vec<String>,
}

/// A route's rollout as `/admin/stats` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RolloutView {
    /// The route.
    pub route: String,
    /// The candidate model.
    pub candidate: String,
    /// Where the candidate comes from (`file`, `store`, `admin`).
    pub source: CandidateSource,
    /// `canary`: the shares are answered by the candidate; `mirror`: they
    /// are mirrored to it in the background.
    pub mode: &'static str,
    /// Background runs only while the gateway's CPU use is below this share.
    pub cpu_ceiling: f64,
    /// Whether it has a plan (or is mirrored only).
    pub plan: bool,
    /// The plan's shares.
    pub steps: Vec<f64>,
    /// The step wanted in force (index into `steps`).
    pub step: usize,
    /// Its share.
    pub share: f64,
    /// Where it stands.
    #[serde(flatten)]
    pub status: Status,
    /// The gate's verdict on the step so far (`wait`, `hold`, `pass`,
    /// `fail`; `null` once promoted or rolled back, or without a plan).
    pub verdict: Option<&'static str>,
    /// Rows a step needs before it is judged.
    pub min_rows: u64,
    /// The whole rollout's comparison.
    pub comparison: ComparisonView,
    /// The step in force's comparison.
    pub step_comparison: ComparisonView,
    /// Its moves.
    pub events: Vec<Event>,
}

/// A move the rollout loop must apply through a reload.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The route.
    pub route: String,
    /// The candidate.
    pub candidate: String,
    /// The new status.
    pub status: Status,
    /// The step now wanted.
    pub step: usize,
}

/// Why a by-hand move was refused (the admin API answers 404 / 409).
#[derive(Debug, Clone, PartialEq)]
pub enum RefusedMove {
    /// No candidate on that route.
    NoRollout(String),
    /// Already promoted or rolled back.
    Finished(&'static str),
}

/// Every route's rollout.
#[derive(Default)]
pub struct Rollouts {
    records: Mutex<HashMap<String, Record>>,
    /// Candidates posted to the admin API, by route: they replace the
    /// file's on every reload ([`Rollouts::overlay`]).
    posted: Mutex<HashMap<String, CandidateConfig>>,
    /// The upstream registry (built once per process): a candidate that is
    /// an upstream model is mirrored there ([`upstream`]).
    upstreams: std::sync::OnceLock<Arc<crate::upstream::Upstreams>>,
    /// The process's CPU use: background runs wait for spare CPU.
    cpu: cpu::CpuGauge,
}

/// One answered call of a route with a candidate in force.
pub struct CallOutcome<'a> {
    /// The route.
    pub route: &'a str,
    /// Its candidate in force.
    pub candidate: &'a CandidateConfig,
    /// The live answer's model and outputs; `None` when the call failed.
    pub answer: Option<(&'a str, &'a [(String, Tensor)])>,
    /// Whether the live model is a text model (embeddings compare by cosine).
    pub text: bool,
    /// Whether the live model runs in this process (its pools are asked
    /// for idle capacity; an upstream's are not).
    pub live_local: bool,
    /// How long the live call took.
    pub live_latency: Duration,
    /// The compute cost of the live answer and of one candidate run
    /// ([`cost::pair_cost`]).
    pub costs: (f64, f64),
    /// The call's inputs (shared buffers).
    pub inputs: &'a [(String, Tensor)],
}

impl Rollouts {
    /// Counts one live call and mirrors it to the candidate when drawn and
    /// there is idle capacity (module docs, steps 1-3). Returns at once.
    ///
    /// A canary's live calls (`serve = true`) are counted with their
    /// latency and cost and not mirrored: its comparisons come from the
    /// calls the candidate answers ([`Rollouts::after_canary`]).
    pub fn after_call<M: ShadowModels>(self: &Arc<Self>, call: CallOutcome<'_>, repo: &Arc<M>) {
        let canary = call.candidate.serve;
        self.with_record(call.route, call.candidate, |r| {
            for c in [&mut r.total, &mut r.at_step] {
                c.live.calls += 1;
                c.live.errors += u64::from(call.answer.is_none());
                if canary && call.answer.is_some() {
                    c.live.latency.add(call.live_latency.as_secs_f64() * 1e6);
                    c.live.cost += call.costs.0;
                }
            }
            if let Some((model, _)) = call.answer {
                if r.last_live.as_deref() != Some(model) {
                    r.last_live = Some(model.to_string());
                }
            }
        });
        let Some((live_model, outputs)) = call.answer else { return };
        if canary || crate::random_draws::next_draw().value() >= call.candidate.share() {
            return;
        }
        let live_busy = call.live_local && !repo.idle(live_model);
        let remote = self.upstream_of(&call.candidate.model);
        let candidate_idle = match &remote {
            Some(upstreams) => upstream::idle(upstreams, &call.candidate.model),
            None => repo.idle(&call.candidate.model),
        };
        if !self.may_run_in_background(call.route, call.candidate, !live_busy && candidate_idle) {
            return;
        }
        let mirror = Mirror {
            route: call.route.to_string(),
            candidate: call.candidate.clone(),
            live: outputs.to_vec(),
            text: call.text,
            live_latency: call.live_latency,
            costs: call.costs,
            request: InferenceRequest {
                inputs: call.inputs.to_vec(),
                outputs: Some(outputs.iter().map(|(n, _)| n.clone()).collect()),
            },
        };
        let (this, repo) = (Arc::clone(self), Arc::clone(repo));
        tokio::spawn(async move { this.mirror(repo.as_ref(), remote, mirror).await });
    }

    /// Whether a background run may start now: `idle` (the pools it needs
    /// have room) and the CPU below the candidate's ceiling; a refusal is
    /// counted as `skipped_busy` or `skipped_cpu`.
    fn may_run_in_background(&self, route: &str, candidate: &CandidateConfig, idle: bool) -> bool {
        let cpu_free = idle && self.cpu.below(candidate.cpu_ceiling);
        if !cpu_free {
            self.with_record(route, candidate, |r| {
                for c in [&mut r.total, &mut r.at_step] {
                    if idle {
                        c.skipped_cpu += 1;
                    } else {
                        c.skipped_busy += 1;
                    }
                }
            });
        }
        cpu_free
    }

    /// The upstream registry, when `candidate` is one of its models.
    fn upstream_of(&self, candidate: &str) -> Option<Arc<crate::upstream::Upstreams>> {
        self.upstreams.get().filter(|u| u.has_model(candidate)).cloned()
    }

    /// Gives the registry the process's upstreams (once, at start-up), so
    /// that upstream models can be candidates.
    pub fn set_upstreams(&self, upstreams: Arc<crate::upstream::Upstreams>) {
        let _ = self.upstreams.set(upstreams);
    }

    async fn mirror<M: ShadowModels>(
        &self,
        repo: &M,
        remote: Option<Arc<crate::upstream::Upstreams>>,
        m: Mirror,
    ) {
        let started = Instant::now();
        let result = match &remote {
            Some(upstreams) => upstream::run(upstreams, &m.candidate.model, m.request).await,
            None => repo.shadow_run(&m.candidate.model, m.request).await.map_err(|e| e.to_string()),
        };
        let took = started.elapsed();
        let agree =
            result.as_ref().ok().map(|out| compare::agreement(&m.live, out, &m.candidate.compare, m.text));
        self.with_record(&m.route, &m.candidate, |r| {
            for c in [&mut r.total, &mut r.at_step] {
                c.candidate.calls += 1;
                c.live.latency.add(m.live_latency.as_secs_f64() * 1e6);
                c.live.cost += m.costs.0;
                match &agree {
                    Some(rows) => {
                        c.candidate.latency.add(took.as_secs_f64() * 1e6);
                        c.candidate.cost += m.costs.1;
                        c.rows += rows.len() as u64;
                        c.agreeing += rows.iter().filter(|a| **a).count() as u64;
                    }
                    None => c.candidate.errors += 1,
                }
            }
        });
        if let Err(e) = result {
            tracing::debug!(route = %m.route, candidate = %m.candidate.model, error = %e, "candidate run failed");
        }
    }

    /// Runs `f` on the route's record, starting a fresh one when the
    /// candidate or its plan changed.
    fn with_record<T>(
        &self,
        route: &str,
        candidate: &CandidateConfig,
        f: impl FnOnce(&mut Record) -> T,
    ) -> T {
        let mut records = self.records.lock();
        let fresh = records.get(route).is_none_or(|r| !r.candidate.same_plan(candidate));
        if fresh {
            records.insert(route.to_string(), Record::new(candidate));
        }
        match records.get_mut(route) {
            Some(record) => f(record),
            // Inserted just above: not reached.
            None => f(&mut Record::new(candidate)),
        }
    }

    /// Judges every plan's step in force; returns the moves to apply (the
    /// records already want them: the caller reloads and logs).
    pub fn evaluate(&self) -> Vec<Transition> {
        let mut moves = Vec::new();
        for (route, r) in self.records.lock().iter_mut() {
            if !r.candidate.plan || r.status != Status::Mirroring {
                continue;
            }
            match judge(&r.at_step, &r.candidate.gate, r.candidate.min_rows) {
                Verdict::Pass => r.advance(Actor::Gate),
                Verdict::Fail(why) => r.roll_back(Actor::Gate, why.iter().map(|f| f.describe()).collect()),
                Verdict::Wait | Verdict::Hold => continue,
            }
            moves.push(r.transition(route));
        }
        moves
    }

    /// Promotes the route's candidate by hand (`promote = true`) or rolls
    /// it back (`false`).
    pub fn by_hand(&self, route: &str, promote: bool) -> Result<Transition, RefusedMove> {
        let mut records = self.records.lock();
        let Some(r) = records.get_mut(route) else { return Err(RefusedMove::NoRollout(route.to_string())) };
        if r.status != Status::Mirroring {
            return Err(RefusedMove::Finished(r.status.as_str()));
        }
        if promote {
            r.step = r.candidate.steps.len().saturating_sub(1);
            r.finish(Status::Promoted { by: Actor::Operator }, "promoted", Vec::new());
        } else {
            r.roll_back(Actor::Operator, vec!["rolled back by an operator".to_string()]);
        }
        Ok(r.transition(route))
    }

    /// Every route's rollout, by route name.
    pub fn views(&self) -> Vec<RolloutView> {
        let mut all: Vec<RolloutView> = self.records.lock().iter().map(|(route, r)| r.view(route)).collect();
        all.sort_by(|a, b| a.route.cmp(&b.route));
        all
    }
}

/// One mirrored call, owned (it outlives the request).
struct Mirror {
    route: String,
    candidate: CandidateConfig,
    live: Vec<(String, Tensor)>,
    text: bool,
    live_latency: Duration,
    costs: (f64, f64),
    request: InferenceRequest,
}

impl Record {
    fn new(candidate: &CandidateConfig) -> Record {
        Record {
            candidate: CandidateConfig { step: 0, ..candidate.clone() },
            status: Status::Mirroring,
            step: 0,
            last_live: None,
            total: Comparison::default(),
            at_step: Comparison::default(),
            events: Vec::new(),
        }
    }

    /// The next step; the last (1.0) promotes.
    fn advance(&mut self, by: Actor) {
        let next = self.step + 1;
        if next + 1 >= self.candidate.steps.len() {
            self.step = next.min(self.candidate.steps.len().saturating_sub(1));
            self.finish(Status::Promoted { by }, "promoted", Vec::new());
            return;
        }
        self.push(by, "advanced", Vec::new());
        self.step = next;
        self.at_step = Comparison::default();
    }

    fn roll_back(&mut self, by: Actor, reasons: Vec<String>) {
        self.finish(Status::RolledBack { by, reasons: reasons.clone() }, "rolled_back", reasons);
    }

    fn finish(&mut self, status: Status, what: &'static str, reasons: Vec<String>) {
        let by = match &status {
            Status::Promoted { by } | Status::RolledBack { by, .. } => *by,
            Status::Mirroring => Actor::Gate,
        };
        self.push(by, what, reasons);
        self.status = status;
    }

    fn push(&mut self, by: Actor, what: &'static str, reasons: Vec<String>) {
        let at_unix_s = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.events.push(Event { at_unix_s, from_step: self.step, what, by, reasons });
    }

    fn transition(&self, route: &str) -> Transition {
        Transition {
            route: route.to_string(),
            candidate: self.candidate.model.clone(),
            status: self.status.clone(),
            step: self.step,
        }
    }

    fn view(&self, route: &str) -> RolloutView {
        let verdict = (self.candidate.plan && self.status == Status::Mirroring).then(|| {
            match judge(&self.at_step, &self.candidate.gate, self.candidate.min_rows) {
                Verdict::Wait => "wait",
                Verdict::Hold => "hold",
                Verdict::Pass => "pass",
                Verdict::Fail(_) => "fail",
            }
        });
        RolloutView {
            route: route.to_string(),
            candidate: self.candidate.model.clone(),
            source: self.candidate.source,
            mode: if self.candidate.serve { "canary" } else { "mirror" },
            cpu_ceiling: self.candidate.cpu_ceiling,
            plan: self.candidate.plan,
            steps: self.candidate.steps.clone(),
            step: self.step,
            share: self.candidate.steps.get(self.step).copied().unwrap_or(0.0),
            status: self.status.clone(),
            verdict,
            min_rows: self.candidate.min_rows,
            comparison: self.total.view(),
            step_comparison: self.at_step.view(),
            events: self.events.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
