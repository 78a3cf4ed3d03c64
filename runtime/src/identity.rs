//! Which file a model was loaded from, as far as the file system can say
//! without reading it: size, modification time, device and inode. Used to
//! tell whether a model file was replaced on disk (a reload must build a
//! new model; an unchanged one keeps its sessions).
//!
//! `cp new.onnx model.onnx` changes the size or modification time, `mv`
//! changes the inode; a copy that preserves size and timestamps over the
//! same inode (`cp -p` of an equally long file) is not detected: `touch`
//! the file to force it.

use std::path::Path;
use std::time::UNIX_EPOCH;

/// A model file's identity when it was registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// Size in bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the Unix epoch (0 if unknown).
    pub modified_ns: u128,
    /// Device number (0 where the platform has none).
    pub device: u64,
    /// Inode number (0 where the platform has none).
    pub inode: u64,
}

impl FileIdentity {
    /// The identity of the file at `path`; `None` when it cannot be read.
    pub fn of(path: &Path) -> Option<FileIdentity> {
        let meta = std::fs::metadata(path).ok()?;
        let modified_ns =
            meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
        let (device, inode) = node(&meta);
        Some(FileIdentity { len: meta.len(), modified_ns, device, inode })
    }
}

#[cfg(unix)]
fn node(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn node(_meta: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rewriting_or_replacing_a_file_changes_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.onnx");
        std::fs::write(&path, b"first").unwrap();
        let first = FileIdentity::of(&path).unwrap();
        assert_eq!(FileIdentity::of(&path), Some(first), "stable while untouched");
        std::fs::write(&path, b"second, longer").unwrap();
        let rewritten = FileIdentity::of(&path).unwrap();
        assert_ne!(first, rewritten);
        let other = dir.path().join("other.onnx");
        std::fs::write(&other, b"second, longer").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_ne!(FileIdentity::of(&path).unwrap().inode, rewritten.inode, "mv gives a new inode");
        assert_eq!(FileIdentity::of(&dir.path().join("missing")), None);
    }
}
