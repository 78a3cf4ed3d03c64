//! The model store's errors. Each knows its [`ErrorClass`] (the gateway's
//! HTTP status when a request meets it), a low-cardinality metric label,
//! and whether a retry may succeed. Messages name the store location and
//! never contain credentials.

use std::path::PathBuf;

use switchyard_runtime::error::ErrorClass;
use thiserror::Error;

/// Everything that can go wrong reading a model repository.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    /// The repository URI or a store option is malformed (a configuration
    /// mistake, reported at start-up or reload).
    #[error("invalid model store setting {field}: {reason}")]
    InvalidConfig {
        /// The setting (`repository.uri`, `repository.s3.endpoint`...).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The store refused the credentials (unknown key, bad signature,
    /// expired token) or they lack permission.
    #[error("model store {store} refused the credentials ({source_of}): {reason}")]
    Credentials {
        /// The store (`s3://bucket/prefix`).
        store: String,
        /// Where the credentials came from (`environment`, `profile
        /// 'default' in ~/.aws/credentials`...), never the values.
        source_of: String,
        /// The store's answer.
        reason: String,
    },
    /// The store could not be reached (connection refused, DNS, timeout,
    /// 5xx after retries).
    #[error("model store {store} is unreachable: {reason}")]
    Unreachable {
        /// The store.
        store: String,
        /// What failed.
        reason: String,
    },
    /// The model, version or file is not in the store (nor in the cache
    /// when the store is unreachable).
    #[error("{what} is not in the model store {store}")]
    NotFound {
        /// The store.
        store: String,
        /// What was looked for (`model 'digits' version 3`).
        what: String,
    },
    /// A model that is not in the local cache was needed while the store is
    /// unreachable.
    #[error("model '{model}' version {version} is not cached and the model store is unreachable: {reason}")]
    NotCached {
        /// The model.
        model: String,
        /// The version.
        version: u64,
        /// Why the store could not be asked.
        reason: String,
    },
    /// A downloaded file does not match its ETag or checksum object; it was
    /// discarded (nothing half-written is kept).
    #[error("{key} failed its integrity check ({check}): expected {expected}, got {actual}")]
    Integrity {
        /// The object's key.
        key: String,
        /// `etag md5`, `sha256 object`, `size`.
        check: &'static str,
        /// The expected digest or size.
        expected: String,
        /// What was downloaded.
        actual: String,
    },
    /// The object changed in the store while it was being downloaded
    /// (its ETag no longer matched a ranged read); retrying reads the new one.
    #[error("{key} changed in the store during the download")]
    Changed {
        /// The object's key.
        key: String,
    },
    /// The local cache folder cannot be used (permissions, disk full), or
    /// the pinned models alone exceed its size bound.
    #[error("model cache at {}: {reason}", path.display())]
    Cache {
        /// The folder or file concerned.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// A `config.pbtxt` cannot be parsed or describes a model Switchyard
    /// cannot serve.
    #[error("model '{model}' {file}: {reason}")]
    InvalidModelConfig {
        /// The model (its folder name).
        model: String,
        /// The file (`config.pbtxt`, with `:line:column` when known).
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// A model folder whose name cannot be served: it contains `@`, which
    /// names older versions (`<model>@<version>`). Only that folder is
    /// refused; requests for it get 404 with the reason.
    #[error("model folder '{folder}' is not served: {reason}")]
    RefusedFolder {
        /// The folder's name.
        folder: String,
        /// Why, and what to do.
        reason: String,
    },
    /// Any other answer of the store that the client could not use.
    #[error("model store {store}: {reason}")]
    Backend {
        /// The store.
        store: String,
        /// The client's explanation.
        reason: String,
    },
}

impl StoreError {
    /// The class a request meeting this error gets (the gateway maps it to
    /// a status): an unreachable store, an uncached model, refused
    /// credentials or a corrupt download are 503 (the model cannot be
    /// served now; the message says why); a missing model is 404; a bad
    /// setting or config is a 500 (they stop start-up or a reload before
    /// any request can meet them).
    pub fn class(&self) -> ErrorClass {
        match self {
            StoreError::NotFound { .. } | StoreError::RefusedFolder { .. } => ErrorClass::NotFound,
            StoreError::Credentials { .. }
            | StoreError::Unreachable { .. }
            | StoreError::NotCached { .. }
            | StoreError::Integrity { .. }
            | StoreError::Changed { .. }
            | StoreError::Cache { .. }
            | StoreError::Backend { .. } => ErrorClass::Unavailable,
            StoreError::InvalidConfig { .. } | StoreError::InvalidModelConfig { .. } => ErrorClass::Internal,
        }
    }

    /// A short, fixed label for metrics (`store_unreachable`...).
    pub fn label(&self) -> &'static str {
        match self {
            StoreError::InvalidConfig { .. } => "store_invalid_config",
            StoreError::Credentials { .. } => "store_credentials",
            StoreError::Unreachable { .. } => "store_unreachable",
            StoreError::NotFound { .. } => "store_not_found",
            StoreError::NotCached { .. } => "store_not_cached",
            StoreError::Integrity { .. } => "store_integrity",
            StoreError::Changed { .. } => "store_changed",
            StoreError::Cache { .. } => "store_cache",
            StoreError::InvalidModelConfig { .. } => "store_model_config",
            StoreError::RefusedFolder { .. } => "store_refused_folder",
            StoreError::Backend { .. } => "store_backend",
        }
    }

    /// True when the same call may succeed later without a configuration
    /// change: the store comes back, or an object stops changing.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Unreachable { .. }
                | StoreError::NotCached { .. }
                | StoreError::Changed { .. }
                | StoreError::Backend { .. }
        )
    }

    /// True when the store itself could not be asked (so a cached copy may
    /// stand in for it).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, StoreError::Unreachable { .. })
    }

    /// A cache error for `path`.
    pub(crate) fn cache(path: impl Into<PathBuf>, reason: impl std::fmt::Display) -> StoreError {
        StoreError::Cache { path: path.into(), reason: reason.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_labels_and_retries() {
        let down = StoreError::Unreachable { store: "s3://b/p".into(), reason: "connection refused".into() };
        assert_eq!(down.class(), ErrorClass::Unavailable);
        assert!(down.is_retryable() && down.is_unreachable());
        assert_eq!(down.to_string(), "model store s3://b/p is unreachable: connection refused");
        let missing = StoreError::NotFound { store: "s3://b".into(), what: "model 'm' version 2".into() };
        assert_eq!(missing.class(), ErrorClass::NotFound);
        assert!(!missing.is_retryable());
        let creds = StoreError::Credentials {
            store: "s3://b".into(),
            source_of: "environment".into(),
            reason: "SignatureDoesNotMatch".into(),
        };
        assert_eq!((creds.class(), creds.label()), (ErrorClass::Unavailable, "store_credentials"));
        let bad = StoreError::InvalidConfig { field: "repository.uri".into(), reason: "no bucket".into() };
        assert_eq!(bad.class(), ErrorClass::Internal);
    }
}
