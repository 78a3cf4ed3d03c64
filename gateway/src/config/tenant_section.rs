//! Tenant limits: the top-level `[[tenants]]` (limits a tenant has across
//! every route) and a route's `auth.tenants` (limits a tenant has on that
//! route alone), both the same shape:
//!
//! ```toml
//! [[tenants]]
//! name = "team-a"
//! limits = { requests_per_s = 50, burst = 100, rows_per_s = 2000, concurrent = 8, requests_per_day = 100000 }
//! ```
//!
//! A tenant is the name API keys give (`routes[].auth.keys[].tenant`); a
//! tenant listed here that no key names is a mistake (a typo would leave
//! the real tenant unlimited), and so is a route limit for a tenant none
//! of the route's keys name. What each limit counts, and what a cache hit
//! spends, is in [`crate::tenants`].

use super::issue::Issues;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashSet;
use std::sync::Arc;

/// Highest `requests_per_s` / `rows_per_s` accepted (one cell per
/// microsecond; beyond it a limit is no limit).
pub const MAX_RATE_PER_S: f64 = 1_000_000.0;

/// One `[[tenants]]` entry, or one entry of a route's `auth.tenants`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTenant {
    /// The tenant, as the API keys name it (`auth.keys[].tenant`).
    pub name: String,
    /// Its limits; absent = none (the tenant still gets its own label in
    /// the metrics).
    #[serde(default)]
    pub limits: RawTenantLimits,
    /// Its weight in a route's fair share while the route is overloaded
    /// (the Tenants and limits page), default 1; a route's `auth.tenants`
    /// weight wins on that route.
    #[schemars(range(min = 1))]
    pub weight: Option<u32>,
    /// Its requests' priority class when they ask for none (V2 `priority`
    /// 0 or absent, no `x-priority`): 1 (highest) to 4, default 2 (the
    /// Tenants and limits page, "Priority classes and deadline order"). A
    /// route's `auth.tenants` entry that sets `priority` or `max_priority`
    /// wins on that route.
    #[schemars(range(min = 1, max = 4))]
    pub priority: Option<u8>,
    /// The highest class (smallest number) its requests may ask for; a
    /// higher ask gets this class. Default 1 (any class).
    #[schemars(range(min = 1, max = 4))]
    pub max_priority: Option<u8>,
}

/// A tenant's `limits = { ... }`; each absent limit is not enforced.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTenantLimits {
    /// Requests per second, sustained (GCRA); cache hits count.
    pub requests_per_s: Option<f64>,
    /// Requests that may arrive at once above the rate, default one
    /// second's worth (at least 1).
    #[schemars(range(min = 1))]
    pub burst: Option<u32>,
    /// Rows per second the models compute for the tenant (cache hits do
    /// not count).
    pub rows_per_s: Option<f64>,
    /// Rows that may be computed at once above the rate, default one
    /// second's worth; a request with more rows than this is refused (413).
    #[schemars(range(min = 1))]
    pub rows_burst: Option<u32>,
    /// Requests computing at once (cache hits do not count).
    #[schemars(range(min = 1))]
    pub concurrent: Option<u32>,
    /// Requests per UTC day; cache hits count. Resets at 00:00 UTC.
    #[schemars(range(min = 1))]
    pub requests_per_day: Option<u64>,
}

/// A rate with a burst, checked: `per_s` finite in (0, [`MAX_RATE_PER_S`]],
/// `burst` at least 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Cells per second, sustained.
    pub per_s: f64,
    /// Cells allowed at once.
    pub burst: u32,
}

/// One tenant's limits, checked; `None` = not enforced.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TenantLimits {
    /// Requests per second (every admitted call, hits included).
    pub requests: Option<Rate>,
    /// Rows per second (rows the models compute).
    pub rows: Option<Rate>,
    /// Requests computing at once.
    pub concurrent: Option<u32>,
    /// Requests per UTC day (hits included).
    pub requests_per_day: Option<u64>,
}

impl TenantLimits {
    /// True when no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == TenantLimits::default()
    }
}

/// A tenant and its limits, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantConfig {
    /// The tenant's name.
    pub name: Arc<str>,
    /// Its limits.
    pub limits: TenantLimits,
    /// Its fair-share weight, when given (default 1).
    pub weight: Option<u32>,
    /// The class of its requests that ask for none (1..=4).
    pub priority: Option<u8>,
    /// The highest class its requests may ask for (1..=4).
    pub max_priority: Option<u8>,
}

