//! Tests of the disk cache: atomic installs, leases, LRU eviction under
//! the size bound, and what survives a restart.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use super::DiskCache;
use crate::listing::ObjectInfo;
use crate::manifest::VersionManifest;
use crate::settings::DiskCacheSettings;

fn manifest(model: &str, version: u64, size: u64) -> VersionManifest {
    let info =
        ObjectInfo { key: format!("{model}/{version}/model.onnx"), size, etag: Some(format!("e{version}")) };
    VersionManifest {
        model: model.into(),
        version,
        store: "s3://bkt".into(),
        files: BTreeMap::from([("model.onnx".to_string(), info)]),
    }
}

/// Downloads (by hand) a version of `size` bytes and installs it.
fn put(cache: &DiskCache, model: &str, version: u64, size: u64) -> super::DiskCacheLease {
    let tmp = cache.temp_dir().unwrap();
    std::fs::write(tmp.join("model.onnx"), vec![7u8; size as usize]).unwrap();
    cache.install(&manifest(model, version, size), &tmp).unwrap().0
}

fn open(dir: &Path, max_bytes: u64) -> DiskCache {
    DiskCache::open(&DiskCacheSettings { dir: dir.into(), max_bytes }, "s3://bkt|None", "s3://bkt").unwrap()
}

#[test]
fn installed_versions_are_complete_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 20);
    assert!(cache.lookup("m", 1).is_none());
    drop(put(&cache, "m", 1, 100));
    assert_eq!(cache.lookup("m", 1).unwrap().bytes(), 100);
    assert_eq!(std::fs::read(cache.version_dir("m", 1).join("model.onnx")).unwrap().len(), 100);
    let reopened = open(dir.path(), 1 << 20);
    assert_eq!(reopened.versions(), [("m".to_string(), 1)]);
    assert_eq!(reopened.bytes(), 100);
    assert!(reopened.listing().models["m"].versions.contains_key(&1));
}

#[test]
fn a_folder_without_manifest_or_with_a_short_file_is_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 20);
    drop(put(&cache, "m", 1, 100));
    // A crash in the middle of a replacement: a version folder without manifest.
    let half = cache.version_dir("m", 2);
    std::fs::create_dir_all(&half).unwrap();
    std::fs::write(half.join("model.onnx"), b"half").unwrap();
    assert!(cache.lookup("m", 2).is_none());
    // A file cut short behind the cache's back.
    std::fs::write(cache.version_dir("m", 1).join("model.onnx"), b"short").unwrap();
    assert!(cache.lookup("m", 1).is_none(), "sizes are checked");
    let reopened = open(dir.path(), 1 << 20);
    assert!(!half.exists(), "incomplete folders are deleted when the cache opens");
    assert!(reopened.versions().iter().all(|(_, v)| *v != 2));
}

#[test]
fn eviction_takes_the_least_recently_used_unleased_version() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 250);
    drop(put(&cache, "a", 1, 100));
    let held = put(&cache, "b", 1, 100); // leased: never evicted
    drop(cache.lease("a", 1)); // a is now more recently used than b, but b is leased
    drop(put(&cache, "c", 1, 100)); // 300 > 250: a must go (b is leased)
    assert_eq!(cache.versions(), [("b".to_string(), 1), ("c".to_string(), 1)]);
    assert!(!cache.version_dir("a", 1).exists());
    drop(held);
    drop(cache.lease("c", 1)); // b is now the least recently used, and free
    drop(put(&cache, "d", 1, 100));
    assert_eq!(cache.versions(), [("c".to_string(), 1), ("d".to_string(), 1)]);
}

#[test]
fn leased_versions_may_exceed_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 150);
    let a = put(&cache, "a", 1, 100);
    let b = put(&cache, "b", 1, 100);
    assert_eq!(cache.bytes(), 200, "both are served, so both stay");
    let again = a.clone();
    drop(a);
    drop(b);
    drop(put(&cache, "c", 1, 10));
    assert_eq!(cache.versions(), [("a".to_string(), 1), ("c".to_string(), 1)], "the clone still holds a");
    drop(again);
}

#[test]
fn replacing_a_version_keeps_one_copy() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 20);
    drop(put(&cache, "m", 1, 100));
    drop(put(&cache, "m", 1, 60));
    assert_eq!(cache.lookup("m", 1).unwrap().bytes(), 60);
    assert_eq!(cache.bytes(), 60);
    let leftovers = std::fs::read_dir(dir.path().join("tmp")).unwrap().count();
    assert_eq!(leftovers, 0, "no temporary folder is left behind");
}

#[test]
fn model_files_are_kept_for_offline_use() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 20);
    let info = ObjectInfo { key: "m/config.pbtxt".into(), size: 9, etag: Some("x".into()) };
    cache.put_model_file("m", "config.pbtxt", &info, b"name: \"m\"").unwrap();
    let (read_info, bytes) = cache.model_file("m", "config.pbtxt").unwrap();
    assert_eq!((read_info, bytes.as_slice()), (info, b"name: \"m\"".as_slice()));
    assert!(open(dir.path(), 1 << 20).listing().models["m"].files.contains_key("config.pbtxt"));
}

#[test]
fn a_second_process_installing_the_same_version_keeps_the_first_copy() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    // Two caches on one folder: two gateways sharing a volume.
    let (first, second) = (open(dir.path(), 1 << 20), open(dir.path(), 1 << 20));
    let second_tmp = second.temp_dir().unwrap();
    std::fs::write(second_tmp.join("model.onnx"), vec![7u8; 100]).unwrap();
    drop(put(&first, "m", 1, 100));
    let placed = cache_inode(&first);
    // The second finishes its download of the same objects later.
    drop(second.install(&manifest("m", 1, 100), &second_tmp).unwrap());
    assert_eq!(cache_inode(&first), placed, "the folder in place was swapped");
    assert!(!second_tmp.exists());
    assert_eq!(second.lookup("m", 1).unwrap().bytes(), 100);
    // Different objects under the same version (re-uploaded) do replace it.
    let tmp = second.temp_dir().unwrap();
    std::fs::write(tmp.join("model.onnx"), vec![8u8; 120]).unwrap();
    drop(second.install(&manifest("m", 1, 120), &tmp).unwrap());
    assert_eq!(first.lookup("m", 1).unwrap().bytes(), 120);

    fn cache_inode(cache: &DiskCache) -> u64 {
        std::fs::metadata(cache.version_dir("m", 1).join("model.onnx")).unwrap().ino()
    }
}
