//! A problem found in a config file, named by the path of the field it
//! concerns. Every section's checks report these; the lowest room of the
//! config module, so that every other file may use it.

/// One problem in a config file, with the path of the field it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted field path, e.g. `routes[0].models[1]`.
    pub path: String,
    /// What is wrong and what is expected.
    pub message: String,
}

impl std::fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}
