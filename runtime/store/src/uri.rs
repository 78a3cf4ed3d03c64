//! Where a model repository lives: `s3://bucket/prefix` (any S3-compatible
//! store) or `file:///path` (a local or mounted folder; a plain path means
//! the same).

use std::fmt;
use std::path::PathBuf;

use crate::error::StoreError;

/// A parsed repository location.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StoreUri {
    /// A bucket of an S3-compatible store, optionally under a key prefix.
    S3 {
        /// The bucket name.
        bucket: String,
        /// Key prefix without leading or trailing `/` (empty: the bucket root).
        prefix: String,
    },
    /// A folder on the local file system, read in place (no copy, no cache).
    File {
        /// The folder.
        root: PathBuf,
    },
}

impl StoreUri {
    /// Parses `s3://bucket[/prefix]`, `file:///abs/path` or a plain path.
    /// `field` names the setting in errors.
    pub fn parse(uri: &str, field: &str) -> Result<StoreUri, StoreError> {
        let fail = |reason: &str| StoreError::InvalidConfig { field: field.into(), reason: reason.into() };
        let uri = uri.trim();
        if uri.is_empty() {
            return Err(fail("must not be empty"));
        }
        if let Some(rest) = uri.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            check_bucket(bucket).map_err(|r| fail(&format!("bucket {bucket:?} {r}")))?;
            let prefix = prefix.trim_matches('/');
            if prefix.split('/').any(|part| part == "." || part == "..") || prefix.contains("//") {
                return Err(fail("the key prefix must not contain empty, '.' or '..' parts"));
            }
            return Ok(StoreUri::S3 { bucket: bucket.into(), prefix: prefix.into() });
        }
        if let Some(path) = uri.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(fail("file:// URIs need an absolute path (file:///srv/models)"));
            }
            return Ok(StoreUri::File { root: PathBuf::from(path) });
        }
        if let Some((scheme, _)) = uri.split_once("://") {
            return Err(fail(&format!("scheme {scheme:?} is not supported (use s3:// or file://)")));
        }
        Ok(StoreUri::File { root: PathBuf::from(uri) })
    }

    /// True for an object store (downloads go through the local cache).
    pub fn is_remote(&self) -> bool {
        matches!(self, StoreUri::S3 { .. })
    }
}

/// S3's bucket naming rules, loosely: 3-63 characters of lower-case
/// letters, digits, `.`, `-` (and `_`, which some S3-compatible stores allow).
fn check_bucket(bucket: &str) -> Result<(), &'static str> {
    if !(3..=63).contains(&bucket.len()) {
        return Err("must be 3 to 63 characters long");
    }
    if !bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_')) {
        return Err("may only hold lower-case letters, digits, '.', '-' and '_'");
    }
    Ok(())
}

impl fmt::Display for StoreUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUri::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            StoreUri::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            StoreUri::File { root } => write!(f, "file://{}", root.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_s3_and_files() {
        let uri = StoreUri::parse("s3://models-bucket/team/prod/", "u").unwrap();
        assert_eq!(uri, StoreUri::S3 { bucket: "models-bucket".into(), prefix: "team/prod".into() });
        assert_eq!(uri.to_string(), "s3://models-bucket/team/prod");
        assert!(uri.is_remote());
        let root = StoreUri::parse("s3://bkt", "u").unwrap();
        assert_eq!(root, StoreUri::S3 { bucket: "bkt".into(), prefix: String::new() });
        assert_eq!(StoreUri::parse("file:///srv/m", "u").unwrap(), StoreUri::File { root: "/srv/m".into() });
        assert_eq!(StoreUri::parse("models", "u").unwrap(), StoreUri::File { root: "models".into() });
    }

    #[test]
    fn rejects_mistakes_with_the_field_named() {
        for bad in
            ["", "s3://", "s3://AB", "s3://Upper-Case", "gs://b/p", "file://relative", "s3://bkt/a/../b"]
        {
            let err = StoreUri::parse(bad, "repository.uri").unwrap_err();
            assert!(err.to_string().contains("repository.uri"), "{bad}: {err}");
        }
    }
}
