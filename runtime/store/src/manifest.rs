//! The record a cached model version carries: which objects (key, size,
//! ETag) its files were downloaded from. A version folder counts as
//! complete only when its manifest is present, and the manifest is written
//! into the temporary folder before that folder is renamed into place, so
//! a crash never leaves a folder that looks complete but is not.
//!
//! The manifest file's modification time is the version's last use (for
//! LRU eviction across restarts).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::listing::{ObjectInfo, VersionListing};

/// File name of a version's manifest, inside its folder.
pub const MANIFEST: &str = ".switchyard-version.json";

/// File name of a model's cached model-level files record.
pub const MODEL_FILES: &str = ".switchyard-model-files.json";

/// A cached version's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionManifest {
    /// The model.
    pub model: String,
    /// The version.
    pub version: u64,
    /// The store the files came from (`s3://bucket/prefix`).
    pub store: String,
    /// Files by path relative to the version folder.
    pub files: BTreeMap<String, ObjectInfo>,
}

impl VersionManifest {
    /// Total size of the files.
    pub fn bytes(&self) -> u64 {
        self.files.values().map(|f| f.size).sum()
    }

    /// The listing the files were downloaded from.
    pub fn listing(&self) -> VersionListing {
        VersionListing { files: self.files.clone() }
    }

    /// True when the manifest describes exactly the objects `listing` lists.
    pub fn matches(&self, listing: &VersionListing) -> bool {
        self.files == listing.files
    }

    /// Reads `dir`'s manifest; `None` when it is missing or unreadable
    /// (the folder is then incomplete).
    pub fn read(dir: &Path) -> Option<(VersionManifest, SystemTime)> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read(&path).ok()?;
        let manifest = serde_json::from_slice(&text).ok()?;
        let used = std::fs::metadata(&path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
        Some((manifest, used))
    }

    /// Writes the manifest into `dir` (a temporary folder, before it is
    /// renamed into place), flushed to disk.
    pub fn write(&self, dir: &Path) -> Result<(), StoreError> {
        write_json(&dir.join(MANIFEST), self)
    }
}

/// Marks `dir`'s version as used now (its manifest's modification time).
pub fn touch(dir: &Path) {
    let path = dir.join(MANIFEST);
    if let Ok(file) = std::fs::File::options().write(true).open(&path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// Writes `value` as JSON to `path` through a temporary file and a rename.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    let text = serde_json::to_vec_pretty(value).map_err(|e| StoreError::cache(path, e))?;
    write_atomic(path, &text)
}

/// Numbers this process's temporary files (see [`write_atomic`]).
static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` through `<path>.tmp-<pid>-<n>` and a rename,
/// flushed to disk first. The temporary name is new for every call, so
/// concurrent writers of one path (two reloads putting the same
/// `config.pbtxt`, or processes sharing the cache) never write into or
/// rename away each other's temporary file; the last rename wins whole.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    use std::io::Write;
    let n = NEXT_TMP.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}-{n}", std::process::id()));
    let tmp = path.with_file_name(name);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_data()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| StoreError::cache(path, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trip_and_matching() {
        let dir = tempfile::tempdir().unwrap();
        let info = ObjectInfo { key: "m/1/model.onnx".into(), size: 4, etag: Some("e".into()) };
        let manifest = VersionManifest {
            model: "m".into(),
            version: 1,
            store: "s3://b".into(),
            files: BTreeMap::from([("model.onnx".to_string(), info.clone())]),
        };
        assert!(VersionManifest::read(dir.path()).is_none(), "no manifest: incomplete");
        manifest.write(dir.path()).unwrap();
        let (read, _) = VersionManifest::read(dir.path()).unwrap();
        assert_eq!(read, manifest);
        assert_eq!(read.bytes(), 4);
        assert!(read.matches(&manifest.listing()));
        let mut other = manifest.listing();
        other.files.get_mut("model.onnx").unwrap().etag = Some("f".into());
        assert!(!read.matches(&other));
    }

    #[test]
    fn concurrent_atomic_writes_of_one_path_all_succeed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.pbtxt");
        let texts: Vec<Vec<u8>> = (0..8u8).map(|i| vec![b'a' + i; 4096]).collect();
        std::thread::scope(|scope| {
            for text in &texts {
                let path = &path;
                scope.spawn(move || {
                    for _ in 0..50 {
                        write_atomic(path, text).unwrap();
                    }
                });
            }
        });
        let last = std::fs::read(&path).unwrap();
        assert!(texts.contains(&last), "the file is one writer's whole text");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["config.pbtxt"], "no temporary file is left behind");
    }
}
