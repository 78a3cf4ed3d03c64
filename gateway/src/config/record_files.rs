//! Where a route's traffic sample may be written (`routes[].record.path`):
//! only a file the gateway can append to without harm. The writer appends
//! to `path` and renames it to `path.1`, `path.2`, ... on rotation, so each
//! of those names is checked:
//!
//! * it is not a file the config itself uses: the config file (checked by
//!   [`super::parse_file`], which knows it), a model or tokenizer file, the
//!   ONNX Runtime library, nor inside the model store's cache folder or a
//!   `file://` store's folder;
//! * it is not in `/proc`, `/sys` or `/dev`, and when it exists it is a
//!   regular file the gateway may write;
//! * when it does not exist, the nearest folder above it that does is one
//!   the gateway may write in (the writer creates the folders below it).
//!
//! Why: a sample pointed at the config file appended a JSON line to it at
//! the first recorded request; the reload was refused and the next start
//! failed. A model file, a folder or `/proc/self/mem` were accepted too.

use super::issue::{ConfigIssue, Issues};
use super::record_section::RecordConfig;
use super::store_section::StoreConfig;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use switchyard_runtime::ModelSpec;
use switchyard_store::StoreUri;

/// Files and folders a traffic sample must never be written to, each with
/// what it is (for the message).
#[derive(Debug, Default)]
pub struct Protected {
    files: Vec<(PathBuf, String)>,
    folders: Vec<(PathBuf, String)>,
}

impl Protected {
    /// The files a checked config uses: its models' and tokenizers' files,
    /// the ONNX Runtime library, the model store's folders.
    pub fn of(models: &[ModelSpec], onnxruntime: Option<&Path>, store: Option<&StoreConfig>) -> Protected {
        let mut protected = Protected::default();
        for model in models {
            protected.files.push((model.path.clone(), format!("the file of model {:?}", model.name)));
            if let Some(text) = &model.text {
                protected
                    .files
                    .push((text.tokenizer.clone(), format!("the tokenizer of model {:?}", model.name)));
            }
        }
        if let Some(library) = onnxruntime {
            protected.files.push((library.to_path_buf(), "the ONNX Runtime library".into()));
        }
        if let Some(store) = store {
            let cache = store.settings.cache.dir.clone();
            protected.folders.push((cache, "the model store's cache folder".into()));
            if let StoreUri::File { root } = &store.settings.uri {
                protected.folders.push((root.clone(), "the model store's folder".into()));
            }
        }
        protected
    }

    /// Only the config file at `path`.
    pub fn config_file(path: &Path) -> Protected {
        Protected { files: vec![(path.to_path_buf(), "the config file itself".into())], folders: Vec::new() }
    }

    /// What `name` would overwrite or append to, if it is protected.
    fn clash(&self, name: &Path) -> Option<&str> {
        let resolved = resolve(name);
        let files = self.files.iter().find(|(file, _)| same_file(name, resolved.as_deref(), file));
        let folders = || {
            self.folders.iter().find(|(folder, _)| match (&resolved, resolve(folder)) {
                (Some(inside), Some(folder)) => inside.starts_with(folder),
                _ => false,
            })
        };
        files.or_else(folders).map(|(_, what)| what.as_str())
    }
}

/// Checks `record` (of the route at `route_path`, e.g. `routes[0]`) against
/// `protected`, and, with `usable`, that its files can be written.
pub fn check(
    record: &RecordConfig,
    protected: &Protected,
    usable: bool,
    route_path: &str,
    issues: &mut Issues,
) {
    let names = std::iter::once(record.path.clone())
        .chain((1..record.files).map(|n| super::record_section::rotated(&record.path, n)));
    for name in names {
        let problem = match protected.clash(&name) {
            Some(what) => Some(format!("is {what}; the traffic sample would be written into it")),
            None if usable => unusable(&name),
            None => None,
        };
        if let Some(problem) = problem {
            let rotated = if name == record.path { String::new() } else { " (a rotated file)".into() };
            issues.push(
                format!("{route_path}.record.path"),
                format!("{:?}{rotated} {problem}", name.display().to_string()),
            );
            // One problem per route is enough to act on.
            return;
        }
    }
}

/// Checks every recording route of a checked config against its own file
/// at `config_path` ([`super::parse_file`]).
pub fn check_config_file(routes: &[super::RouteConfig], config_path: &Path) -> Vec<ConfigIssue> {
    let protected = Protected::config_file(config_path);
    let mut issues = Issues::default();
    for (i, route) in routes.iter().enumerate() {
        if let Some(record) = &route.record {
            check(record, &protected, false, &format!("routes[{i}]"), &mut issues);
        }
    }
    issues.into_vec()
}

/// `path` absolute, as the writer will reach it: the symlinks of the part
/// that exists resolved, and `..` taken as the folders it creates make it
/// (`sub/../t` is `t` even while `sub` does not exist). `None` when the
/// current folder is unknown.
fn resolve(path: &Path) -> Option<PathBuf> {
    let absolute =
        if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().ok()?.join(path) };
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => {
                out.push(other);
                if let Ok(real) = out.canonicalize() {
                    out = real;
                }
            }
        }
    }
    Some(out)
}

