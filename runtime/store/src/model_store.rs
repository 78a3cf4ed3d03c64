//! [`ModelStore`]: a model repository in object storage (or a local
//! folder), with model versions pulled on demand into the disk cache.
//!
//! - [`ModelStore::list`] lists the repository (one recursive LIST) into a
//!   [`RepositoryListing`]; when the store is unreachable it answers from
//!   the cache (`from_cache`), so a restart without network still knows
//!   the cached models (with none cached it fails: an empty repository
//!   would hide that nothing can be served).
//! - [`ModelStore::materialize`] makes one version available as local
//!   files: from the cache when the cached copy matches the store's
//!   listing (or when the store is unreachable), else downloaded.
//!   Concurrent calls for the same version share one download; the
//!   download runs on its own task, so a caller that gives up does not
//!   waste it.
//! - [`ModelStore::poll`] lists again and says what changed since the
//!   previous listing (new, removed or replaced versions).
//!
//! An unreachable store is remembered for
//! [`crate::TransferSettings::offline_grace`]: meanwhile calls go straight
//! to the cache instead of paying the client's retries for every model.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use futures::future::{BoxFuture, FutureExt, Shared};
use parking_lot::Mutex;

use crate::aws_env::AwsEnv;
use crate::backend::{open, Backend};
use crate::disk_cache::{DiskCache, DiskCacheLease};
use crate::error::StoreError;
use crate::listing::{ObjectInfo, RepositoryChange, RepositoryListing, VersionListing};
use crate::object_list::list_objects;
use crate::pull::{fetch_small, pull_version, PullContext};
use crate::settings::StoreSettings;
use crate::stats::{StoreCounters, StoreStats};
use crate::uri::StoreUri;

/// Where a [`LocalVersion`]'s files came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSource {
    /// Read in place from a `file://` repository.
    InPlace,
    /// Downloaded by this call (or by the concurrent call it joined).
    Downloaded,
    /// The cached copy, which matches the store's listing.
    Cached,
    /// The cached copy, served because the store is unreachable.
    CachedOffline,
}

/// A model version available as local files. Holding it keeps the version
/// in the cache (see [`DiskCacheLease`]).
#[derive(Debug, Clone)]
pub struct LocalVersion {
    /// The model.
    pub model: String,
    /// The version.
    pub version: u64,
    /// The version's folder: its files are `dir/<relative path>`.
    pub dir: PathBuf,
    /// Where the files came from.
    pub source: VersionSource,
    /// Keeps the version from being evicted while held.
    pub lease: DiskCacheLease,
}

impl LocalVersion {
    /// The local path of one of the version's files (`model.onnx`).
    pub fn file(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }
}

type Flight = Shared<BoxFuture<'static, Result<(DiskCacheLease, VersionSource), StoreError>>>;

/// A model repository in an object store or a local folder. Share it as
/// `Arc<ModelStore>`.
#[derive(Debug)]
pub struct ModelStore {
    settings: StoreSettings,
    backend: Backend,
    cache: Option<DiskCache>,
    counters: Arc<StoreCounters>,
    flights: Mutex<HashMap<(String, u64), Flight>>,
    offline_until: Mutex<Option<Instant>>,
    last_listing: Mutex<Option<Arc<RepositoryListing>>>,
}

impl ModelStore {
    /// Opens the store described by `settings`, with credentials found in
    /// `env` (see [`crate::aws_env`]), and its cache folder. Sends no
    /// request: the first [`Self::list`] shows whether the store and the
    /// credentials work. Blocking (indexes the cache folder).
    pub fn open(settings: StoreSettings, env: &AwsEnv) -> Result<Arc<ModelStore>, StoreError> {
        let backend = open(&settings, env)?;
        let cache = match &settings.uri {
            StoreUri::File { .. } => None,
            StoreUri::S3 { .. } => {
                let id = format!("{}|{:?}", settings.uri, settings.s3.endpoint);
                Some(DiskCache::open(&settings.cache, &id, &backend.name)?)
            }
        };
        Ok(Arc::new(ModelStore {
            settings,
            backend,
            cache,
            counters: Arc::default(),
            flights: Mutex::new(HashMap::new()),
            offline_until: Mutex::new(None),
            last_listing: Mutex::new(None),
        }))
    }

    /// The repository's location.
    pub fn uri(&self) -> &StoreUri {
        &self.settings.uri
    }

    /// Counters since the store was opened.
    pub fn stats(&self) -> StoreStats {
        self.counters.snapshot()
    }

