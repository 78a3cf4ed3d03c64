//! `[repository]`: where model files come from. Without `uri` it is only
//! the folder that `[[models]]` paths start from. With `uri` it is also a
//! model store (`switchyard_store`): a Triton-layout repository
//! (`<model>/config.pbtxt`, `<model>/<version>/model.onnx`) in S3-compatible
//! object storage (`s3://bucket/prefix`) or a local folder (`file://`),
//! whose models are served beside `[[models]]`. Objects are pulled into a
//! local disk cache at start-up and on each reload (see `crate::prepare`).
//!
//! ```toml
//! [repository]
//! uri = "s3://models/prod"
//! endpoint = "http://127.0.0.1:9000"   # MinIO, Ceph, moto; absent: AWS
//! region = "eu-west-1"
//! cache_dir = "/var/cache/switchyard"
//! cache_max_bytes = "20GiB"
//! poll_interval_ms = 30000
//! rollout = "gated"                    # default "immediate"
//! rollout_plan = { steps = [0.05, 0.25, 1.0], min_rows = 200,
//!                  gate = { min_agreement = 0.995, max_p99_ratio = 1.2 } }
//! ```
//!
//! `rollout = "gated"`: a newer version found in the store does not
//! replace the serving one at once; it is mirrored as the candidate of the
//! routes that serve the model and promoted or rolled back by
//! `rollout_plan` (see `crate::prepare::store_gate`).
//!
//! Credentials never appear in the file: they come from the AWS
//! environment variables or the shared credentials file (`profile`), as the
//! AWS tools read them, and are never logged.

use super::candidate_section::{CandidateConfig, RawPlan};
use super::issue::Issues;
use super::schema_default::{some_bool, some_u64};
use super::size::ByteSize;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use switchyard_store::{DiskCacheSettings, LocalVersion, ModelStore, StoreError, StoreSettings, StoreUri};

/// Default folder that relative model paths start from.
pub const DEFAULT_PATH: &str = "models";
/// Default local cache of a store's downloaded versions.
pub const DEFAULT_CACHE_DIR: &str = "model-cache";
/// Default size bound of that cache.
pub const DEFAULT_CACHE_MAX_BYTES: u64 = DiskCacheSettings::DEFAULT_MAX_BYTES;
/// Smallest `part_bytes`.
pub const MIN_PART_BYTES: u64 = 64 << 10;
/// Most ranged GETs in flight per file (`concurrency`).
pub const MAX_CONCURRENCY: usize = 64;

/// `[repository]` as written.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRepository {
    /// Folder that relative model paths start from; default `models`.
    #[schemars(default = "default_path")]
    pub path: Option<String>,
    /// A model store to serve: `s3://bucket[/prefix]` or `file:///abs/path`.
    pub uri: Option<String>,
    /// S3-compatible endpoint URL; absent: `AWS_ENDPOINT_URL_S3`,
    /// `AWS_ENDPOINT_URL`, the profile's `endpoint_url`, else AWS.
    pub endpoint: Option<String>,
    /// Signing region; absent: `AWS_REGION`, `AWS_DEFAULT_REGION`, the
    /// profile's, else `us-east-1`.
    pub region: Option<String>,
    /// Path-style addressing; absent: on with a custom endpoint.
    pub path_style: Option<bool>,
    /// AWS profile for the shared credentials/config files; absent:
    /// `AWS_PROFILE`, else `default`.
    pub profile: Option<String>,
    /// Unsigned requests (a public bucket). Default false.
    #[schemars(default = "some_bool::<false>")]
    pub anonymous: Option<bool>,
    /// Local cache of downloaded versions, relative to the config's
    /// folder; default `model-cache`.
    #[schemars(default = "default_cache_dir")]
    pub cache_dir: Option<String>,
    /// Cache size bound (LRU eviction of unused versions); default 20GiB.
    #[schemars(default = "some_u64::<DEFAULT_CACHE_MAX_BYTES>", extend("minimum" = 1))]
    pub cache_max_bytes: Option<ByteSize>,
    /// How often the store is listed for new or replaced versions (a
    /// change reloads); 0 or absent: only on reload (`POST /admin/reload`).
    pub poll_interval_ms: Option<u64>,
    /// Check single-part ETags as MD5s; default true.
    #[schemars(default = "some_bool::<true>")]
    pub verify_etag: Option<bool>,
    /// Refuse files with neither a `.sha256` object nor a checkable ETag.
    #[schemars(default = "some_bool::<false>")]
    pub require_checksum: Option<bool>,
    /// Files larger than this are fetched in parallel ranges of this size;
    /// default 8MiB.
    #[schemars(extend("minimum" = MIN_PART_BYTES))]
    pub part_bytes: Option<ByteSize>,
    /// Ranged GETs in flight per file; default 8.
    #[schemars(range(min = 1, max = MAX_CONCURRENCY))]
    pub concurrency: Option<usize>,
    /// Create the store models' sessions at start-up; default true.
    #[schemars(default = "some_bool::<true>")]
    pub warmup: Option<bool>,
    /// How a newer version found in the store starts serving: `immediate`
    /// (default: it replaces the serving version on the reload that finds
    /// it) or `gated` (it is mirrored as the candidate of the routes that
    /// serve the model and goes through `rollout_plan`).
    pub rollout: Option<StoreRollout>,
    /// The plan of a gated version (`rollout = "gated"`): a route
    /// candidate's `steps`, `gate`, `min_rows` and `compare`; default
    /// steps `[0.05, 0.25, 1.0]` and the candidate defaults.
    pub rollout_plan: Option<RawPlan>,
}

