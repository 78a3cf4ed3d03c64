//! A snapshot of a repository's tree, from one recursive listing:
//! `<model>/<file>` (e.g. `config.pbtxt`) and `<model>/<version>/<file...>`
//! with each object's size and ETag. Polling compares two snapshots
//! ([`RepositoryListing::changes_since`]) to notice new, removed and
//! replaced versions.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// One object of the repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectInfo {
    /// Its key relative to the repository root (`digits/1/model.onnx`).
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// The store's ETag (quotes removed), when it gives one.
    pub etag: Option<String>,
}

/// The files of one version folder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionListing {
    /// Files by path relative to the version folder (`model.onnx`,
    /// `model.onnx.data`, `tokenizer/vocab.txt`).
    pub files: BTreeMap<String, ObjectInfo>,
}

impl VersionListing {
    /// Total size of the version's files.
    pub fn bytes(&self) -> u64 {
        self.files.values().map(|f| f.size).sum()
    }
}

/// One model folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelListing {
    /// Files directly in the model folder (`config.pbtxt`, label files).
    pub files: BTreeMap<String, ObjectInfo>,
    /// Version folders (positive integers), ascending.
    pub versions: BTreeMap<u64, VersionListing>,
    /// Sub-folders that are not versions (not a positive integer), which
    /// Triton ignores too; listed so they can be reported.
    pub ignored: Vec<String>,
}

/// The whole repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepositoryListing {
    /// Models by folder name.
    pub models: BTreeMap<String, ModelListing>,
    /// True when the store was unreachable and this was rebuilt from the
    /// local cache (only the cached versions appear).
    pub from_cache: bool,
}

/// One difference between two listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepositoryChange {
    /// A model folder appeared.
    ModelAdded(String),
    /// A model folder disappeared.
    ModelRemoved(String),
    /// A model-level file (`config.pbtxt`) appeared, changed or went away.
    ModelFilesChanged(String),
    /// A version folder appeared.
    VersionAdded(String, u64),
    /// A version folder disappeared.
    VersionRemoved(String, u64),
    /// A file of a version was added, removed or replaced.
    VersionChanged(String, u64),
}

impl fmt::Display for RepositoryChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RepositoryChange::ModelAdded(m) => write!(f, "model '{m}' added"),
            RepositoryChange::ModelRemoved(m) => write!(f, "model '{m}' removed"),
            RepositoryChange::ModelFilesChanged(m) => write!(f, "model '{m}' configuration changed"),
            RepositoryChange::VersionAdded(m, v) => write!(f, "model '{m}' version {v} added"),
            RepositoryChange::VersionRemoved(m, v) => write!(f, "model '{m}' version {v} removed"),
            RepositoryChange::VersionChanged(m, v) => write!(f, "model '{m}' version {v} replaced"),
        }
    }
}

impl RepositoryListing {
    /// Builds the tree from objects (keys relative to the repository root).
    /// Objects at the root, or deeper than a model folder but outside a
    /// version folder's name rules, are sorted as the module docs say.
    pub fn from_objects(objects: impl IntoIterator<Item = ObjectInfo>) -> RepositoryListing {
        let mut models: BTreeMap<String, ModelListing> = BTreeMap::new();
        for object in objects {
            if !safe_key(&object.key) {
                tracing::warn!(key = %object.key, "object key with an empty, '.' or '..' part ignored");
                continue;
            }
            let mut parts = object.key.splitn(3, '/');
            let (Some(model), Some(second)) = (parts.next(), parts.next()) else { continue };
            let entry = models.entry(model.to_string()).or_default();
            match (parts.next(), parse_version(second)) {
                (None, _) => {
                    entry.files.insert(second.to_string(), object);
                }
                (Some(rest), Some(version)) => {
                    entry.versions.entry(version).or_default().files.insert(rest.to_string(), object);
                }
                (Some(_), None) => {
                    if !entry.ignored.iter().any(|i| i == second) {
                        entry.ignored.push(second.to_string());
                    }
                }
            }
        }
        RepositoryListing { models, from_cache: false }
    }

