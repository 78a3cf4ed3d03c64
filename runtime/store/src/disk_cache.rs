//! The local disk cache of model versions pulled from an object store.
//!
//! Layout under [`DiskCacheSettings::dir`]:
//!
//! ```text
//! tmp/<unique>/...                       downloads in progress (never read)
//! <store id>/store.txt                   which store this folder mirrors
//! <store id>/models/<model>/<version>/   complete versions (+ manifest)
//! <store id>/meta/<model>/               model-level files (config.pbtxt)
//! ```
//!
//! A version is downloaded into `tmp/`, its manifest written last, then the
//! folder is renamed into `models/` in one step: a folder there is always
//! complete, and one without a manifest (which only a crash in the middle
//! of a replacement could leave) is deleted when the cache is opened.
//!
//! Size bound and eviction: the cache keeps the total size of its versions
//! under [`DiskCacheSettings::max_bytes`] by deleting the least recently used
//! versions before installing a new one. Versions pinned by a
//! [`DiskCacheLease`] (the ones being served) are never deleted; when they alone
//! exceed the bound the install goes ahead with a warning. Last use is the
//! manifest's modification time, so the order survives restarts.
//!
//! Several processes may share a cache folder for downloads (renames are
//! atomic; when two pull the same version at once, the second finisher
//! keeps the first one's copy and discards its own), but each
//! evicts by its own view: give each gateway its own folder, or a bound
//! that fits every model they serve.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;

use crate::error::StoreError;
use crate::listing::{ModelListing, ObjectInfo, RepositoryListing};
use crate::manifest::{touch, write_atomic, write_json, VersionManifest, MODEL_FILES};
use crate::settings::DiskCacheSettings;

/// Temporary folders older than this are taken for leftovers of a crashed
/// process and deleted when a cache is opened.
const STALE_TMP: Duration = Duration::from_secs(3600);

type Key = (String, u64);

#[derive(Debug, Clone, Copy)]
struct Entry {
    bytes: u64,
    used: SystemTime,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<Key, Entry>,
    pins: HashMap<Key, usize>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    tmp: PathBuf,
    max_bytes: u64,
    state: Mutex<State>,
    next_tmp: AtomicU64,
}

/// A cache folder for one store. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub(crate) struct DiskCache {
    inner: Arc<Inner>,
}

/// Keeps a cached version from being evicted while held (the gateway holds
/// one per served model version, in its serving snapshot).
#[derive(Debug)]
pub struct DiskCacheLease {
    cache: Option<Arc<Inner>>,
    key: Key,
}

impl Clone for DiskCacheLease {
    fn clone(&self) -> Self {
        if let Some(inner) = &self.cache {
            *inner.state.lock().pins.entry(self.key.clone()).or_default() += 1;
        }
        DiskCacheLease { cache: self.cache.clone(), key: self.key.clone() }
    }
}

impl DiskCacheLease {
    /// A lease on nothing (a version read in place from a `file://` store).
    pub(crate) fn none(model: &str, version: u64) -> DiskCacheLease {
        DiskCacheLease { cache: None, key: (model.to_string(), version) }
    }
}

impl Drop for DiskCacheLease {
    fn drop(&mut self) {
        let Some(inner) = &self.cache else { return };
        let mut state = inner.state.lock();
        if let Some(count) = state.pins.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                state.pins.remove(&self.key);
            }
        }
    }
}

