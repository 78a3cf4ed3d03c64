//! A route's `candidate = { ... }`: a model mirrored beside the route's
//! live answers, compared with them, and (with a plan) promoted step by
//! step or rolled back ([`crate::routing::rollout`]).
//!
//! ```toml
//! [[routes]]
//! name = "digits"
//! models = ["digits-heavy"]
//! # mirror only: 5% of calls also run on the candidate, compared
//! candidate = { model = "digits-heavy-v2", share = 0.05 }
//! # or a plan: mirrored shares, then promotion at 1.0
//! # candidate = { model = "digits-heavy-v2", steps = [0.05, 0.25, 1.0], min_rows = 200,
//! #               gate = { min_agreement = 0.995, max_p99_ratio = 1.2, max_error_ratio = 1.0 } }
//! ```
//!
//! `share` and `steps` exclude each other. Every step but a last `1.0` is a
//! share of the route's calls mirrored to the candidate in the background;
//! reaching `1.0` promotes it (the candidate serves the route). With
//! `serve = true` the shares are a canary instead: that share of the
//! route's calls is *answered* by the candidate (never cached; a failed
//! canary call is answered by the live models), and the live models run
//! the same inputs in the background for the comparison.
//!
//! Background runs (mirrors, and a canary's live comparison runs) happen
//! only while the gateway's CPU use is below `cpu_ceiling` of the CPUs it
//! may use (default 0.85), besides needing an idle pool.

use super::issue::Issues;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashSet;

/// `candidate = { ... }` as written.
#[derive(Debug, Deserialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawCandidate {
    /// The candidate: a `[[models]]` name, an upstream model, or (with a
    /// model store) a store model `<model>` / `<model>@<version>`, with the
    /// route's signature.
    pub model: String,
    /// Share of the route's calls mirrored to it, in `(0, 1]` (no plan:
    /// compared only, never promoted).
    pub share: Option<f64>,
    /// A rollout plan: mirrored shares, increasing, in `(0, 1]`; a last
    /// step of `1.0` promotes the candidate.
    pub steps: Option<Vec<f64>>,
    /// What each step must show before the next one (plans only).
    pub gate: Option<RawGate>,
    /// Compared rows a step needs before its gate is judged; default 200.
    pub min_rows: Option<u64>,
    /// How answers are compared; default `auto` (by output kind).
    pub compare: Option<RawCompare>,
    /// `true`: the shares are a canary (that share of calls answered by
    /// the candidate); default `false` (mirrored only).
    pub serve: Option<bool>,
    /// Background runs only while the gateway's CPU use is below this share
    /// of the CPUs it may use, in `(0, 1]`; default 0.85; `1`: no CPU check.
    pub cpu_ceiling: Option<f64>,
}

/// `gate = { ... }` as written.
#[derive(Debug, Deserialize, JsonSchema, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct RawGate {
    /// Agreement with the live answers the step must show; default 0.995.
    pub min_agreement: Option<f64>,
    /// Largest candidate p99 latency as a multiple of live's; default 1.2.
    pub max_p99_ratio: Option<f64>,
    /// Largest candidate error rate as a multiple of live's; default 1.0.
    pub max_error_ratio: Option<f64>,
}

/// `compare = { ... }` as written.
#[derive(Debug, Deserialize, JsonSchema, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct RawCompare {
    /// `auto` (default), `top_class`, `cosine` or `exact`.
    pub kind: Option<CompareKind>,
    /// Only this output is compared; default every output of the answer.
    pub output: Option<String>,
    /// Cosine similarity at or above which two embedding rows agree;
    /// default 0.99.
    pub min_cosine: Option<f64>,
    /// Largest absolute difference between two numbers that still agree
    /// (`exact`); default 1e-5.
    pub tolerance: Option<f64>,
}

/// How two answers' rows are compared.
#[derive(Debug, Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum CompareKind {
    /// By output kind: FP32 `[rows, dim]` of a text model -> cosine;
    /// other floating `[rows, classes]` -> top class; anything else exact.
    #[default]
    Auto,
    /// The index of each row's largest value.
    TopClass,
    /// Cosine similarity of each row at or above `min_cosine`.
    Cosine,
    /// Every element equal within `tolerance`.
    Exact,
}