/// How a newer store version starts serving.
#[derive(Debug, Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum StoreRollout {
    /// It replaces the serving version on the reload that finds it.
    #[default]
    Immediate,
    /// It goes through `rollout_plan` as the candidate of the routes that
    /// serve the model.
    Gated,
}

/// `[repository]`'s model store, checked.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// What the runtime's store is opened with.
    pub settings: StoreSettings,
    /// Listing interval for new versions; `None`: no polling.
    pub poll_interval: Option<Duration>,
    /// Sessions created at start-up rather than on first use.
    pub warmup: bool,
    /// `rollout = "gated"`: the plan's candidate template (no model name);
    /// `None`: new versions replace the serving ones at once.
    pub gated: Option<CandidateConfig>,
    /// What the store gave this config generation; filled by
    /// `crate::prepare::store` (`None` until then).
    pub resolved: Option<Arc<ResolvedStore>>,
}

/// The model store as one config generation uses it.
#[derive(Debug)]
pub struct ResolvedStore {
    /// The open store (shared by the generations that keep its settings,
    /// so polling compares against the previous listing).
    pub store: Arc<ModelStore>,
    /// The served versions; holding them keeps their files in the cache.
    pub versions: Vec<LocalVersion>,
    /// Models (`<model>` or `<model>@<version>`) the store names but that
    /// could not be made local, with why (e.g. not cached while the store
    /// is down); a request for one is answered with the error's status.
    pub unavailable: BTreeMap<String, StoreError>,
    /// Per model: what its `config.pbtxt` asked that is not mapped exactly.
    pub warnings: BTreeMap<String, Vec<String>>,
    /// True when the store was unreachable and the cache answered.
    pub from_cache: bool,
    /// Which version each model serves, and the gated versions mirrored
    /// or refused; carried to the next generation.
    pub gate: GateState,
}

/// The gate's memory of a gated store (`rollout = "gated"`), carried from
/// one generation's resolution to the next (`crate::routing::rollout::store`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateState {
    /// The version each model serves under its own name.
    pub serving: BTreeMap<String, u64>,
    /// Newer versions mirrored as candidates (`<model>@<version>`), by model.
    pub candidates: BTreeMap<String, u64>,
    /// Versions rolled back, by model: never served again.
    pub refused: BTreeMap<String, BTreeSet<u64>>,
}

impl StoreConfig {
    /// Why `model` (a store model) cannot be served, if it is one that
    /// could not be made local.
    pub fn unavailable(&self, model: &str) -> Option<&StoreError> {
        self.resolved.as_ref().and_then(|r| r.unavailable.get(model))
    }

    /// True when the store was unreachable and its models came from the
    /// cache: a name it does not know may still be in the store.
    pub fn offline(&self) -> bool {
        self.resolved.as_ref().is_some_and(|r| r.from_cache)
    }
}

/// The schema's `repository.path` default.
fn default_path() -> Option<&'static str> {
    Some(DEFAULT_PATH)
}

/// The schema's `repository.cache_dir` default.
fn default_cache_dir() -> Option<&'static str> {
    Some(DEFAULT_CACHE_DIR)
}

