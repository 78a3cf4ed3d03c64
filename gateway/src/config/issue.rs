//! A problem found in a config file, named by the path of the field it
//! concerns, and [`Issues`], the list every section's `check` adds its
//! problems to. The lowest room of the config module, so that every other
//! file may use it.
//!
//! Checks never stop at the first problem: each section is checked in
//! full and reports all it finds, so an operator sees every mistake of a
//! file at once (only a file serde cannot read at all stops early).

use std::time::Duration;

/// One problem in a config file, with the path of the field it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted field path, e.g. `routes[0].models[1]`.
    pub path: String,
    /// What is wrong and what is expected.
    pub message: String,
}

impl ConfigIssue {
    /// The problem `message` at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> ConfigIssue {
        ConfigIssue { path: path.into(), message: message.into() }
    }
}

impl std::fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The problems found so far, in the order found. Every section's check
/// takes `&mut Issues` and pushes what it finds; reading it as a slice
/// shows them.
#[derive(Debug, Default)]
pub struct Issues(Vec<ConfigIssue>);

impl Issues {
    /// Records the problem `message` at `path`.
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigIssue::new(path, message));
    }

    /// A count of at least 1 (0 is a problem at `path`), or `default` when
    /// left out.
    pub fn positive(&mut self, value: Option<usize>, default: usize, path: impl Into<String>) -> usize {
        match value {
            Some(0) => {
                self.push(path, "must be at least 1");
                default
            }
            Some(v) => v,
            None => default,
        }
    }

    /// A duration of at least 1 ms (0 is a problem at `path`), or
    /// `default_ms` when left out.
    pub fn millis(&mut self, value: Option<u64>, default_ms: u64, path: impl Into<String>) -> Duration {
        if value == Some(0) {
            self.push(path, "must be at least 1 ms");
        }
        Duration::from_millis(value.unwrap_or(default_ms).max(1))
    }

    /// A relative cost (of a model, a pool, an upstream): finite and above
    /// 0, else a problem at `path`. Returned as written.
    pub fn cost(&mut self, value: Option<f64>, path: impl Into<String>) -> Option<f64> {
        if let Some(c) = value.filter(|c| !(c.is_finite() && *c > 0.0)) {
            self.push(path, format!("must be a finite number > 0, got {c}"));
        }
        value
    }

    /// Every problem found, for the caller of [`super::parse`].
    pub fn into_vec(self) -> Vec<ConfigIssue> {
        self.0
    }
}

impl std::ops::Deref for Issues {
    type Target = [ConfigIssue];

    fn deref(&self) -> &[ConfigIssue] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_durations_report_zero_at_their_path() {
        let mut issues = Issues::default();
        assert_eq!(issues.positive(None, 4, "a"), 4);
        assert_eq!(issues.positive(Some(2), 4, "a"), 2);
        assert_eq!(issues.millis(Some(7), 1000, "b"), Duration::from_millis(7));
        assert!(issues.is_empty());
        issues.positive(Some(0), 4, "a");
        issues.millis(Some(0), 1000, "b");
        assert_eq!(issues.cost(Some(0.5), "c"), Some(0.5));
        assert_eq!(issues.cost(Some(-1.0), "c"), Some(-1.0));
        issues.cost(Some(f64::NAN), "c");
        let found: Vec<String> = issues.iter().map(ToString::to_string).collect();
        assert_eq!(
            found,
            [
                "a: must be at least 1",
                "b: must be at least 1 ms",
                "c: must be a finite number > 0, got -1",
                "c: must be a finite number > 0, got NaN"
            ]
        );
    }
}