/// Checked comparison settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareConfig {
    /// How rows are compared.
    pub kind: CompareKind,
    /// Only this output (`None`: all of the answer's).
    pub output: Option<String>,
    /// Cosine threshold.
    pub min_cosine: f64,
    /// Exact tolerance.
    pub tolerance: f64,
}

/// A checked gate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateConfig {
    /// Agreement the step must show.
    pub min_agreement: f64,
    /// Largest p99 ratio, candidate over live.
    pub max_p99_ratio: f64,
    /// Largest error-rate ratio, candidate over live.
    pub max_error_ratio: f64,
}

impl Default for GateConfig {
    /// 0.995 agreement, p99 at most 1.2x live, errors at most live's.
    fn default() -> Self {
        GateConfig { min_agreement: 0.995, max_p99_ratio: 1.2, max_error_ratio: 1.0 }
    }
}

/// A checked candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateConfig {
    /// The candidate model.
    pub model: String,
    /// Shares: one (`share`) without a plan, the plan's steps with one.
    pub steps: Vec<f64>,
    /// Whether this is a plan (promotes, rolls back) or a mirror only.
    pub plan: bool,
    /// The gate of each step (plans only; mirror-only candidates keep the default).
    pub gate: GateConfig,
    /// Compared rows a step needs before its gate is judged.
    pub min_rows: u64,
    /// How answers are compared.
    pub compare: CompareConfig,
    /// The step in force: 0 as the file gives it; a rollout's progress
    /// moves it through a reload ([`crate::routing::rollout`]).
    pub step: usize,
    /// Where the candidate comes from.
    pub source: CandidateSource,
    /// Whether the shares are a canary: that share of the route's calls is
    /// answered by the candidate ([`crate::routing::rollout`]).
    pub serve: bool,
    /// Background runs happen only while the gateway's CPU use is below
    /// this share of the CPUs it may use ([`crate::routing::rollout::cpu`]).
    pub cpu_ceiling: f64,
}

/// Where a route's candidate comes from: it decides what a finished
/// rollout puts in force ([`crate::routing::rollout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateSource {
    /// The route's `candidate` in the config file.
    #[default]
    File,
    /// A newer version of a store model (`[repository] rollout = "gated"`):
    /// promoted, it replaces the serving version under the model's name.
    Store,
    /// Posted to the admin API (`POST /admin/rollouts/{route}`); it
    /// replaces the file's candidate until the next post or a restart.
    Admin,
}

impl CandidateConfig {
    /// The share of calls mirrored (or, serving, answered) at the step in
    /// force.
    pub fn share(&self) -> f64 {
        self.steps.get(self.step).copied().unwrap_or(0.0)
    }

    /// The same candidate and plan, whatever step is in force.
    pub fn same_plan(&self, other: &CandidateConfig) -> bool {
        CandidateConfig { step: 0, ..self.clone() } == CandidateConfig { step: 0, ..other.clone() }
    }
}

/// Default rows per step.
pub const DEFAULT_MIN_ROWS: u64 = 200;

/// Default CPU ceiling of background runs: below 85% of the gateway's CPUs.
pub const DEFAULT_CPU_CEILING: f64 = 0.85;

/// `[repository] rollout_plan = { ... }` as written: the plan a new model
/// version found in the store goes through (`rollout = "gated"`); a
/// candidate's fields without `model` and `share`.
#[derive(Debug, Deserialize, JsonSchema, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct RawPlan {
    /// Mirrored shares, increasing, then `1.0` (promotion); default
    /// `[0.05, 0.25, 1.0]`.
    pub steps: Option<Vec<f64>>,
    /// What each step must show before the next one.
    pub gate: Option<RawGate>,
    /// Compared rows a step needs before its gate is judged; default 200.
    pub min_rows: Option<u64>,
    /// How answers are compared; default `auto` (by output kind).
    pub compare: Option<RawCompare>,
    /// `true`: the steps are a canary (that share of calls answered by the
    /// new version); default `false` (mirrored only).
    pub serve: Option<bool>,
    /// Background runs only while the gateway's CPU use is below this share
    /// of the CPUs it may use, in `(0, 1]`; default 0.85; `1`: no CPU check.
    pub cpu_ceiling: Option<f64>,
}