/// The model store of `raw`, if it names one; problems under `repository.*`.
pub fn check(raw: &RawRepository, base_dir: &Path, issues: &mut Issues) -> Option<StoreConfig> {
    let gated = raw.rollout == Some(StoreRollout::Gated);
    if raw.rollout_plan.is_some() && !gated {
        issues.push("repository.rollout_plan", "a plan needs rollout = \"gated\"");
    }
    let Some(uri_text) = raw.uri.as_deref() else {
        if raw.rollout.is_some() {
            issues.push("repository.rollout", "needs a model store (repository.uri)");
        }
        return None;
    };
    let gated = gated.then(|| {
        super::candidate_section::check_plan(raw.rollout_plan.as_ref(), "repository.rollout_plan", issues)
    });
    let uri = match StoreUri::parse(uri_text, "repository.uri") {
        Ok(uri) => uri,
        Err(e) => {
            issues.push("repository.uri", e.to_string());
            return None;
        }
    };
    let cache_dir = base_dir.join(raw.cache_dir.as_deref().unwrap_or(DEFAULT_CACHE_DIR));
    let mut settings = StoreSettings::new(uri, cache_dir);
    if let Some(endpoint) = &raw.endpoint {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            issues.push("repository.endpoint", "must be an http:// or https:// URL");
        }
        settings.s3.endpoint = Some(endpoint.clone());
    }
    settings.s3.region = raw.region.clone();
    settings.s3.path_style = raw.path_style;
    settings.s3.profile = raw.profile.clone();
    settings.s3.anonymous = raw.anonymous.unwrap_or(false);
    settings.cache.max_bytes = raw.cache_max_bytes.map_or(DEFAULT_CACHE_MAX_BYTES, |b| b.0);
    if settings.cache.max_bytes == 0 {
        issues.push("repository.cache_max_bytes", "must be more than 0");
    }
    settings.integrity.verify_etag = raw.verify_etag.unwrap_or(true);
    settings.integrity.require_checksum = raw.require_checksum.unwrap_or(false);
    if let Some(part) = raw.part_bytes {
        if part.0 < MIN_PART_BYTES {
            issues.push("repository.part_bytes", "must be at least 64KiB");
        }
        settings.transfer.part_bytes = part.0;
    }
    if let Some(n) = raw.concurrency {
        if !(1..=MAX_CONCURRENCY).contains(&n) {
            issues.push("repository.concurrency", "must be between 1 and 64");
        }
        settings.transfer.concurrency = n;
    }
    let poll_interval = raw.poll_interval_ms.filter(|ms| *ms > 0).map(Duration::from_millis);
    if poll_interval.is_some_and(|d| d < Duration::from_millis(100)) {
        issues.push("repository.poll_interval_ms", "must be 0 (off) or at least 100");
    }
    Some(StoreConfig { settings, poll_interval, warmup: raw.warmup.unwrap_or(true), gated, resolved: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigIssue;

    fn checked(raw: RawRepository) -> (Option<StoreConfig>, Vec<ConfigIssue>) {
        let mut issues = Issues::default();
        (super::check(&raw, Path::new("/etc/sy"), &mut issues), issues.into_vec())
    }

    #[test]
    fn no_uri_no_store() {
        let (store, issues) = checked(RawRepository { path: Some("m".into()), ..Default::default() });
        assert!(store.is_none() && issues.is_empty());
    }

    #[test]
    fn s3_settings_and_defaults() {
        let raw = RawRepository {
            uri: Some("s3://models/prod".into()),
            endpoint: Some("http://127.0.0.1:9000".into()),
            region: Some("eu-west-1".into()),
            poll_interval_ms: Some(5000),
            ..Default::default()
        };
        let (store, issues) = checked(raw);
        assert!(issues.is_empty(), "{issues:?}");
        let store = store.unwrap();
        assert_eq!(store.settings.uri, StoreUri::S3 { bucket: "models".into(), prefix: "prod".into() });
        assert_eq!(store.settings.s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(store.settings.cache.dir, Path::new("/etc/sy/model-cache"));
        assert_eq!(store.poll_interval, Some(Duration::from_secs(5)));
        assert!(store.warmup && store.settings.integrity.verify_etag);
    }

    #[test]
    fn mistakes_name_the_field() {
        let (store, issues) = checked(RawRepository { uri: Some("gs://b".into()), ..Default::default() });
        assert!(store.is_none());
        assert_eq!(issues[0].path, "repository.uri", "{issues:?}");
        assert!(issues[0].message.contains("not supported"), "{issues:?}");
        let raw = RawRepository {
            uri: Some("s3://bkt".into()),
            endpoint: Some("127.0.0.1:9000".into()),
            concurrency: Some(0),
            poll_interval_ms: Some(5),
            ..Default::default()
        };
        let paths: Vec<String> = checked(raw).1.into_iter().map(|i| i.path).collect();
        assert_eq!(paths, ["repository.endpoint", "repository.concurrency", "repository.poll_interval_ms"]);
    }

    #[test]
    fn a_gated_rollout_needs_a_store_and_checks_its_plan() {
        let plan: RawPlan = toml::from_str("steps = [0.5, 1.0]\nmin_rows = 20").unwrap();
        let raw = RawRepository {
            uri: Some("s3://bkt".into()),
            rollout: Some(StoreRollout::Gated),
            rollout_plan: Some(plan.clone()),
            ..Default::default()
        };
        let (store, issues) = checked(raw);
        assert!(issues.is_empty(), "{issues:?}");
        let gated = store.unwrap().gated.unwrap();
        assert_eq!((gated.steps, gated.min_rows, gated.plan), (vec![0.5, 1.0], 20, true));
        let (store, _) = checked(RawRepository { uri: Some("s3://bkt".into()), ..Default::default() });
        assert!(store.unwrap().gated.is_none(), "immediate by default");
        let raw = RawRepository { rollout: Some(StoreRollout::Gated), ..Default::default() };
        assert_eq!(checked(raw).1[0].path, "repository.rollout");
        let raw =
            RawRepository { uri: Some("s3://bkt".into()), rollout_plan: Some(plan), ..Default::default() };
        assert_eq!(checked(raw).1[0].path, "repository.rollout_plan");
    }
}