    /// What changed from `old` to `self`, model by model in name order.
    pub fn changes_since(&self, old: &RepositoryListing) -> Vec<RepositoryChange> {
        let mut changes = Vec::new();
        for name in old.models.keys().filter(|m| !self.models.contains_key(*m)) {
            changes.push(RepositoryChange::ModelRemoved(name.clone()));
        }
        for (name, new) in &self.models {
            let Some(before) = old.models.get(name) else {
                changes.push(RepositoryChange::ModelAdded(name.clone()));
                continue;
            };
            if !same_files(&new.files, &before.files) {
                changes.push(RepositoryChange::ModelFilesChanged(name.clone()));
            }
            for v in before.versions.keys().filter(|v| !new.versions.contains_key(v)) {
                changes.push(RepositoryChange::VersionRemoved(name.clone(), *v));
            }
            for (v, files) in &new.versions {
                match before.versions.get(v) {
                    None => changes.push(RepositoryChange::VersionAdded(name.clone(), *v)),
                    Some(old_files) if !same_files(&files.files, &old_files.files) => {
                        changes.push(RepositoryChange::VersionChanged(name.clone(), *v));
                    }
                    Some(_) => {}
                }
            }
        }
        changes
    }
}

/// Same names, sizes and ETags (a missing ETag compares by size only).
fn same_files(a: &BTreeMap<String, ObjectInfo>, b: &BTreeMap<String, ObjectInfo>) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((ka, fa), (kb, fb))| {
            ka == kb && fa.size == fb.size && (fa.etag.is_none() || fb.etag.is_none() || fa.etag == fb.etag)
        })
}

/// True when every `/`-separated part of `key` is a plain name (not
/// empty, `.` or `..`, no `\\` or NUL), so it can become a path under the
/// cache folder.
pub fn safe_key(key: &str) -> bool {
    key.split('/').all(|p| !p.is_empty() && p != "." && p != ".." && !p.contains(['\\', '\0']))
}

/// A version folder name: a positive integer (Triton ignores `0` and
/// anything that is not a number).
pub fn parse_version(name: &str) -> Option<u64> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok().filter(|&v| v > 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn obj(key: &str, size: u64, etag: &str) -> ObjectInfo {
        ObjectInfo { key: key.into(), size, etag: Some(etag.into()) }
    }

    fn sample() -> RepositoryListing {
        RepositoryListing::from_objects([
            obj("digits/config.pbtxt", 10, "c1"),
            obj("digits/1/model.onnx", 100, "a"),
            obj("digits/2/model.onnx", 120, "b"),
            obj("digits/2/extra/vocab.txt", 5, "v"),
            obj("digits/0/model.onnx", 1, "z"),
            obj("digits/latest/model.onnx", 1, "z"),
            obj("README.md", 3, "r"),
            obj("minilm/config.pbtxt", 10, "m"),
            obj("minilm/1/../../escape", 1, "x"),
        ])
    }

    #[test]
    fn tree_from_objects() {
        let listing = sample();
        assert_eq!(listing.models.keys().collect::<Vec<_>>(), ["digits", "minilm"]);
        let digits = &listing.models["digits"];
        assert_eq!(digits.files.keys().collect::<Vec<_>>(), ["config.pbtxt"]);
        assert_eq!(digits.versions.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(digits.versions[&2].files.keys().collect::<Vec<_>>(), ["extra/vocab.txt", "model.onnx"]);
        assert_eq!(digits.versions[&2].bytes(), 125);
        assert_eq!(digits.ignored, ["0", "latest"]);
        assert!(listing.models["minilm"].versions.is_empty());
    }

    #[test]
    fn changes_between_listings() {
        let old = sample();
        assert!(old.changes_since(&old).is_empty());
        let mut new = sample();
        let digits = new.models.get_mut("digits").unwrap();
        digits.versions.insert(3, VersionListing::default());
        digits.versions.remove(&1);
        digits.versions.get_mut(&2).unwrap().files.get_mut("model.onnx").unwrap().etag = Some("b2".into());
        digits.files.get_mut("config.pbtxt").unwrap().size = 11;
        new.models.remove("minilm");
        new.models.insert("text".into(), ModelListing::default());
        let changes: Vec<String> = new.changes_since(&old).iter().map(ToString::to_string).collect();
        assert_eq!(
            changes,
            [
                "model 'minilm' removed",
                "model 'digits' configuration changed",
                "model 'digits' version 1 removed",
                "model 'digits' version 2 replaced",
                "model 'digits' version 3 added",
                "model 'text' added",
            ]
        );
    }

    #[test]
    fn unsafe_keys_are_refused() {
        assert!(safe_key("m/1/model.onnx"));
        for bad in ["m//x", "m/./x", "m/../x", "/m/x", "m/x/", "m/a\\b"] {
            assert!(!safe_key(bad), "{bad}");
        }
    }

    #[test]
    fn version_names() {
        assert_eq!(parse_version("1"), Some(1));
        assert_eq!(parse_version("0042"), Some(42));
        assert_eq!(parse_version("0"), None);
        assert_eq!(parse_version("v1"), None);
        assert_eq!(parse_version("-1"), None);
        assert_eq!(parse_version(""), None);
    }
}