/// The store's default plan: 5% mirrored, then 25%, then promotion.
pub const DEFAULT_STORE_STEPS: [f64; 3] = [0.05, 0.25, 1.0];

/// Checks `[repository] rollout_plan` (`path`: its field path) into a
/// candidate template whose `model` is empty: each new store version gets
/// a copy with its name ([`crate::prepare::store_gate`]).
pub fn check_plan(raw: Option<&RawPlan>, path: &str, issues: &mut Issues) -> CandidateConfig {
    let raw = raw.cloned().unwrap_or_default();
    let at = |field: &str| format!("{path}.{field}");
    let steps = raw.steps.clone().unwrap_or_else(|| DEFAULT_STORE_STEPS.to_vec());
    check_steps(&steps, &at("steps"), issues);
    with_plan_fields((String::new(), steps, true, CandidateSource::Store), &raw, &at, issues)
}

/// The candidate of `(model, steps, plan, source)` with the fields a
/// route's candidate and a store plan share (`gate`, `min_rows`,
/// `compare`, `serve`, `cpu_ceiling`) checked from `raw`, each problem at
/// `at(field)`.
fn with_plan_fields(
    (model, steps, plan, source): (String, Vec<f64>, bool, CandidateSource),
    raw: &RawPlan,
    at: &dyn Fn(&str) -> String,
    issues: &mut Issues,
) -> CandidateConfig {
    let gate = check_gate(raw.gate.as_ref(), &at("gate"), issues);
    let min_rows = raw.min_rows.unwrap_or(DEFAULT_MIN_ROWS);
    if min_rows == 0 {
        issues.push(at("min_rows"), "must be at least 1");
    }
    let compare = check_compare(raw.compare.as_ref(), &at("compare"), issues);
    let cpu_ceiling = check_cpu_ceiling(raw.cpu_ceiling, &at("cpu_ceiling"), issues);
    let serve = raw.serve.unwrap_or(false);
    CandidateConfig { model, steps, plan, gate, min_rows, compare, step: 0, source, serve, cpu_ceiling }
}

/// Checks a route's `candidate` (`path`: the route's; `models`: the
/// names a candidate may be, `[[models]]` and the upstreams' models;
/// `route_models`: the route's own).
pub fn check(
    raw: Option<&RawCandidate>,
    models: &HashSet<String>,
    route_models: &[String],
    path: &str,
    issues: &mut Issues,
) -> Option<CandidateConfig> {
    let raw = raw?;
    let at = |field: &str| format!("{path}.candidate.{field}");
    if !models.contains(&raw.model) {
        issues.push(at("model"), format!("no model named {:?} in [[models]] or [[upstreams]]", raw.model));
    } else if route_models.contains(&raw.model) {
        issues.push(at("model"), format!("{:?} already serves this route", raw.model));
    }
    let steps = match (raw.share, &raw.steps) {
        (Some(_), Some(_)) => {
            issues.push(at("share"), "give share (mirror only) or steps (a plan), not both");
            Vec::new()
        }
        (None, None) => {
            issues.push(format!("{path}.candidate"), "needs share (mirror only) or steps (a plan)");
            Vec::new()
        }
        (Some(share), None) => {
            check_share(share, &at("share"), issues);
            vec![share]
        }
        (None, Some(steps)) => {
            check_steps(steps, &at("steps"), issues);
            steps.clone()
        }
    };
    let plan = raw.steps.is_some();
    if !plan && raw.gate.is_some() {
        issues.push(at("gate"), "a gate needs a plan (steps)");
    }
    let fields = RawPlan {
        steps: None,
        gate: raw.gate.clone(),
        min_rows: raw.min_rows,
        compare: raw.compare.clone(),
        serve: raw.serve,
        cpu_ceiling: raw.cpu_ceiling,
    };
    Some(with_plan_fields((raw.model.clone(), steps, plan, CandidateSource::File), &fields, &at, issues))
}

