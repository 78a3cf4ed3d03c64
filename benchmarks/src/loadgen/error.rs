//! Error type of the load generator.

use std::path::PathBuf;

/// Everything that can stop a load-generator run before it produces a report.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    /// A command-line argument is invalid or arguments contradict each other.
    #[error("invalid argument: {0}")]
    Args(String),
    /// The target URL cannot be used.
    #[error("invalid URL {url:?}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A dataset file does not have the expected `{"NAME": [[...], ...]}` form.
    #[error("dataset {path}: {reason}")]
    Dataset {
        /// The dataset file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A histogram could not be created or merged.
    #[error("histogram: {0}")]
    Histogram(String),
    /// A worker task failed (panicked or was cancelled).
    #[error("worker task failed: {0}")]
    Join(String),
    /// A network operation outside the measured requests failed.
    #[error("network: {0}")]
    Net(String),
}

/// Result alias used throughout the load generator.
pub type Result<T> = std::result::Result<T, LoadgenError>;