/// Checks a list of tenants (`[[tenants]]` at `path` = `tenants`, or a
/// route's `auth.tenants`); each name must be in `known` (the tenants the
/// keys name) and listed once.
pub fn check(raw: &[RawTenant], known: &HashSet<&str>, path: &str, issues: &mut Issues) -> Vec<TenantConfig> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, tenant) in raw.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if tenant.name.is_empty() {
            issues.push(format!("{at}.name"), "must not be empty");
        } else if !known.contains(tenant.name.as_str()) {
            issues.push(
                format!("{at}.name"),
                format!(
                    "no API key names tenant {:?} here (auth.keys[].tenant); a misspelt tenant would go unlimited",
                    tenant.name
                ),
            );
        }
        if !seen.insert(tenant.name.as_str()) {
            issues.push(format!("{at}.name"), format!("tenant {:?} is listed twice", tenant.name));
        }
        let limits = check_limits(&tenant.limits, &format!("{at}.limits"), issues);
        if tenant.weight == Some(0) {
            issues.push(format!("{at}.weight"), "must be at least 1");
        }
        let weight = tenant.weight.filter(|&w| w > 0);
        let (priority, max_priority) = check_priority(tenant, &at, issues);
        out.push(TenantConfig {
            name: Arc::from(tenant.name.as_str()),
            limits,
            weight,
            priority,
            max_priority,
        });
    }
    out
}

/// Checks a tenant's `priority` and `max_priority` (each 1 to
/// [`switchyard_runtime::PRIORITY_LEVELS`]; the default no higher than
/// the bound) at `at`.
fn check_priority(tenant: &RawTenant, at: &str, issues: &mut Issues) -> (Option<u8>, Option<u8>) {
    let levels = switchyard_runtime::PRIORITY_LEVELS;
    let mut in_range = |value: Option<u8>, field: &str| match value {
        Some(v) if !(1..=levels).contains(&v) => {
            issues.push(format!("{at}.{field}"), format!("must be 1 (highest) to {levels}, got {v}"));
            None
        }
        v => v,
    };
    let priority = in_range(tenant.priority, "priority");
    let max_priority = in_range(tenant.max_priority, "max_priority");
    if let (Some(p), Some(m)) = (priority, max_priority) {
        if p < m {
            issues.push(
                format!("{at}.priority"),
                format!("class {p} is higher than the tenant's max_priority {m}"),
            );
        }
    }
    (priority, max_priority)
}

/// Checks one `limits = { ... }` at `path`.
pub fn check_limits(raw: &RawTenantLimits, path: &str, issues: &mut Issues) -> TenantLimits {
    let requests = rate(raw.requests_per_s, raw.burst, path, ("requests_per_s", "burst"), issues);
    let rows = rate(raw.rows_per_s, raw.rows_burst, path, ("rows_per_s", "rows_burst"), issues);
    if raw.concurrent == Some(0) {
        issues.push(format!("{path}.concurrent"), "must be at least 1 (or leave it out: no limit)");
    }
    if raw.requests_per_day == Some(0) {
        issues.push(format!("{path}.requests_per_day"), "must be at least 1 (or leave it out: no limit)");
    }
    TenantLimits {
        requests,
        rows,
        concurrent: raw.concurrent.filter(|&c| c > 0),
        requests_per_day: raw.requests_per_day.filter(|&q| q > 0),
    }
}

/// A rate and its burst (`names` = the two fields' names).
fn rate(
    per_s: Option<f64>,
    burst: Option<u32>,
    path: &str,
    names: (&str, &str),
    issues: &mut Issues,
) -> Option<Rate> {
    let (rate_name, burst_name) = names;
    if burst == Some(0) {
        issues.push(format!("{path}.{burst_name}"), "must be at least 1");
    }
    let Some(per_s) = per_s else {
        if burst.is_some() {
            issues.push(
                format!("{path}.{burst_name}"),
                format!("set {rate_name} too: a burst is above a rate"),
            );
        }
        return None;
    };
    if !(per_s.is_finite() && per_s > 0.0 && per_s <= MAX_RATE_PER_S) {
        issues.push(
            format!("{path}.{rate_name}"),
            format!("must be a number in (0, {MAX_RATE_PER_S}], got {per_s}"),
        );
        return None;
    }
    // One second's worth by default; `as` saturates, and the rate is at most 1e6.
    let default = (per_s.ceil() as u32).max(1);
    Some(Rate { per_s, burst: burst.filter(|&b| b > 0).unwrap_or(default) })
}