fn check_cpu_ceiling(raw: Option<f64>, path: &str, issues: &mut Issues) -> f64 {
    let ceiling = raw.unwrap_or(DEFAULT_CPU_CEILING);
    if !(ceiling > 0.0 && ceiling <= 1.0) {
        issues.push(path, format!("must be above 0 and at most 1, got {ceiling}"));
    }
    ceiling
}

fn check_share(share: f64, path: &str, issues: &mut Issues) {
    if !(share > 0.0 && share <= 1.0) {
        issues.push(path, format!("must be above 0 and at most 1, got {share}"));
    }
}

fn check_steps(steps: &[f64], path: &str, issues: &mut Issues) {
    if steps.len() < 2 || steps.last() != Some(&1.0) {
        issues.push(path, "a plan needs at least one mirrored share, then 1.0 (promotion) last");
    }
    for (i, &s) in steps.iter().enumerate() {
        check_share(s, &format!("{path}[{i}]"), issues);
        if i > 0 && s <= steps[i - 1] {
            issues.push(format!("{path}[{i}]"), format!("steps must increase: {s} follows {}", steps[i - 1]));
        }
    }
}

fn check_gate(raw: Option<&RawGate>, path: &str, issues: &mut Issues) -> GateConfig {
    let d = GateConfig::default();
    let Some(raw) = raw else { return d };
    let gate = GateConfig {
        min_agreement: raw.min_agreement.unwrap_or(d.min_agreement),
        max_p99_ratio: raw.max_p99_ratio.unwrap_or(d.max_p99_ratio),
        max_error_ratio: raw.max_error_ratio.unwrap_or(d.max_error_ratio),
    };
    if !(gate.min_agreement > 0.0 && gate.min_agreement <= 1.0) {
        issues.push(
            format!("{path}.min_agreement"),
            format!("must be above 0 and at most 1, got {}", gate.min_agreement),
        );
    }
    for (field, value) in [("max_p99_ratio", gate.max_p99_ratio), ("max_error_ratio", gate.max_error_ratio)] {
        if !(value.is_finite() && value > 0.0) {
            issues.push(format!("{path}.{field}"), format!("must be a number above 0, got {value}"));
        }
    }
    gate
}

