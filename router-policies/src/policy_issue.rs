//! One problem found while validating a policy's settings (the policy,
//! the route's budget, the estimator): the crate's own issue, which the
//! gateway copies into its `config::ConfigIssue` list.
//!
//! Validation collects every issue instead of stopping at the first, so an
//! operator fixes a config file in one pass. Paths are relative to the part
//! validated (`policy.weights[1].weight`, `budget_ms.max`); the gateway
//! prefixes them with the route (`routes[2].`).

use thiserror::Error;

/// A policy setting that is wrong, and why.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct PolicyIssue {
    /// Dotted path of the failing field, e.g. `policy.threshold`.
    pub path: String,
    /// What is wrong and what is expected, for a human.
    pub message: String,
}

impl PolicyIssue {
    /// An issue at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        PolicyIssue { path: path.into(), message: message.into() }
    }

    /// The same issue with `prefix.` put in front of its path; used by
    /// callers that embed a validated part in a larger document.
    pub fn prefixed(self, prefix: &str) -> Self {
        PolicyIssue { path: format!("{prefix}.{}", self.path), message: self.message }
    }
}

/// `Ok(())` when `issues` is empty, else `Err(issues)`.
pub(crate) fn into_result(issues: Vec<PolicyIssue>) -> Result<(), Vec<PolicyIssue>> {
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}