impl DiskCache {
    /// Opens (creating) the cache folder for the store identified by
    /// `store_id` (a stable string naming bucket, prefix and endpoint),
    /// deletes leftovers and indexes the complete versions. Blocking.
    pub(crate) fn open(
        settings: &DiskCacheSettings,
        store_id: &str,
        store_name: &str,
    ) -> Result<DiskCache, StoreError> {
        let digest = hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(store_id.as_bytes())[..8]);
        let root = settings.dir.join(digest);
        let tmp = settings.dir.join("tmp");
        for dir in [root.join("models"), root.join("meta"), tmp.clone()] {
            std::fs::create_dir_all(&dir).map_err(|e| StoreError::cache(&dir, e))?;
        }
        write_atomic(&root.join("store.txt"), format!("{store_name}\n").as_bytes())?;
        remove_stale(&tmp);
        let entries = scan_versions(&root.join("models"));
        let inner = Inner {
            root,
            tmp,
            max_bytes: settings.max_bytes,
            state: Mutex::new(State { entries, pins: HashMap::new() }),
            next_tmp: AtomicU64::new(0),
        };
        Ok(DiskCache { inner: Arc::new(inner) })
    }

    /// Where version `version` of `model` lives once cached.
    pub(crate) fn version_dir(&self, model: &str, version: u64) -> PathBuf {
        self.inner.root.join("models").join(model).join(version.to_string())
    }

    /// The manifest of a cached version whose files are all present with
    /// their recorded sizes; `None` when not cached (or damaged, in which
    /// case it is dropped from the index).
    pub(crate) fn lookup(&self, model: &str, version: u64) -> Option<VersionManifest> {
        let dir = self.version_dir(model, version);
        let manifest = VersionManifest::read(&dir).map(|(m, _)| m).filter(|m| files_present(&dir, m));
        if manifest.is_none() {
            self.inner.state.lock().entries.remove(&(model.to_string(), version));
        }
        manifest
    }

    /// Pins a cached version and marks it used now.
    pub(crate) fn lease(&self, model: &str, version: u64) -> DiskCacheLease {
        let key = (model.to_string(), version);
        touch(&self.version_dir(model, version));
        let mut state = self.inner.state.lock();
        if let Some(entry) = state.entries.get_mut(&key) {
            entry.used = SystemTime::now();
        }
        *state.pins.entry(key.clone()).or_default() += 1;
        DiskCacheLease { cache: Some(Arc::clone(&self.inner)), key }
    }

    /// A new, empty temporary folder for a download.
    pub(crate) fn temp_dir(&self) -> Result<PathBuf, StoreError> {
        let n = self.inner.next_tmp.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let dir = self.inner.tmp.join(format!("{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::cache(&dir, e))?;
        Ok(dir)
    }

    /// Moves a downloaded version (`tmp`, files plus manifest) into place,
    /// replacing an older copy, after evicting what the size bound needs.
    /// Blocking. Returns a lease on the installed version (taken before
    /// anything else can evict it) and how many versions were evicted.
    ///
    /// When another process sharing the folder installed the same objects
    /// first (both pulled at once), its copy is kept and ours discarded:
    /// the folder in place is never swapped for an identical one, which
    /// would pull the files from under a process about to load them.
    pub(crate) fn install(
        &self,
        manifest: &VersionManifest,
        tmp: &Path,
    ) -> Result<(DiskCacheLease, u64), StoreError> {
        let key = (manifest.model.clone(), manifest.version);
        let bytes = manifest.bytes();
        manifest.write(tmp)?;
        let evicted = self.make_room(&key, bytes);
        let dest = self.version_dir(&manifest.model, manifest.version);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| StoreError::cache(parent, e))?;
        }
        if holds_complete(&dest, manifest) {
            let _ = std::fs::remove_dir_all(tmp);
        } else {
            if dest.exists() {
                let old = self.temp_dir()?.join("replaced");
                std::fs::rename(&dest, &old).map_err(|e| StoreError::cache(&dest, e))?;
                let _ = std::fs::remove_dir_all(old.parent().unwrap_or(&old));
            }
            if let Err(e) = std::fs::rename(tmp, &dest) {
                // Another process installed it between the check and here.
                if !holds_complete(&dest, manifest) {
                    return Err(StoreError::cache(&dest, e));
                }
                let _ = std::fs::remove_dir_all(tmp);
            }
        }
        let mut state = self.inner.state.lock();
        state.entries.insert(key.clone(), Entry { bytes, used: SystemTime::now() });
        *state.pins.entry(key.clone()).or_default() += 1;
        drop(state);
        Ok((DiskCacheLease { cache: Some(Arc::clone(&self.inner)), key }, evicted))
    }

    /// Deletes least-recently-used unpinned versions (other than `key`)
    /// until `incoming` more bytes fit under the bound.
    fn make_room(&self, key: &Key, incoming: u64) -> u64 {
        let mut evicted = 0;
        loop {
            let victim = {
                let state = self.inner.state.lock();
                let used: u64 = state.entries.iter().filter(|(k, _)| *k != key).map(|(_, e)| e.bytes).sum();
                if used + incoming <= self.inner.max_bytes {
                    return evicted;
                }
                let candidate = state
                    .entries
                    .iter()
                    .filter(|(k, _)| *k != key && !state.pins.contains_key(*k))
                    .min_by_key(|(_, e)| e.used)
                    .map(|(k, _)| k.clone());
                match candidate {
                    Some(k) => k,
                    None => {
                        tracing::warn!(
                            bound = self.inner.max_bytes,
                            used,
                            incoming,
                            "model cache: the versions being served exceed the size bound; keeping them"
                        );
                        return evicted;
                    }
                }
            };
            self.inner.state.lock().entries.remove(&victim);
            let dir = self.version_dir(&victim.0, victim.1);
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(path = %dir.display(), error = %e, "model cache: eviction could not delete a version");
            }
            tracing::info!(model = %victim.0, version = victim.1, "model cache: evicted (least recently used)");
            evicted += 1;
        }
    }

    /// Total bytes of the cached versions.
    pub(crate) fn bytes(&self) -> u64 {
        self.inner.state.lock().entries.values().map(|e| e.bytes).sum()
    }

    /// The cached versions (model, version), sorted.
    pub(crate) fn versions(&self) -> Vec<(String, u64)> {
        let mut keys: Vec<Key> = self.inner.state.lock().entries.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// Stores a model-level file (`config.pbtxt`) for use while the store
    /// is unreachable.
    pub(crate) fn put_model_file(
        &self,
        model: &str,
        name: &str,
        info: &ObjectInfo,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        let dir = self.inner.root.join("meta").join(model);
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::cache(&dir, e))?;
        write_atomic(&dir.join(name), bytes)?;
        let mut record = self.model_files(model);
        record.insert(name.to_string(), info.clone());
        write_json(&dir.join(MODEL_FILES), &record)
    }

    /// A cached model-level file and the object it was read from.
    pub(crate) fn model_file(&self, model: &str, name: &str) -> Option<(ObjectInfo, Vec<u8>)> {
        let info = self.model_files(model).remove(name)?;
        let bytes = std::fs::read(self.inner.root.join("meta").join(model).join(name)).ok()?;
        Some((info, bytes))
    }

    fn model_files(&self, model: &str) -> BTreeMap<String, ObjectInfo> {
        let path = self.inner.root.join("meta").join(model).join(MODEL_FILES);
        std::fs::read(path).ok().and_then(|t| serde_json::from_slice(&t).ok()).unwrap_or_default()
    }

    /// The repository as far as the cache knows it: every model with cached
    /// model-level files or versions (marked `from_cache`).
    pub(crate) fn listing(&self) -> RepositoryListing {
        let mut models: BTreeMap<String, ModelListing> = BTreeMap::new();
        for (model, version) in self.versions() {
            if let Some(manifest) = self.lookup(&model, version) {
                models.entry(model).or_default().versions.insert(version, manifest.listing());
            }
        }
        if let Ok(dirs) = std::fs::read_dir(self.inner.root.join("meta")) {
            for name in dirs.flatten().filter_map(|d| d.file_name().into_string().ok()) {
                let files = self.model_files(&name);
                if !files.is_empty() {
                    models.entry(name).or_default().files = files;
                }
            }
        }
        RepositoryListing { models, from_cache: true }
    }
}

