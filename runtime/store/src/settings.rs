//! What a [`crate::ModelStore`] is opened with: the repository URI, how to
//! reach an S3-compatible store, the local cache, and transfer tuning. The
//! gateway fills these from its `[repository]` section; every field has a
//! default that works against AWS S3 with credentials from the usual AWS
//! places (see [`crate::aws_env`]).

use std::path::PathBuf;
use std::time::Duration;

use crate::uri::StoreUri;

/// Everything needed to open a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// Where the repository is.
    pub uri: StoreUri,
    /// How to reach an S3-compatible store (ignored for `file://`).
    pub s3: S3Settings,
    /// The local disk cache that S3 downloads go into.
    pub cache: DiskCacheSettings,
    /// Download tuning and timeouts.
    pub transfer: TransferSettings,
    /// How downloads are checked (see [`crate::integrity`]).
    pub integrity: IntegritySettings,
}

impl StoreSettings {
    /// Settings for `uri` with every other field at its default and the
    /// cache in `cache_dir`.
    pub fn new(uri: StoreUri, cache_dir: impl Into<PathBuf>) -> StoreSettings {
        StoreSettings {
            uri,
            s3: S3Settings::default(),
            cache: DiskCacheSettings {
                dir: cache_dir.into(),
                max_bytes: DiskCacheSettings::DEFAULT_MAX_BYTES,
            },
            transfer: TransferSettings::default(),
            integrity: IntegritySettings::default(),
        }
    }
}

/// How to reach an S3-compatible store. Fields left `None` come from the
/// AWS environment and profile files, then from AWS S3's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    /// Endpoint URL of an S3-compatible store (`http://minio:9000`); `None`:
    /// `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the profile's
    /// `endpoint_url`, else AWS S3. An `http://` endpoint is allowed
    /// (plain HTTP) because it was asked for.
    pub endpoint: Option<String>,
    /// Region used for signing; `None`: `AWS_REGION`, `AWS_DEFAULT_REGION`,
    /// the profile's `region`, else `us-east-1`.
    pub region: Option<String>,
    /// Path-style addressing (`endpoint/bucket/key`) instead of virtual
    /// hosts (`bucket.endpoint/key`); `None`: path style with a custom
    /// endpoint (MinIO, Ceph, moto), virtual hosts on AWS.
    pub path_style: Option<bool>,
    /// The AWS profile to read from the shared credentials and config
    /// files; `None`: `AWS_PROFILE`, else `default`.
    pub profile: Option<String>,
    /// Send unsigned requests (a public bucket); no credentials are looked up.
    pub anonymous: bool,
}

/// The local disk cache of downloaded model versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskCacheSettings {
    /// The cache folder (created when missing). Several gateways may share
    /// it on one machine: downloads are written under temporary names and
    /// renamed into place.
    pub dir: PathBuf,
    /// Size bound in bytes. When a download would exceed it, the least
    /// recently used versions that no served model holds are deleted. The
    /// versions being served are never deleted, so the bound can be
    /// exceeded (with a warning) when they alone are larger.
    pub max_bytes: u64,
}

impl DiskCacheSettings {
    /// 20 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 20 << 30;
}

/// Download tuning and timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferSettings {
    /// Files larger than this are fetched as parallel ranged GETs of this
    /// size; smaller ones in one GET. Default 8 MiB.
    pub part_bytes: u64,
    /// Ranged GETs in flight per file (and files in flight per version).
    /// Default 8.
    pub concurrency: usize,
    /// TCP connect timeout. Default 3 s.
    pub connect_timeout: Duration,
    /// Timeout of one request, body included (one part of a large file).
    /// Default 60 s.
    pub request_timeout: Duration,
    /// Retries of a failed request (with backoff) before giving up.
    /// Default 2.
    pub max_retries: usize,
    /// Total time spent retrying one request. Default 10 s.
    pub retry_timeout: Duration,
    /// After the store was found unreachable, serve from the cache without
    /// asking the store again for this long (so a dead store does not cost
    /// every model its retries). Default 10 s.
    pub offline_grace: Duration,
}

impl Default for TransferSettings {
    fn default() -> Self {
        TransferSettings {
            part_bytes: 8 << 20,
            concurrency: 8,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(60),
            max_retries: 2,
            retry_timeout: Duration::from_secs(10),
            offline_grace: Duration::from_secs(10),
        }
    }
}

/// How downloaded files are checked. A `<file>.sha256` object beside a
/// file (the output of `sha256sum`, or the bare hex digest) is always
/// checked when present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegritySettings {
    /// Check a plain (single-part) ETag as the MD5 of the content, as S3,
    /// MinIO and Ceph compute it. Turn off for buckets with SSE-KMS or
    /// SSE-C encryption, whose ETags are not MD5s. Default `true`.
    pub verify_etag: bool,
    /// Refuse a file that has neither a checksum object nor a checkable
    /// ETag (multipart uploads have `<md5>-<parts>` ETags). Default
    /// `false`: such a file is accepted after a size check, with a warning.
    pub require_checksum: bool,
}

impl Default for IntegritySettings {
    fn default() -> Self {
        IntegritySettings { verify_etag: true, require_checksum: false }
    }
}
