//! The model store against a real S3-compatible server (moto, started per
//! test): cold pulls, restarts without network, corrupt objects, a store
//! that goes down, shared downloads, new versions, wrong credentials.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../tests/common/mod.rs"]
mod common;
mod store_support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use store_support::{payload, put, settings, Moto, Proxy, MARKER};
use switchyard_runtime::ErrorClass;
use switchyard_store::{AwsEnv, ModelStore, RepositoryChange, StoreError, StoreSettings, VersionSource};

const MODEL: &str = "digits/1/model.onnx";

fn digits_bytes() -> Vec<u8> {
    std::fs::read(store_support::workspace().join("models/digits-cheap.onnx"))
        .expect("models/ (scripts/setup.sh)")
}

fn open(settings: StoreSettings, env: &AwsEnv) -> Arc<ModelStore> {
    ModelStore::open(settings, env).unwrap()
}

fn tmp_entries(cache: &std::path::Path) -> usize {
    std::fs::read_dir(cache.join("tmp")).map(|d| d.count()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_pull_then_restart_without_network_serves_the_cache() {
    let mut moto = Moto::start();
    let up = moto.uploader();
    put(&up, &format!("repo/{MODEL}"), digits_bytes()).await;
    put(&up, "repo/digits/config.pbtxt", b"max_batch_size: 8".to_vec()).await;
    let cache = tempfile::tempdir().unwrap();

    let store = open(settings(&moto.endpoint, "repo", cache.path()), &moto.env());
    let listing = store.list().await.unwrap();
    assert!(!listing.from_cache);
    assert_eq!(listing.models["digits"].versions.keys().copied().collect::<Vec<_>>(), [1]);
    let local = store.materialize("digits", 1).await.unwrap();
    assert_eq!(local.source, VersionSource::Downloaded);
    assert_eq!(std::fs::read(local.file("model.onnx")).unwrap(), digits_bytes());
    let again = store.materialize("digits", 1).await.unwrap();
    assert_eq!(again.source, VersionSource::Cached, "second call: the store confirms the cached copy");
    assert_eq!(store.stats().versions_downloaded, 1);
    drop((local, again, store));

    moto.stop();
    let restarted = open(settings(&moto.endpoint, "repo", cache.path()), &moto.env());
    let offline = restarted.list().await.unwrap();
    assert!(offline.from_cache, "the store is down: the listing comes from the cache");
    assert!(offline.models["digits"].versions.contains_key(&1));
    let local = restarted.materialize("digits", 1).await.unwrap();
    assert_eq!(local.source, VersionSource::CachedOffline);
    assert_eq!(restarted.stats().gets, 0, "nothing was asked of the dead store for the model");

    // The cached file is a servable model.
    let repo = common::repo(vec![{
        let mut s = common::spec("digits", "tiny-classifier.onnx", 1, 0, 16);
        s.path = local.file("model.onnx");
        s
    }]);
    let out = common::within(repo.infer("digits", None, common::classify(2, 1))).await.unwrap();
    assert!(out.outputs.iter().any(|(name, _)| name == "probabilities"));

    // An uncached version cannot be served, and says why (503 class).
    let err = restarted.materialize("digits", 2).await.unwrap_err();
    assert!(matches!(err, StoreError::NotCached { version: 2, .. }), "{err}");
    assert_eq!(err.class(), ErrorClass::Unavailable);
    assert!(err.to_string().contains("not cached and the model store is unreachable"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_files_come_in_parallel_ranges_and_arrive_whole() {
    let moto = Moto::start();
    let up = moto.uploader();
    let big = payload(5 * 1024 * 1024 + 123, MARKER);
    put(&up, "big/1/model.onnx", big.clone()).await;
    put(&up, "big/1/model.onnx.data", b"external weights".to_vec()).await;
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(&moto.endpoint, "", cache.path());
    s.transfer.part_bytes = 512 * 1024;
    s.transfer.concurrency = 4;
    let store = open(s, &moto.env());
    let local = store.materialize("big", 1).await.unwrap();
    assert_eq!(std::fs::read(local.file("model.onnx")).unwrap(), big);
    assert_eq!(std::fs::read(local.file("model.onnx.data")).unwrap(), b"external weights");
    let stats = store.stats();
    assert_eq!(stats.gets, 11 + 1, "11 ranges of 512 KiB for the large file, one GET for the small one");
    assert_eq!(stats.bytes_downloaded, big.len() as u64 + 16);
    assert_eq!(tmp_entries(cache.path()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_objects_are_rejected_and_never_cached() {
    let moto = Moto::start();
    let up = moto.uploader();
    let data = payload(300_000, MARKER);
    put(&up, "m/1/model.onnx", data.clone()).await;
    let proxy = Proxy::start(&moto.endpoint).await;
    let cache = tempfile::tempdir().unwrap();
    let store = open(settings(&proxy.endpoint, "", cache.path()), &moto.env());

    proxy.corrupt.store(true, Ordering::SeqCst);
    let err = store.materialize("m", 1).await.unwrap_err();
    assert!(matches!(err, StoreError::Integrity { check: "etag md5", .. }), "{err}");
    assert_eq!(err.class(), ErrorClass::Unavailable);
    assert!(store.materialize("m", 1).await.is_err(), "still corrupt: still refused");
    assert_eq!(store.cache_bytes(), 0, "nothing was cached");
    assert_eq!(tmp_entries(cache.path()), 0, "the bad download left nothing behind");

    proxy.corrupt.store(false, Ordering::SeqCst);
    let local = store.materialize("m", 1).await.unwrap();
    assert_eq!(local.source, VersionSource::Downloaded, "nothing bad was cached: it is downloaded again");
    assert_eq!(std::fs::read(local.file("model.onnx")).unwrap(), data);

    // A checksum object that disagrees with the content is refused too.
    put(&up, "m/2/model.onnx", data.clone()).await;
    put(&up, "m/2/model.onnx.sha256", format!("{}  model.onnx\n", "ab".repeat(32)).into_bytes()).await;
    let err = store.materialize("m", 2).await.unwrap_err();
    assert!(matches!(err, StoreError::Integrity { check: "sha256 object", .. }), "{err}");
}

/// Parts arrive interleaved and are written in place; the ETag's MD5 is
/// still taken in file order, so a flipped byte in a middle part is caught.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_part_of_a_ranged_download_is_rejected() {
    let moto = Moto::start();
    let up = moto.uploader();
    let data = payload(3 * 1024 * 1024 + 77, MARKER);
    put(&up, "m/1/model.onnx", data.clone()).await;
    let proxy = Proxy::start(&moto.endpoint).await;
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(&proxy.endpoint, "", cache.path());
    s.transfer.part_bytes = 256 * 1024;
    s.transfer.concurrency = 5;
    let store = open(s, &moto.env());

    proxy.corrupt.store(true, Ordering::SeqCst);
    let err = store.materialize("m", 1).await.unwrap_err();
    assert!(matches!(err, StoreError::Integrity { check: "etag md5", .. }), "{err}");
    assert_eq!(tmp_entries(cache.path()), 0, "the bad download left nothing behind");

    proxy.corrupt.store(false, Ordering::SeqCst);
    let local = store.materialize("m", 1).await.unwrap();
    assert_eq!(std::fs::read(local.file("model.onnx")).unwrap(), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pulls_of_one_version_share_one_download() {
    let moto = Moto::start();
    let up = moto.uploader();
    let data = payload(2 * 1024 * 1024, MARKER);
    put(&up, "shared/1/model.onnx", data.clone()).await;
    let proxy = Proxy::start(&moto.endpoint).await;
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(&proxy.endpoint, "", cache.path());
    s.transfer.part_bytes = 4 * 1024 * 1024; // one GET for the file
    let store = open(s, &moto.env());
    let pulls: Vec<_> = (0..8)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.materialize("shared", 1).await })
        })
        .collect();
    for pull in pulls {
        let local = pull.await.unwrap().unwrap();
        assert_eq!(std::fs::metadata(local.file("model.onnx")).unwrap().len(), data.len() as u64);
    }
    assert_eq!(store.stats().versions_downloaded, 1, "one download, shared");
    let downloads = store.stats().gets;
    assert_eq!(downloads, 1, "one GET of the model file");
    // The proxy saw every request: at most one LIST per caller that did
    // not join the download, and exactly one GET of the object.
    let lists = store.stats().lists as usize;
    assert_eq!(proxy.gets.load(Ordering::SeqCst), lists + 1, "GETs on the wire = LISTs + one object GET");

    // Two stores (two gateways) on one cache folder pulling at once both
    // succeed and leave one complete copy.
    let other_cache = tempfile::tempdir().unwrap();
    let a = open(settings(&moto.endpoint, "", other_cache.path()), &moto.env());
    let b = open(settings(&moto.endpoint, "", other_cache.path()), &moto.env());
    let (ra, rb) = tokio::join!(a.materialize("shared", 1), b.materialize("shared", 1));
    assert_eq!(std::fs::read(ra.unwrap().file("model.onnx")).unwrap(), data);
    assert_eq!(std::fs::read(rb.unwrap().file("model.onnx")).unwrap(), data);
    assert_eq!(tmp_entries(other_cache.path()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_notices_new_and_replaced_versions() {
    let moto = Moto::start();
    let up = moto.uploader();
    put(&up, "m/config.pbtxt", b"max_batch_size: 4".to_vec()).await;
    put(&up, "m/1/model.onnx", b"one".to_vec()).await;
    let cache = tempfile::tempdir().unwrap();
    let store = open(settings(&moto.endpoint, "", cache.path()), &moto.env());
    assert!(store.poll().await.unwrap().is_empty(), "first poll: the baseline");
    assert!(store.poll().await.unwrap().is_empty(), "nothing changed");
    put(&up, "m/2/model.onnx", b"two".to_vec()).await;
    assert_eq!(store.poll().await.unwrap(), [RepositoryChange::VersionAdded("m".into(), 2)]);
    let v2 = store.materialize("m", 2).await.unwrap();
    assert_eq!(std::fs::read(v2.file("model.onnx")).unwrap(), b"two");
    put(&up, "m/1/model.onnx", b"uno".to_vec()).await;
    put(&up, "m/config.pbtxt", b"max_batch_size: 8".to_vec()).await;
    let changes = store.poll().await.unwrap();
    assert_eq!(
        changes,
        [RepositoryChange::ModelFilesChanged("m".into()), RepositoryChange::VersionChanged("m".into(), 1)]
    );
    let v1 = store.materialize("m", 1).await.unwrap();
    assert_eq!(std::fs::read(v1.file("model.onnx")).unwrap(), b"uno", "a replaced object is pulled again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_are_a_clear_error_and_profiles_work() {
    let moto = Moto::start();
    put(&moto.uploader(), "m/1/model.onnx", b"x".to_vec()).await;
    let cache = tempfile::tempdir().unwrap();
    let wrong = AwsEnv::from_vars(
        [("AWS_ACCESS_KEY_ID", moto.key_id.as_str()), ("AWS_SECRET_ACCESS_KEY", "not-the-secret")],
        None,
    );
    let store = open(settings(&moto.endpoint, "", cache.path()), &wrong);
    let err = store.list().await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Credentials { .. }), "{text}");
    assert!(
        text.contains("SignatureDoesNotMatch") && text.contains("environment (AWS_ACCESS_KEY_ID)"),
        "{text}"
    );
    assert!(!text.contains("not-the-secret") && !format!("{err:?}").contains("not-the-secret"), "{text}");
    assert_eq!(err.class(), ErrorClass::Unavailable);
    let err = store.materialize("m", 1).await.unwrap_err();
    assert!(matches!(err, StoreError::Credentials { .. }), "{err}");

    // The same key from a profile in a shared credentials file works.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".aws")).unwrap();
    let file =
        format!("[ci]\naws_access_key_id = {}\naws_secret_access_key = {}\n", moto.key_id, moto.secret);
    std::fs::write(home.path().join(".aws/credentials"), file).unwrap();
    let env = AwsEnv::from_vars([("AWS_PROFILE", "ci")], Some(home.path().into()));
    let store = open(settings(&moto.endpoint, "", cache.path()), &env);
    assert!(store.list().await.unwrap().models.contains_key("m"));

    // No such bucket: a clear not-found.
    let mut s = settings(&moto.endpoint, "", cache.path());
    s.uri = switchyard_store::StoreUri::parse("s3://no-such-bucket", "u").unwrap();
    let err = open(s, &moto.env()).list().await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
}

#[test]
fn a_missing_model_file_in_the_store_is_not_found() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let moto = Moto::start();
        put(&moto.uploader(), "m/1/model.onnx", b"x".to_vec()).await;
        let cache = tempfile::tempdir().unwrap();
        let store = open(settings(&moto.endpoint, "", cache.path()), &moto.env());
        let err = store.materialize("m", 7).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
        assert_eq!(err.class(), ErrorClass::NotFound);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_download_never_leaves_a_loadable_half_file() {
    let mut moto = Moto::start();
    let up = moto.uploader();
    let data = payload(2 * 1024 * 1024, MARKER);
    put(&up, "m/1/model.onnx", data.clone()).await;
    let proxy = Proxy::start(&moto.endpoint).await;
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(&proxy.endpoint, "", cache.path());
    s.transfer.part_bytes = 4 * 1024 * 1024; // one GET, cut half-way
    let store = open(s.clone(), &moto.env());

    store.list().await.unwrap();
    proxy.cut_after.store(700_000, Ordering::SeqCst);
    let err = store.materialize("m", 1).await.unwrap_err();
    assert!(store.stats().bytes_downloaded < data.len() as u64, "the body was cut: {err}");
    assert_eq!(store.cache_bytes(), 0, "nothing was installed: {err}");
    assert_eq!(tmp_entries(cache.path()), 0, "the partial file was removed");
    let installed = walk_files(cache.path());
    assert!(!installed.iter().any(|p| p.ends_with("model.onnx")), "no model.onnx anywhere: {installed:?}");
    drop(store);

    // A restart on the same cache with the store gone: nothing half-pulled
    // is served, the version is "not cached".
    moto.stop();
    let restarted = open(s, &moto.env());
    let err = restarted.materialize("m", 1).await.unwrap_err();
    assert!(
        matches!(err, StoreError::NotCached { version: 1, .. } | StoreError::Unreachable { .. }),
        "{err}"
    );
    assert_eq!(err.class(), ErrorClass::Unavailable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_interrupted_once_completes_on_the_next_request() {
    let moto = Moto::start();
    let up = moto.uploader();
    let data = payload(1024 * 1024, MARKER);
    put(&up, "m/1/model.onnx", data.clone()).await;
    let proxy = Proxy::start(&moto.endpoint).await;
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(&proxy.endpoint, "", cache.path());
    s.transfer.max_retries = 0;
    s.transfer.offline_grace = std::time::Duration::from_millis(300);
    let store = open(s, &moto.env());
    store.list().await.unwrap();
    proxy.cut_after.store(300_000, Ordering::SeqCst);
    assert!(store.materialize("m", 1).await.is_err());
    proxy.cut_after.store(0, Ordering::SeqCst);
    // Within the offline grace the store is not asked again: a clear 503.
    let err = store.materialize("m", 1).await.unwrap_err();
    assert!(matches!(err, StoreError::NotCached { .. }), "{err}");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let local = store.materialize("m", 1).await.unwrap();
    assert_eq!(local.source, VersionSource::Downloaded);
    assert_eq!(std::fs::read(local.file("model.onnx")).unwrap(), data);
    assert_eq!(tmp_entries(cache.path()), 0);
}

fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}