/// Whether `name` (resolved as `resolved`) and `other` are one file: the
/// same device and inode when both exist (hard links included), else the
/// same resolved path.
fn same_file(name: &Path, resolved: Option<&Path>, other: &Path) -> bool {
    if let (Ok(a), Ok(b)) = (std::fs::metadata(name), std::fs::metadata(other)) {
        return a.dev() == b.dev() && a.ino() == b.ino();
    }
    resolved.is_some_and(|r| resolve(other).as_deref() == Some(r))
}

/// Why the writer could not, or must not, append to `name`; `None` when
/// it can.
fn unusable(name: &Path) -> Option<String> {
    let resolved = resolve(name)?;
    let special = ["/proc", "/sys", "/dev"].into_iter().find(|root| resolved.starts_with(root));
    if let Some(root) = special {
        return Some(format!("is in {root}, not a regular file"));
    }
    match std::fs::metadata(name) {
        Ok(meta) if meta.is_dir() => Some("is a folder, not a file".into()),
        Ok(meta) if !meta.is_file() => Some("is not a regular file (a device, FIFO or socket)".into()),
        Ok(_) if !may(name, libc::W_OK) => Some("is not writable by the gateway".into()),
        Ok(_) => None,
        Err(_) => {
            // The writer creates the missing folders: the nearest that
            // exists must take new entries.
            let folder = resolved.ancestors().skip(1).find(|a| a.exists())?;
            if !folder.is_dir() {
                Some(format!("cannot be created: {:?} is not a folder", folder.display().to_string()))
            } else if !may(folder, libc::W_OK | libc::X_OK) {
                Some(format!(
                    "cannot be created: folder {:?} is not writable by the gateway",
                    folder.display().to_string()
                ))
            } else {
                None
            }
        }
    }
}

/// Whether this process may access `path` in `mode` (`access(2)`).
fn may(path: &Path, mode: libc::c_int) -> bool {
    let Ok(text) = CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: `text` is a valid NUL-terminated string for the call.
    unsafe { libc::access(text.as_ptr(), mode) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(path: &Path, files: usize) -> RecordConfig {
        RecordConfig {
            sample: 1.0,
            path: path.to_path_buf(),
            max_bytes: 1 << 20,
            files,
            max_line_bytes: 1 << 20,
        }
    }

    fn problems(record: &RecordConfig, protected: &Protected) -> Vec<String> {
        let mut issues = Issues::default();
        check(record, protected, true, "routes[1]", &mut issues);
        assert!(issues.iter().all(|i| i.path == "routes[1].record.path"), "{issues:?}");
        issues.into_vec().into_iter().map(|i| i.message).collect()
    }

    #[test]
    fn files_the_config_uses_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("switchyard.toml");
        let model = dir.path().join("m.onnx");
        std::fs::write(&config, "").unwrap();
        std::fs::write(&model, "").unwrap();
        let mut protected = Protected::config_file(&config);
        protected.files.push((model.clone(), "the file of model \"m\"".into()));
        protected.folders.push((dir.path().join("cache"), "the model store's cache folder".into()));
        let relative_config = dir.path().join("sub").join("..").join("switchyard.toml");
        for (path, files, words) in [
            (config.clone(), 1, "the config file itself"),
            (relative_config, 1, "the config file itself"),
            (model.clone(), 1, "the file of model"),
            (dir.path().join("cache/x/t.jsonl"), 1, "cache folder"),
        ] {
            let found = problems(&record(&path, files), &protected);
            assert_eq!(found.len(), 1, "{path:?}");
            assert!(found[0].contains(words), "{found:?}");
        }
        assert!(problems(&record(&dir.path().join("t.jsonl"), 4), &protected).is_empty());
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&config, &link).unwrap();
        assert!(problems(&record(&link, 1), &protected)[0].contains("config file itself"));
        // Rotation would rename the sample over the config.
        let base = dir.path().join("t");
        std::fs::rename(&config, dir.path().join("t.2")).unwrap();
        let protected = Protected::config_file(&dir.path().join("t.2"));
        let found = problems(&record(&base, 3), &protected);
        assert!(found[0].contains("(a rotated file)") && found[0].contains("config file"), "{found:?}");
        assert!(problems(&record(&base, 2), &protected).is_empty());
    }

    #[test]
    fn only_regular_writable_files_in_writable_folders_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        let none = Protected::default();
        let fine = [dir.path().join("t.jsonl"), dir.path().join("new/sub/t.jsonl")];
        for path in &fine {
            assert!(problems(&record(path, 4), &none).is_empty(), "{path:?}");
        }
        let existing = dir.path().join("old.jsonl");
        std::fs::write(&existing, "{}\n").unwrap();
        assert!(problems(&record(&existing, 1), &none).is_empty());
        let not_a_folder = existing.join("t.jsonl");
        for (path, words) in [
            (PathBuf::from("/proc/self/mem"), "is in /proc"),
            (PathBuf::from("/dev/null"), "is in /dev"),
            (dir.path().to_path_buf(), "is a folder"),
            (not_a_folder, "is not a folder"),
        ] {
            let found = problems(&record(&path, 1), &none);
            assert_eq!(found.len(), 1, "{path:?}");
            assert!(found[0].contains(words), "{found:?}");
        }
    }
}