    /// Bytes of model versions in the cache (0 for a `file://` store).
    pub fn cache_bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, DiskCache::bytes)
    }

    /// True while the store is taken to be unreachable (see the module docs).
    pub fn is_offline(&self) -> bool {
        self.offline_until.lock().is_some_and(|t| Instant::now() < t)
    }

    fn note_failure(&self, error: &StoreError) {
        if matches!(error, StoreError::Unreachable { .. } | StoreError::Backend { .. }) {
            *self.offline_until.lock() = Some(Instant::now() + self.settings.transfer.offline_grace);
        }
    }

    fn note_success(&self) {
        *self.offline_until.lock() = None;
    }

    /// Lists the repository. When an object store is unreachable (or
    /// answers with server errors), returns what the cache holds instead,
    /// with `from_cache` set, or the error when the cache holds no model
    /// (an empty repository would hide that nothing can be served); other
    /// errors (refused credentials, a missing bucket) are returned as they
    /// are.
    pub async fn list(&self) -> Result<Arc<RepositoryListing>, StoreError> {
        let listed = if self.is_offline() {
            Err(StoreError::Unreachable {
                store: self.backend.name.clone(),
                reason: "recently unreachable".into(),
            })
        } else {
            list_objects(&self.backend, "", &self.counters).await
        };
        match listed {
            Ok(objects) => {
                self.note_success();
                let listing = Arc::new(RepositoryListing::from_objects(objects));
                *self.last_listing.lock() = Some(Arc::clone(&listing));
                Ok(listing)
            }
            Err(e) => {
                self.note_failure(&e);
                let cached =
                    match (&self.cache, e.is_unreachable() || matches!(e, StoreError::Backend { .. })) {
                        (Some(cache), true) => cache.listing(),
                        _ => return Err(e),
                    };
                if cached.models.is_empty() {
                    // Nothing to serve instead: say so rather than serve an empty repository.
                    return Err(e);
                }
                tracing::warn!(store = %self.backend.name, error = %e, "model store unreachable; using the cached models");
                Ok(Arc::new(cached))
            }
        }
    }

    /// Lists the repository again and returns what changed since the
    /// previous successful listing (empty the first time). Errors when the
    /// store is unreachable: nothing can be said about changes then.
    pub async fn poll(&self) -> Result<Vec<RepositoryChange>, StoreError> {
        let previous = self.last_listing.lock().clone();
        let listing = self.list().await?;
        if listing.from_cache {
            return Err(StoreError::Unreachable {
                store: self.backend.name.clone(),
                reason: "poll skipped".into(),
            });
        }
        Ok(previous.map(|p| listing.changes_since(&p)).unwrap_or_default())
    }

    /// Reads a small model-level file (`config.pbtxt`) listed as `info`.
    /// From an object store it is kept in the cache, which answers when the
    /// store is unreachable or the cached copy has the same ETag and size.
    pub async fn read_model_file(
        &self,
        model: &str,
        name: &str,
        info: &ObjectInfo,
    ) -> Result<Vec<u8>, StoreError> {
        let Some(cache) = &self.cache else {
            return Ok(fetch_small(&self.backend, info, &self.counters).await?.to_vec());
        };
        let cached = cache.model_file(model, name);
        if let Some((old, bytes)) = &cached {
            if self.is_offline() || (old.size == info.size && old.etag.is_some() && old.etag == info.etag) {
                return Ok(bytes.clone());
            }
        }
        match fetch_small(&self.backend, info, &self.counters).await {
            Ok(bytes) => {
                cache.put_model_file(model, name, info, &bytes)?;
                Ok(bytes.to_vec())
            }
            Err(e) => {
                self.note_failure(&e);
                match cached {
                    Some((_, bytes)) if self.is_offline() => Ok(bytes),
                    _ => Err(e),
                }
            }
        }
    }

    /// Where version `version` of `model` is (or will be) in the cache;
    /// `None` for a `file://` store, whose versions are read in place.
    pub fn cache_dir_of(&self, model: &str, version: u64) -> Option<PathBuf> {
        self.cache.as_ref().map(|c| c.version_dir(model, version))
    }

    /// Whether the cache holds version `version` of `model` with exactly
    /// `listing`'s objects (no request is sent).
    pub fn is_cached(&self, model: &str, version: u64, listing: &VersionListing) -> bool {
        self.cache.as_ref().is_some_and(|c| c.lookup(model, version).is_some_and(|m| m.matches(listing)))
    }

    /// Makes version `version` of `model` available locally, listing the
    /// version folder first to compare with the cache (one LIST request).
    pub async fn materialize(
        self: &Arc<Self>,
        model: &str,
        version: u64,
    ) -> Result<LocalVersion, StoreError> {
        self.materialize_listed(model, version, None).await
    }

    /// Like [`Self::materialize`], with the version's files as a fresh
    /// [`Self::list`] gave them (no extra request when cached).
    pub async fn materialize_listed(
        self: &Arc<Self>,
        model: &str,
        version: u64,
        listing: Option<&VersionListing>,
    ) -> Result<LocalVersion, StoreError> {
        let Some(cache) = &self.cache else {
            return self.in_place(model, version);
        };
        let key = (model.to_string(), version);
        let flight = {
            let mut flights = self.flights.lock();
            let flight = flights
                .entry(key.clone())
                .or_insert_with(|| self.start_flight(key.clone(), listing.cloned()));
            flight.clone()
        };
        let (lease, source) = flight.await?;
        Ok(LocalVersion { model: key.0, version, dir: cache.version_dir(model, version), source, lease })
    }

    fn in_place(&self, model: &str, version: u64) -> Result<LocalVersion, StoreError> {
        let StoreUri::File { root } = &self.settings.uri else {
            return Err(StoreError::cache(PathBuf::new(), "no cache for an object store"));
        };
        let dir = root.join(model).join(version.to_string());
        if !dir.is_dir() {
            return Err(StoreError::NotFound {
                store: self.backend.name.clone(),
                what: format!("model '{model}' version {version}"),
            });
        }
        Ok(LocalVersion {
            model: model.to_string(),
            version,
            dir,
            source: VersionSource::InPlace,
            lease: DiskCacheLease::none(model, version),
        })
    }

    /// Starts the shared download task for `key`; it removes itself from
    /// the in-flight map when done.
    fn start_flight(self: &Arc<Self>, key: (String, u64), listing: Option<VersionListing>) -> Flight {
        let store = Arc::clone(self);
        let task = tokio::spawn(async move {
            let result = store.fetch_version(&key.0, key.1, listing).await;
            store.flights.lock().remove(&key);
            result
        });
        async move {
            task.await.unwrap_or_else(|e| {
                Err(StoreError::Backend { store: String::new(), reason: format!("pull task: {e}") })
            })
        }
        .boxed()
        .shared()
    }

    async fn fetch_version(
        &self,
        model: &str,
        version: u64,
        listing: Option<VersionListing>,
    ) -> Result<(DiskCacheLease, VersionSource), StoreError> {
        let Some(cache) = &self.cache else {
            return Err(StoreError::cache(PathBuf::new(), "no cache for a local repository"));
        };
        let listing = match listing {
            Some(l) => Ok(l),
            None => self.list_version(model, version).await,
        };
        let listing = match listing {
            Ok(l) => l,
            Err(e) if e.is_unreachable() || matches!(e, StoreError::Backend { .. }) => {
                self.note_failure(&e);
                return match cache.lookup(model, version) {
                    Some(_) => {
                        self.counters.count_offline_hit();
                        tracing::warn!(model, version, error = %e, "model store unreachable; serving the cached copy");
                        Ok((cache.lease(model, version), VersionSource::CachedOffline))
                    }
                    None => {
                        Err(StoreError::NotCached { model: model.into(), version, reason: e.to_string() })
                    }
                };
            }
            Err(e) => return Err(e),
        };
        if cache.lookup(model, version).is_some_and(|m| m.matches(&listing)) {
            // A listing the cache itself gave (store unreachable) also matches.
            let source = if self.is_offline() {
                self.counters.count_offline_hit();
                VersionSource::CachedOffline
            } else {
                self.counters.count_cache_hit();
                VersionSource::Cached
            };
            return Ok((cache.lease(model, version), source));
        }
        if self.is_offline() {
            return Err(StoreError::NotCached {
                model: model.into(),
                version,
                reason: format!("model store {} is unreachable", self.backend.name),
            });
        }
        let ctx =
            PullContext { backend: &self.backend, cache, settings: &self.settings, counters: &self.counters };
        let started = Instant::now();
        let lease =
            pull_version(&ctx, model, version, &listing).await.inspect_err(|e| self.note_failure(e))?;
        tracing::info!(
            model,
            version,
            bytes = listing.bytes(),
            ms = started.elapsed().as_millis() as u64,
            "model version downloaded into the cache"
        );
        Ok((lease, VersionSource::Downloaded))
    }

    /// The files of one version folder (one LIST), or `NotFound`.
    async fn list_version(&self, model: &str, version: u64) -> Result<VersionListing, StoreError> {
        if self.is_offline() {
            return Err(StoreError::Unreachable {
                store: self.backend.name.clone(),
                reason: "recently unreachable".into(),
            });
        }
        let prefix = format!("{model}/{version}");
        let objects = list_objects(&self.backend, &prefix, &self.counters).await?;
        self.note_success();
        let tree = RepositoryListing::from_objects(objects);
        tree.models.get(model).and_then(|m| m.versions.get(&version)).cloned().ok_or_else(|| {
            StoreError::NotFound {
                store: self.backend.name.clone(),
                what: format!("model '{model}' version {version}"),
            }
        })
    }
}
