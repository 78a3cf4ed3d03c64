//! One problem found while validating configuration.
//!
//! Validation collects every issue instead of stopping at the first, so an
//! operator fixes a config file in one pass. Paths are relative to the part
//! validated (`policy.weights[1].weight`, `budget_ms.max`); the gateway
//! prefixes them with the route (`routes[2].`).

use thiserror::Error;

/// A config field that is wrong, and why.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct ConfigIssue {
    /// Dotted path of the failing field, e.g. `policy.threshold`.
    pub path: String,
    /// What is wrong and what is expected, for a human.
    pub message: String,
}

impl ConfigIssue {
    /// An issue at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigIssue { path: path.into(), message: message.into() }
    }

    /// The same issue with `prefix.` put in front of its path; used by
    /// callers that embed a validated part in a larger document.
    pub fn prefixed(self, prefix: &str) -> Self {
        ConfigIssue { path: format!("{prefix}.{}", self.path), message: self.message }
    }
}

/// `Ok(())` when `issues` is empty, else `Err(issues)`.
pub(crate) fn into_result(issues: Vec<ConfigIssue>) -> Result<(), Vec<ConfigIssue>> {
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}
