//! `[[routes]]`: the names clients call, each backed by one or more
//! models, with its latency budget and routing policy. Its `cache`,
//! `auth`, `draft`, `record`, `calibrate`, `candidate` and `sticky` tables
//! are checked by their own sections.

use super::cache_section::{RawCache, RawRouteCache, RouteCache};
use super::control_section::{RawRouteAuth, RouteAuth};
use super::issue::Issues;
use super::schema_default::some_u64;
use super::upstream_section::UpstreamConfig;
use router_policies::{FixedPolicy, PolicyConfig};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;
use switchyard_runtime::ModelSpec;

/// One `[[routes]]` entry.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    /// Name clients use as the V2 model name.
    pub name: String,
    /// Models behind the route, cheapest first.
    pub models: Vec<String>,
    /// Latency budget.
    #[serde(default)]
    pub budget_ms: RawBudget,
    /// Routing policy; absent = `fixed` on the route's last model.
    pub policy: Option<router_policies::PolicyConfig>,
    /// Response caching for this route; absent = on with default TTLs
    /// (when a `[cache]` section exists).
    pub cache: Option<RawRouteCache>,
    /// Client API keys; absent = open route.
    pub auth: Option<RawRouteAuth>,
    /// Draft-then-final streaming (SSE); see `config::draft_section`.
    pub draft: Option<super::draft_section::RawDraft>,
    /// A traffic sample for replay; see `config::record_section`.
    pub record: Option<super::record_section::RawRecord>,
    /// Online cascade calibration; see `config::calibrate_section`.
    pub calibrate: Option<super::calibrate_section::RawCalibrate>,
    /// A candidate model mirrored, compared and maybe rolled out; see
    /// `config::candidate_section`.
    pub candidate: Option<super::candidate_section::RawCandidate>,
    /// A weighted split kept per client (a header or the tenant); see
    /// `config::sticky_section`.
    pub sticky: Option<super::sticky_section::RawSticky>,
}

/// Default latency budget of a request that names none.
pub const DEFAULT_BUDGET_MS: u64 = 1000;

/// A route's `budget_ms = { default, max }`.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawBudget {
    /// Budget when the request names none, default 1000 ms.
    #[schemars(default = "some_u64::<DEFAULT_BUDGET_MS>", range(min = 1))]
    pub default: Option<u64>,
    /// Largest budget a request may ask for, default 10x default.
    #[schemars(range(min = 1))]
    pub max: Option<u64>,
}

/// A route: a name clients address as a V2 model.
#[derive(Debug, Clone)]
pub struct RouteConfig {
    /// The name in `/v2/models/{name}/infer`.
    pub name: String,
    /// Models behind it, cheapest first; all share one signature.
    pub models: Vec<String>,
    /// Budget used when the request names none.
    pub default_budget: Duration,
    /// Largest budget a request may ask for.
    pub max_budget: Duration,
    /// The routing policy (default: `fixed` on the last model).
    pub policy: PolicyConfig,
    /// What, besides the request, decides this route's answers: the policy
    /// settings and the identity (size, modification time) of each model
    /// file when the config was loaded. Part of every cache key, so a
    /// changed threshold or a replaced model file never serves old entries.
    pub fingerprint: String,
    /// Response caching for this route.
    pub cache: RouteCache,
    /// Client API keys; `None` = open route.
    pub auth: Option<RouteAuth>,
    /// How streamed (SSE) infer calls are answered.
    pub draft: super::draft_section::DraftConfig,
    /// The route's traffic sample; `None` = not recorded.
    pub record: Option<super::record_section::RecordConfig>,
    /// Online calibration of a cascade's threshold; `None` = off.
    pub calibrate: Option<super::calibrate_section::CalibrateConfig>,
    /// A candidate mirrored beside the live answers (and its rollout
    /// plan); `None` = none.
    pub candidate: Option<super::candidate_section::CandidateConfig>,
    /// What keeps a client on one model of a weighted split; `None` = a
    /// fresh draw per call.
    pub sticky: Option<super::sticky_section::StickyConfig>,
}

/// Checks every `[[routes]]` entry against the model names routes (and
/// their candidates) may list (`names`: `[[models]]` and the upstreams'
/// models) and the `[cache]` section; one checked route per entry, in
/// config order.
pub fn check(
    raw: &[RawRoute],
    cache: Option<&RawCache>,
    names: &HashSet<String>,
    issues: &mut Issues,
) -> Vec<RouteConfig> {
    let mut routes: Vec<RouteConfig> = Vec::new();
    for (i, route) in raw.iter().enumerate() {
        let path = format!("routes[{i}]");
        super::cache_section::check_fleet_coalescing(cache, route.cache.as_ref(), &path, issues);
        let mut r = route_config(route, names, &path, issues);
        r.candidate =
            super::candidate_section::check(route.candidate.as_ref(), names, &route.models, &path, issues);
        if names.contains(&r.name) && !(r.models.len() == 1 && r.models[0] == r.name) {
            issues.push(format!("{path}.name"), format!("{:?} is already a model name", r.name));
        }
        if routes.iter().any(|o| o.name == r.name) {
            issues.push(format!("{path}.name"), format!("duplicate route name {:?}", r.name));
        }
        routes.push(r);
    }
    routes
}

