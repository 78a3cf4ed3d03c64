//! A route's `draft = { ... }`: how streamed (SSE) infer calls are answered
//! (see [`crate::stream`] for what happens at run time); problems carry
//! field paths like every other config error.
//!
//! Where the cheap/heavy pair and the confidence come from:
//! - a route whose policy is `cascade`: from the policy (`cheap`, `heavy`,
//!   `confidence_output`, `threshold`); naming them again under `draft` is
//!   an error, so there is one source of truth;
//! - a route with another policy: from `draft` itself; `cheap` defaults to
//!   the route's first model and `heavy` to its last. Without
//!   `confidence_output`/`threshold` no draft is ever confident, so the
//!   heavy model always gives the final. Such a route streams draft-then-
//!   final only when it has a `draft` table (opt-in); without one, and on
//!   one-model routes or models addressed directly, a stream carries one
//!   `final` event from the route's own policy.
//! - `mode = "off"`: streams carry one `final` event from the policy.

use super::issue::Issues;
use super::one_of::OneOf;
use router_policies::{CascadePolicy, PolicyConfig};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// Default interval of the SSE comment heartbeat.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);

/// Default mode of a route's streams.
pub const DEFAULT_MODE: DraftMode = DraftMode::Parallel;

/// A route's `draft = { ... }` as written.
#[derive(Debug, Deserialize, JsonSchema, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawDraft {
    /// `parallel` (default), `sequential` or `off`.
    #[schemars(default = "default_mode")]
    pub mode: Option<OneOf<DraftMode>>,
    /// Milliseconds of silence after which a `: keep-alive` comment is
    /// sent; default 15000.
    #[schemars(default = "default_heartbeat_ms", range(min = 1))]
    pub heartbeat_ms: Option<u64>,
    /// Parallel mode runs sequentially when the heavy pool already holds
    /// this many queued requests; default: one full batch per worker.
    #[schemars(range(min = 1))]
    pub parallel_queue_limit: Option<usize>,
    /// Cheap model (non-cascade routes); default the route's first model.
    pub cheap: Option<String>,
    /// Heavy model (non-cascade routes); default the route's last model.
    pub heavy: Option<String>,
    /// Output holding the cheap model's confidence (non-cascade routes).
    pub confidence_output: Option<String>,
    /// Confidence in `[0, 1]` at which the draft is final (non-cascade routes).
    #[schemars(range(min = 0, max = 1))]
    pub threshold: Option<f32>,
}

/// How a route with a cheap/heavy pair runs the heavy model for a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DraftMode {
    /// Queue the heavy model together with the cheap one: the draft never
    /// delays the final; a confident draft cancels a heavy run that has
    /// not started.
    Parallel,
    /// Run the heavy model only after an unconfident draft: saves compute.
    Sequential,
    /// No drafts: a stream carries one `final` event.
    Off,
}

impl DraftMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DraftMode::Parallel => "parallel",
            DraftMode::Sequential => "sequential",
            DraftMode::Off => "off",
        }
    }
}

/// The schema's `routes[].draft.mode` default.
fn default_mode() -> Option<&'static str> {
    Some(DEFAULT_MODE.as_str())
}

/// The schema's `routes[].draft.heartbeat_ms` default.
fn default_heartbeat_ms() -> Option<u128> {
    Some(DEFAULT_HEARTBEAT.as_millis())
}

/// A route's streaming settings, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftConfig {
    /// Parallel, sequential or off.
    pub mode: DraftMode,
    /// Silence after which a heartbeat comment is sent.
    pub heartbeat: Duration,
    /// Heavy-pool queue depth at which parallel runs sequentially; `None`
    /// = the pool's workers times its largest batch.
    pub parallel_queue_limit: Option<usize>,
    /// The cheap/heavy pair and the confidence rule, as a cascade policy
    /// (the route's own, or one built from `draft`); `None` = streams
    /// carry one `final` event.
    pub pair: Option<CascadePolicy>,
}

impl Default for DraftConfig {
    /// Parallel, 15 s heartbeat, no pair (one `final` event).
    fn default() -> Self {
        DraftConfig {
            mode: DEFAULT_MODE,
            heartbeat: DEFAULT_HEARTBEAT,
            parallel_queue_limit: None,
            pair: None,
        }
    }
}

/// Checks a route's `draft` against its policy and models (`path` is the
/// route's, e.g. `routes[0]`).
pub fn check(
    raw: Option<&RawDraft>,
    policy: &PolicyConfig,
    models: &[String],
    path: &str,
    issues: &mut Issues,
) -> DraftConfig {
    let empty = RawDraft::default();
    let given = raw.unwrap_or(&empty);
    let mode = given.mode.as_ref().and_then(|mode| mode.check("mode", format!("{path}.draft.mode"), issues));
    let mode = mode.unwrap_or(DEFAULT_MODE);
    let heartbeat = match given.heartbeat_ms {
        Some(0) => {
            issues.push(format!("{path}.draft.heartbeat_ms"), "must be at least 1 ms");
            DEFAULT_HEARTBEAT
        }
        Some(ms) => Duration::from_millis(ms),
        None => DEFAULT_HEARTBEAT,
    };
    if given.parallel_queue_limit == Some(0) {
        issues.push(format!("{path}.draft.parallel_queue_limit"), "must be at least 1");
    }
    let pair = match policy.as_cascade() {
        Some(cascade) => {
            refuse_pair_fields(given, path, issues);
            Some(cascade.clone())
        }
        None if raw.is_some() => own_pair(given, models, path, issues),
        None => None,
    };
    let pair = if mode == DraftMode::Off { None } else { pair };
    DraftConfig { mode, heartbeat, parallel_queue_limit: given.parallel_queue_limit, pair }
}