#[cfg(test)]
mod tests {
    use crate::config::{parse, ConfigIssue};
    use std::path::Path;

    const ROUTE: &str = "[[models]]\nname = \"m\"\npath = \"m.onnx\"\n[[routes]]\nname = \"r\"\nmodels = [\"m\"]\n\
        auth = { keys = [{ key = \"aaaaaaaaaaaaaaaa1\", tenant = \"a\" }, { key = \"bbbbbbbbbbbbbbbb2\", tenant = \"b\" }] \
        , tenants = [{ name = \"b\", limits = { concurrent = 2 } }] }\n";

    fn issues(text: &str) -> Vec<ConfigIssue> {
        parse(text, Path::new("/")).err().unwrap_or_default()
    }

    #[test]
    fn limits_are_read_with_their_defaults() {
        let text = format!(
            "{ROUTE}[[tenants]]\nname = \"a\"\nlimits = {{ requests_per_s = 2.5, rows_per_s = 100, rows_burst = 400, requests_per_day = 9 }}\n"
        );
        let config = parse(&text, Path::new("/")).unwrap_or_else(|e| panic!("{e:?}"));
        let a = &config.tenants[0];
        assert_eq!(&*a.name, "a");
        assert_eq!(
            a.limits.requests,
            Some(super::Rate { per_s: 2.5, burst: 3 }),
            "burst: one second's worth"
        );
        assert_eq!(a.limits.rows, Some(super::Rate { per_s: 100.0, burst: 400 }));
        assert_eq!(a.limits.concurrent, None);
        assert_eq!(a.limits.requests_per_day, Some(9));
        let route = config.route("r").and_then(|r| r.auth.clone()).unwrap_or_else(|| panic!("auth"));
        assert_eq!(route.tenants[0].limits.concurrent, Some(2));
    }

    #[test]
    fn mistakes_name_their_field() {
        let cases = [
            ("[[tenants]]\nname = \"c\"\n", "tenants[0].name"),
            ("[[tenants]]\nname = \"a\"\n[[tenants]]\nname = \"a\"\n", "tenants[1].name"),
            (
                "[[tenants]]\nname = \"a\"\nlimits = { requests_per_s = 0 }\n",
                "tenants[0].limits.requests_per_s",
            ),
            (
                "[[tenants]]\nname = \"a\"\nlimits = { requests_per_s = -1.0 }\n",
                "tenants[0].limits.requests_per_s",
            ),
            ("[[tenants]]\nname = \"a\"\nlimits = { burst = 5 }\n", "tenants[0].limits.burst"),
            (
                "[[tenants]]\nname = \"a\"\nlimits = { rows_per_s = 5, rows_burst = 0 }\n",
                "tenants[0].limits.rows_burst",
            ),
            ("[[tenants]]\nname = \"a\"\nlimits = { concurrent = 0 }\n", "tenants[0].limits.concurrent"),
            (
                "[[tenants]]\nname = \"a\"\nlimits = { requests_per_day = 0 }\n",
                "tenants[0].limits.requests_per_day",
            ),
            ("[[tenants]]\nname = \"a\"\nweight = 0\n", "tenants[0].weight"),
            ("[[tenants]]\nname = \"a\"\npriority = 5\n", "tenants[0].priority"),
            ("[[tenants]]\nname = \"a\"\nmax_priority = 0\n", "tenants[0].max_priority"),
            ("[[tenants]]\nname = \"a\"\npriority = 1\nmax_priority = 2\n", "tenants[0].priority"),
            (
                "[[tenants]]\nname = \"a\"\nlimits = { request_per_s = 1 }\n",
                "tenants[0].limits.request_per_s",
            ),
        ];
        for (extra, path) in cases {
            let found = issues(&format!("{ROUTE}{extra}"));
            assert!(found.iter().any(|i| i.path == path), "{extra}: {found:?}");
        }
        let other_route = ROUTE.replace("name = \"b\", limits", "name = \"c\", limits");
        let found = issues(&other_route);
        assert!(found.iter().any(|i| i.path == "routes[0].auth.tenants[0].name"), "{found:?}");
    }
}