fn route_config(raw: &RawRoute, models: &HashSet<String>, path: &str, issues: &mut Issues) -> RouteConfig {
    if raw.name.is_empty() || raw.name.contains('/') {
        issues.push(format!("{path}.name"), "must be non-empty and contain no '/'");
    }
    if raw.models.is_empty() {
        issues.push(format!("{path}.models"), "a route needs at least one model");
    }
    for (j, m) in raw.models.iter().enumerate() {
        if !models.contains(m) {
            issues.push(format!("{path}.models[{j}]"), format!("no model named {m:?} in [[models]]"));
        }
    }
    let default_ms = raw.budget_ms.default.unwrap_or(DEFAULT_BUDGET_MS);
    let max_ms = raw.budget_ms.max.unwrap_or(default_ms.saturating_mul(10));
    if default_ms == 0 {
        issues.push(format!("{path}.budget_ms.default"), "must be at least 1 ms");
    }
    if max_ms < default_ms {
        issues.push(format!("{path}.budget_ms.max"), format!("{max_ms} is below the default {default_ms}"));
    }
    let policy = route_policy(raw, path, issues);
    let draft = super::draft_section::check(raw.draft.as_ref(), &policy, &raw.models, path, issues);
    let calibrate = super::calibrate_section::check(raw.calibrate.as_ref(), &policy, path, issues);
    let policy_for_sticky = policy.clone();
    RouteConfig {
        name: raw.name.clone(),
        models: raw.models.clone(),
        default_budget: Duration::from_millis(default_ms),
        max_budget: Duration::from_millis(max_ms),
        policy,
        fingerprint: String::new(),
        cache: super::cache_section::check_route(raw.cache.as_ref(), path, issues),
        auth: super::control_section::check_route_auth(raw.auth.as_ref(), path, issues),
        draft,
        record: super::record_section::check(raw.record.as_ref(), path, issues),
        calibrate,
        candidate: None,
        sticky: super::sticky_section::check(
            raw.sticky.as_ref(),
            &policy_for_sticky,
            raw.candidate.as_ref().and_then(|c| c.serve).unwrap_or(false),
            path,
            issues,
        ),
    }
}

/// Fills [`RouteConfig::fingerprint`]: the policy's settings, then each
/// model's version and file identity, and a text model's tokenizer file
/// identity and length settings (a file that cannot be read yet gets a
/// placeholder; the repository reports the real problem); then the
/// identity of each upstream model (upstream, remote name and version), so
/// that pointing a model at another upstream never serves cached answers
/// of the old one.
pub fn with_fingerprint(
    mut route: RouteConfig,
    models: &[ModelSpec],
    upstreams: &[UpstreamConfig],
) -> RouteConfig {
    use std::fmt::Write;
    let mut text = format!("{:?}", route.policy);
    // A stream's final may be the draft of a non-cascade route's own pair.
    if let (None, Some(pair)) = (route.policy.as_cascade(), &route.draft.pair) {
        let _ = write!(text, "|draft:{pair:?}");
    }
    for name in &route.models {
        let Some(spec) = models.iter().find(|m| &m.name == name) else { continue };
        let identity = |path: &Path| {
            std::fs::metadata(path).ok().map(|m| {
                let modified = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
                (m.len(), modified.map_or(0, |d| d.as_nanos()))
            })
        };
        let _ = write!(text, "|{}@{}:{:?}", spec.name, spec.version, identity(&spec.path));
        if let Some(t) = &spec.text {
            let _ = write!(text, "+tokenizer:{:?}:{}:{}", identity(&t.tokenizer), t.max_length, t.input);
        }
    }
    for name in &route.models {
        if let Some((upstream, model)) = super::upstream_section::find_model(upstreams, name) {
            let version = model.version.as_deref().unwrap_or("");
            let _ = write!(text, "|{}@upstream:{}:{}:{version}", model.name, upstream.name, model.remote);
        }
    }
    route.fingerprint = text;
    route
}

/// The route's policy, checked against its models; absent = `fixed` on
/// the last (most accurate) model, the behaviour before policies existed.
fn route_policy(raw: &RawRoute, path: &str, issues: &mut Issues) -> PolicyConfig {
    let Some(policy) = raw.policy.clone() else {
        let model = raw.models.last().cloned().unwrap_or_default();
        return PolicyConfig::Fixed(FixedPolicy { model });
    };
    if let Err(found) = policy.validate(&raw.models) {
        for issue in found {
            issues.push(format!("{path}.{}", issue.path), issue.message);
        }
    }
    policy
}