/// Indexes complete versions under `models/`; deletes incomplete ones.
fn scan_versions(models: &Path) -> HashMap<Key, Entry> {
    let mut entries = HashMap::new();
    let dirs = |p: &Path| std::fs::read_dir(p).into_iter().flatten().flatten().filter(|d| d.path().is_dir());
    for model in dirs(models) {
        for version in dirs(&model.path()) {
            let path = version.path();
            match VersionManifest::read(&path) {
                Some((m, used)) => {
                    entries.insert((m.model.clone(), m.version), Entry { bytes: m.bytes(), used });
                }
                None => {
                    tracing::warn!(path = %path.display(), "model cache: incomplete version deleted");
                    let _ = std::fs::remove_dir_all(&path);
                }
            }
        }
    }
    entries
}

/// Whether `dir` is a complete cached version of exactly `manifest`'s
/// objects (its manifest equal, every file present at its size).
fn holds_complete(dir: &Path, manifest: &VersionManifest) -> bool {
    VersionManifest::read(dir)
        .is_some_and(|(found, _)| found.files == manifest.files && files_present(dir, &found))
}

/// Whether every file `manifest` records is in `dir` at its recorded size.
fn files_present(dir: &Path, manifest: &VersionManifest) -> bool {
    manifest.files.iter().all(|(rel, f)| std::fs::metadata(dir.join(rel)).is_ok_and(|md| md.len() == f.size))
}

/// Deletes temporary folders not touched for [`STALE_TMP`] (crashed
/// downloads; live ones of other processes are younger).
fn remove_stale(tmp: &Path) {
    let now = SystemTime::now();
    for entry in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
        let age = entry.metadata().and_then(|m| m.modified()).ok().and_then(|t| now.duration_since(t).ok());
        if age.is_some_and(|a| a > STALE_TMP) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests;
