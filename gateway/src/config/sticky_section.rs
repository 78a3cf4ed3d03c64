//! A weighted route's `sticky = { header = "x-user-id" }` or
//! `sticky = { tenant = true }`: the route's draw (which model a weighted
//! split sends a call to) comes from a hash of the request header's value
//! or of the caller's tenant instead of a fresh random number, so one
//! client sees one model for as long as the weights stay the same (a
//! rollout's split, an A/B test). Calls without the header (or without a
//! tenant) draw per call, as without `sticky` ([`crate::routing::sticky`]).
//! The same key also decides a canary (a candidate with `serve = true`):
//! one client is answered by the candidate, or not, for a whole step.
//!
//! ```toml
//! [[routes]]
//! policy = { type = "weighted", weights = [{ model = "digits-cheap", weight = 1 }, { model = "digits-heavy", weight = 1 }] }
//! sticky = { header = "x-user-id" }
//! ```

use super::issue::Issues;
use router_policies::PolicyConfig;
use schemars::JsonSchema;
use serde::Deserialize;

/// `sticky = { ... }` as written.
#[derive(Debug, Deserialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawSticky {
    /// The request header whose value keeps a client on one model.
    pub header: Option<String>,
    /// `true`: the caller's tenant (from its API key) keeps it on one model.
    pub tenant: Option<bool>,
}

/// What keeps a client on one model of a weighted split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StickyConfig {
    /// This header's value (a lowercase header name).
    Header(String),
    /// The caller's tenant.
    Tenant,
}

/// Checks a route's `sticky` against its policy and candidate (`path`:
/// the route's; `canary`: its candidate serves a share of its calls).
pub fn check(
    raw: Option<&RawSticky>,
    policy: &PolicyConfig,
    canary: bool,
    path: &str,
    issues: &mut Issues,
) -> Option<StickyConfig> {
    let raw = raw?;
    if !matches!(policy, PolicyConfig::Weighted(_)) && !canary {
        issues.push(
            format!("{path}.sticky"),
            "needs a weighted policy or a candidate with serve = true (what draws a model per call)",
        );
    }
    match (&raw.header, raw.tenant) {
        (Some(name), None | Some(false)) => match http::HeaderName::from_bytes(name.as_bytes()) {
            Ok(h) => Some(StickyConfig::Header(h.as_str().to_string())),
            Err(_) => {
                issues.push(format!("{path}.sticky.header"), format!("{name:?} is not a header name"));
                None
            }
        },
        (None, Some(true)) => Some(StickyConfig::Tenant),
        (Some(_), Some(true)) => {
            issues.push(format!("{path}.sticky"), "give header or tenant = true, not both");
            None
        }
        (None, _) => {
            issues.push(format!("{path}.sticky"), "give header = \"NAME\" or tenant = true");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(text: &str, policy: &PolicyConfig) -> (Option<StickyConfig>, Vec<String>) {
        paths_with(text, policy, false)
    }

    fn paths_with(text: &str, policy: &PolicyConfig, canary: bool) -> (Option<StickyConfig>, Vec<String>) {
        let raw: RawSticky = toml::from_str(text).unwrap();
        let mut issues = Issues::default();
        let out = check(Some(&raw), policy, canary, "routes[1]", &mut issues);
        (out, issues.iter().map(|i| i.path.clone()).collect())
    }

    #[test]
    fn a_header_or_the_tenant_on_a_weighted_route() {
        let weighted: PolicyConfig = toml::from_str::<toml::Value>(
            "type = 'weighted'\nweights = [{ model = 'a', weight = 1 }, { model = 'b', weight = 1 }]",
        )
        .unwrap()
        .try_into()
        .unwrap();
        assert_eq!(
            paths("header = 'X-User'", &weighted),
            (Some(StickyConfig::Header("x-user".into())), vec![])
        );
        assert_eq!(paths("tenant = true", &weighted), (Some(StickyConfig::Tenant), vec![]));
        assert_eq!(paths("header = 'bad header'", &weighted).1, ["routes[1].sticky.header"]);
        assert_eq!(paths("header = 'x'\ntenant = true", &weighted).1, ["routes[1].sticky"]);
        assert_eq!(paths("tenant = false", &weighted).1, ["routes[1].sticky"]);
        let fixed = PolicyConfig::Fixed(router_policies::FixedPolicy { model: "a".into() });
        assert_eq!(paths("tenant = true", &fixed).1, ["routes[1].sticky"]);
        assert_eq!(
            paths_with("tenant = true", &fixed, true),
            (Some(StickyConfig::Tenant), vec![]),
            "a canary"
        );
    }
}