/// A cascade route's pair comes from its policy only.
fn refuse_pair_fields(raw: &RawDraft, path: &str, issues: &mut Issues) {
    let given = [
        ("cheap", raw.cheap.is_some()),
        ("heavy", raw.heavy.is_some()),
        ("confidence_output", raw.confidence_output.is_some()),
        ("threshold", raw.threshold.is_some()),
    ];
    for (field, _) in given.iter().filter(|(_, set)| *set) {
        issues.push(
            format!("{path}.draft.{field}"),
            format!("a cascade route takes `{field}` from its policy: set policy.{field} instead"),
        );
    }
}

/// The pair of a route whose policy is not a cascade.
fn own_pair(raw: &RawDraft, models: &[String], path: &str, issues: &mut Issues) -> Option<CascadePolicy> {
    if models.len() < 2 {
        issues
            .push(format!("{path}.draft"), "drafts need a route with at least two models (cheap and heavy)");
        return None;
    }
    let cheap = raw.cheap.clone().or_else(|| models.first().cloned());
    let heavy = raw.heavy.clone().or_else(|| models.last().cloned());
    for (field, name) in [("cheap", &cheap), ("heavy", &heavy)] {
        if let Some(name) = name.as_ref().filter(|n| !models.contains(n)) {
            issues.push(
                format!("{path}.draft.{field}"),
                format!("model {name:?} is not one of the route's models {models:?}"),
            );
        }
    }
    if cheap == heavy {
        issues.push(format!("{path}.draft.heavy"), "must differ from the cheap model");
    }
    let (confidence_output, threshold) = match (&raw.confidence_output, raw.threshold) {
        (Some(output), Some(threshold)) => {
            if !(0.0..=1.0).contains(&threshold) {
                issues.push(
                    format!("{path}.draft.threshold"),
                    format!("must be between 0 and 1, got {threshold}"),
                );
            }
            if output.trim().is_empty() {
                issues.push(format!("{path}.draft.confidence_output"), "must name the cheap model's output");
            }
            (output.clone(), threshold)
        }
        (None, None) => (String::new(), f32::INFINITY),
        (Some(_), None) => {
            issues.push(format!("{path}.draft.threshold"), "missing: give it with confidence_output");
            return None;
        }
        (None, Some(_)) => {
            issues.push(format!("{path}.draft.confidence_output"), "missing: give it with threshold");
            return None;
        }
    };
    Some(CascadePolicy { confidence_output, threshold, cheap, heavy })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigIssue;
    use router_policies::FixedPolicy;

    fn models() -> Vec<String> {
        vec!["a".into(), "b".into(), "c".into()]
    }

    fn cascade() -> PolicyConfig {
        PolicyConfig::Cascade(CascadePolicy {
            confidence_output: "p".into(),
            threshold: 0.8,
            cheap: None,
            heavy: None,
        })
    }

    fn fixed() -> PolicyConfig {
        PolicyConfig::Fixed(FixedPolicy { model: "c".into() })
    }

    fn checked(raw: Option<RawDraft>, policy: &PolicyConfig) -> (DraftConfig, Vec<ConfigIssue>) {
        let mut issues = Issues::default();
        let config = super::check(raw.as_ref(), policy, &models(), "routes[0]", &mut issues);
        (config, issues.into_vec())
    }

    #[test]
    fn cascade_routes_stream_with_their_policy_by_default() {
        let (config, issues) = checked(None, &cascade());
        assert!(issues.is_empty());
        assert_eq!(config.mode, DraftMode::Parallel);
        assert_eq!(config.heartbeat, DEFAULT_HEARTBEAT);
        assert_eq!(config.pair.unwrap().threshold, 0.8);
    }

    #[test]
    fn cascade_routes_refuse_a_second_pair() {
        let raw = RawDraft { threshold: Some(0.5), cheap: Some("a".into()), ..RawDraft::default() };
        let (_, issues) = checked(Some(raw), &cascade());
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["routes[0].draft.cheap", "routes[0].draft.threshold"]);
    }

    #[test]
    fn other_policies_opt_in_with_first_and_last_models() {
        let (config, _) = checked(None, &fixed());
        assert_eq!(config.pair, None);
        let (config, issues) = checked(Some(RawDraft::default()), &fixed());
        assert!(issues.is_empty(), "{issues:?}");
        let pair = config.pair.unwrap();
        assert_eq!((pair.cheap.as_deref(), pair.heavy.as_deref()), (Some("a"), Some("c")));
        assert!(pair.threshold.is_infinite(), "no threshold: never confident");
    }

    #[test]
    fn bad_values_name_their_field() {
        let raw = RawDraft {
            mode: Some("eager".into()),
            heartbeat_ms: Some(0),
            heavy: Some("zz".into()),
            threshold: Some(2.0),
            confidence_output: Some("p".into()),
            ..RawDraft::default()
        };
        let (_, issues) = checked(Some(raw), &fixed());
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "routes[0].draft.mode",
                "routes[0].draft.heartbeat_ms",
                "routes[0].draft.heavy",
                "routes[0].draft.threshold"
            ]
        );
        let raw = RawDraft { threshold: Some(0.5), ..RawDraft::default() };
        let (_, issues) = checked(Some(raw), &fixed());
        assert_eq!(issues[0].path, "routes[0].draft.confidence_output");
    }

    #[test]
    fn off_means_one_final_event() {
        let raw = RawDraft { mode: Some("off".into()), ..RawDraft::default() };
        let (config, issues) = checked(Some(raw), &cascade());
        assert!(issues.is_empty());
        assert_eq!(config.pair, None);
    }
}
