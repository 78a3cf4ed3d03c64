//! A cascade route's `calibrate = { shadow, target }`: online calibration
//! of its threshold ([`crate::routing::calibration`]). The gateway never
//! changes the threshold itself; it suggests one.
//!
//! ```toml
//! [[routes]]
//! policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }
//! calibrate = { shadow = 0.02, target = 0.995 }
//! ```

use super::issue::Issues;
use router_policies::PolicyConfig;
use schemars::JsonSchema;
use serde::Deserialize;

/// `calibrate = { ... }` as written.
#[derive(Debug, Deserialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawCalibrate {
    /// Share of calls whose inputs also run through both models in the
    /// background, in `(0, 1]`.
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 1))]
    pub shadow: f64,
    /// Agreement with the heavy model the suggested threshold must reach;
    /// default 0.995.
    #[schemars(default = "default_target", extend("exclusiveMinimum" = 0, "maximum" = 1))]
    pub target: Option<f64>,
}

/// Default target agreement.
pub const DEFAULT_TARGET: f64 = 0.995;

/// Checked calibration settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CalibrateConfig {
    /// Share of calls shadowed.
    pub shadow: f64,
    /// Target agreement.
    pub target: f64,
}

/// The schema's `routes[].calibrate.target` default.
fn default_target() -> Option<f64> {
    Some(DEFAULT_TARGET)
}

/// Checks a route's `calibrate` against its policy (`path`: the route's).
pub fn check(
    raw: Option<&RawCalibrate>,
    policy: &PolicyConfig,
    path: &str,
    issues: &mut Issues,
) -> Option<CalibrateConfig> {
    let raw = raw?;
    if policy.as_cascade().is_none() {
        issues.push(
            format!("{path}.calibrate"),
            "needs a cascade policy (it calibrates the cascade's threshold)",
        );
    }
    if !(raw.shadow > 0.0 && raw.shadow <= 1.0) {
        issues.push(
            format!("{path}.calibrate.shadow"),
            format!("must be above 0 and at most 1, got {}", raw.shadow),
        );
    }
    let target = raw.target.unwrap_or(DEFAULT_TARGET);
    if !(target > 0.0 && target <= 1.0) {
        issues
            .push(format!("{path}.calibrate.target"), format!("must be above 0 and at most 1, got {target}"));
    }
    Some(CalibrateConfig { shadow: raw.shadow, target })
}

#[cfg(test)]
mod tests {
    use super::*;
    use router_policies::FixedPolicy;

    #[test]
    fn only_cascades_calibrate_and_values_are_checked() {
        let fixed = PolicyConfig::Fixed(FixedPolicy { model: "m".into() });
        let mut issues = Issues::default();
        let raw = RawCalibrate { shadow: 2.0, target: Some(0.0) };
        let cfg = check(Some(&raw), &fixed, "routes[1]", &mut issues).unwrap();
        let paths: Vec<_> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            ["routes[1].calibrate", "routes[1].calibrate.shadow", "routes[1].calibrate.target"]
        );
        assert_eq!(cfg.shadow, 2.0);
        assert!(check(None, &fixed, "routes[1]", &mut issues).is_none());
        let mut none = Issues::default();
        let ok = RawCalibrate { shadow: 0.02, target: None };
        let cascade: PolicyConfig =
            toml::from_str::<toml::Value>("type = 'cascade'\nconfidence_output = 'p'\nthreshold = 0.8")
                .unwrap()
                .try_into()
                .unwrap();
        assert_eq!(check(Some(&ok), &cascade, "r", &mut none).unwrap().target, DEFAULT_TARGET);
        assert!(none.is_empty(), "{none:?}");
    }
}
