//! `[fleet_limits]`: tenant request limits held across replicas in the
//! cache's Redis (`[cache] redis`), instead of per process:
//!
//! ```toml
//! [fleet_limits]
//! replicas = 3     # the local share while Redis is unreachable: a limit / 3
//! fail = "open"    # or "closed": refuse (503) while Redis is unreachable
//! ```
//!
//! The Redis connection, its timeouts and its breaker are the L2's: one
//! connection per process, and a dead Redis is skipped by every user at
//! once. What is held fleet-wide, and how, is in [`crate::tenants::fleet`].

use super::issue::Issues;
use schemars::JsonSchema;
use serde::Deserialize;

/// `[fleet_limits]`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawFleetLimits {
    /// Replicas the fleet is expected to run: while Redis is unreachable
    /// each replica enforces this share of each request rate, burst and
    /// daily quota (at least 1 of each).
    #[schemars(range(min = 1))]
    pub replicas: u32,
    /// While Redis is unreachable: `open` (default) admits under the
    /// local share, `closed` refuses limited tenants with 503.
    #[serde(default)]
    pub fail: FailMode,
}

/// What a replica does while the fleet's Redis is unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// Enforce the local share (each limit / `replicas`).
    #[default]
    Open,
    /// Refuse every request a fleet limit applies to (503).
    Closed,
}

impl FailMode {
    /// `open` or `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailMode::Open => "open",
            FailMode::Closed => "closed",
        }
    }
}

/// `[fleet_limits]`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetLimits {
    /// Replicas expected; the local share is a limit / this.
    pub replicas: u32,
    /// Open (local share) or closed while Redis is unreachable.
    pub fail: FailMode,
}

/// Checks `[fleet_limits]` (`has_redis`: `[cache] redis` is set).
pub fn check(raw: Option<&RawFleetLimits>, has_redis: bool, issues: &mut Issues) -> Option<FleetLimits> {
    let raw = raw?;
    if raw.replicas == 0 {
        issues.push("fleet_limits.replicas", "must be at least 1 (the replicas the fleet runs)");
    }
    if !has_redis {
        issues.push(
            "fleet_limits",
            "needs [cache] redis: the fleet's limits are held in the cache's Redis (add `redis = { url = \"...\" }` to [cache])",
        );
    }
    Some(FleetLimits { replicas: raw.replicas.max(1), fail: raw.fail })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleet_limits_need_the_caches_redis_and_a_replica() {
        let raw = RawFleetLimits { replicas: 0, fail: FailMode::Closed };
        let mut issues = Issues::default();
        assert_eq!(
            check(Some(&raw), false, &mut issues),
            Some(FleetLimits { replicas: 1, fail: FailMode::Closed })
        );
        let text = format!("{:?}", issues.into_vec());
        assert!(text.contains("fleet_limits.replicas") && text.contains("needs [cache] redis"), "{text}");
        let mut issues = Issues::default();
        let ok = RawFleetLimits { replicas: 3, fail: FailMode::default() };
        assert_eq!(
            check(Some(&ok), true, &mut issues),
            Some(FleetLimits { replicas: 3, fail: FailMode::Open })
        );
        assert_eq!(check(None, false, &mut issues), None);
        assert!(issues.into_vec().is_empty());
    }
}