fn check_compare(raw: Option<&RawCompare>, path: &str, issues: &mut Issues) -> CompareConfig {
    let raw = raw.cloned().unwrap_or_default();
    let compare = CompareConfig {
        kind: raw.kind.unwrap_or_default(),
        output: raw.output,
        min_cosine: raw.min_cosine.unwrap_or(0.99),
        tolerance: raw.tolerance.unwrap_or(1e-5),
    };
    if !(compare.min_cosine >= -1.0 && compare.min_cosine <= 1.0) {
        issues.push(format!("{path}.min_cosine"), format!("must be in [-1, 1], got {}", compare.min_cosine));
    }
    if !(compare.tolerance.is_finite() && compare.tolerance >= 0.0) {
        issues.push(format!("{path}.tolerance"), format!("must be 0 or more, got {}", compare.tolerance));
    }
    compare
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> RawCandidate {
        toml::from_str(text).unwrap()
    }

    fn paths(raw: &RawCandidate) -> Vec<String> {
        let models: HashSet<String> = ["live".to_string(), "cand".to_string()].into();
        let mut issues = Issues::default();
        check(Some(raw), &models, &["live".to_string()], "routes[2]", &mut issues);
        issues.iter().map(|i| i.path.clone()).collect()
    }

    #[test]
    fn a_plan_and_a_share_are_checked_with_field_paths() {
        assert!(paths(&raw("model = 'cand'\nshare = 0.05")).is_empty());
        assert!(paths(&raw("model = 'cand'\nsteps = [0.05, 0.25, 1.0]\ngate = { min_agreement = 0.99 }"))
            .is_empty());
        assert_eq!(
            paths(&raw("model = 'nope'\nshare = 2.0")),
            ["routes[2].candidate.model", "routes[2].candidate.share"]
        );
        assert_eq!(paths(&raw("model = 'live'\nshare = 0.1")), ["routes[2].candidate.model"]);
        assert_eq!(paths(&raw("model = 'cand'\nshare = 0.1\nsteps = [1.0]")), ["routes[2].candidate.share"]);
        assert_eq!(paths(&raw("model = 'cand'")), ["routes[2].candidate"]);
        assert_eq!(
            paths(&raw("model = 'cand'\nsteps = [0.5, 0.25, 0]\nmin_rows = 0")),
            [
                "routes[2].candidate.steps",
                "routes[2].candidate.steps[1]",
                "routes[2].candidate.steps[2]",
                "routes[2].candidate.steps[2]",
                "routes[2].candidate.min_rows"
            ]
        );
        assert_eq!(
            paths(&raw("model = 'cand'\nshare = 0.1\ngate = { max_p99_ratio = -1 }")),
            ["routes[2].candidate.gate", "routes[2].candidate.gate.max_p99_ratio"]
        );
        assert_eq!(
            paths(&raw("model = 'cand'\nshare = 0.1\ncompare = { min_cosine = 2, tolerance = -1 }")),
            ["routes[2].candidate.compare.min_cosine", "routes[2].candidate.compare.tolerance"]
        );
        assert_eq!(paths(&raw("model = 'cand'\nsteps = [1.0]")), ["routes[2].candidate.steps"]);
        assert!(
            toml::from_str::<RawCandidate>("model = 'c'\nshare = 0.1\ncompare = { kind = 'fuzzy' }").is_err()
        );
        assert_eq!(
            paths(&raw("model = 'cand'\nsteps = [0.1, 1.0]\nserve = true\ncpu_ceiling = 0")),
            ["routes[2].candidate.cpu_ceiling"]
        );
        assert_eq!(
            paths(&raw("model = 'cand'\nshare = 0.1\ncpu_ceiling = 1.5")),
            ["routes[2].candidate.cpu_ceiling"]
        );
    }

    #[test]
    fn serving_and_the_cpu_ceiling_default_off_and_to_085() {
        let models: HashSet<String> = ["live".to_string(), "cand".to_string()].into();
        let mut issues = Issues::default();
        let live = ["live".to_string()];
        let c = check(Some(&raw("model = 'cand'\nshare = 0.1")), &models, &live, "r", &mut issues).unwrap();
        assert_eq!((c.serve, c.cpu_ceiling), (false, DEFAULT_CPU_CEILING));
        let text = "model = 'cand'\nsteps = [0.1, 1.0]\nserve = true\ncpu_ceiling = 0.5";
        let c = check(Some(&raw(text)), &models, &live, "r", &mut issues).unwrap();
        assert_eq!((c.serve, c.cpu_ceiling), (true, 0.5));
        assert!(issues.is_empty());
    }

    #[test]
    fn a_store_plan_defaults_and_names_its_fields() {
        let mut issues = Issues::default();
        let plan = check_plan(None, "repository.rollout_plan", &mut issues);
        assert!(issues.is_empty());
        assert_eq!((plan.steps.as_slice(), plan.plan, plan.min_rows), (&DEFAULT_STORE_STEPS[..], true, 200));
        let raw: RawPlan =
            toml::from_str("steps = [0.5]\nmin_rows = 0\ngate = { min_agreement = 2 }").unwrap();
        check_plan(Some(&raw), "repository.rollout_plan", &mut issues);
        let paths: Vec<String> = issues.iter().map(|i| i.path.clone()).collect();
        assert_eq!(
            paths,
            [
                "repository.rollout_plan.steps",
                "repository.rollout_plan.gate.min_agreement",
                "repository.rollout_plan.min_rows"
            ]
        );
        assert!(toml::from_str::<RawPlan>("model = 'x'").is_err(), "a store plan names no model");
    }
}
