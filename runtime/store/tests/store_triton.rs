//! Triton-layout repositories written by the model generator
//! (`models/triton_repo.py`: digits-cheap, digits-heavy, minilm-l6), read
//! from a local folder and from a real S3-compatible server (moto), turned
//! into specs with the configured pools and batching, and served.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../tests/common/mod.rs"]
mod common;
mod store_support;

use std::sync::Arc;
use std::time::Duration;

use store_support::{put, settings, triton_repo, upload_dir, Moto};
use switchyard_runtime::{DeviceKind, InferenceRequest, ModelRepository, ModelSpec, Tensor};
use switchyard_store::triton::{check_signature, load_repository, LoadedRepository, SpecDefaults};
use switchyard_store::{
    AwsEnv, ModelStore, RepositoryChange, StoreError, StoreSettings, StoreUri, VersionSource,
};

const ALL: &str = "digits-cheap,digits-heavy,minilm-l6";

fn spec<'a>(loaded: &'a LoadedRepository, name: &str) -> &'a ModelSpec {
    loaded
        .specs
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no spec {name}: {:?}", loaded.rejected))
}

/// The pools and batching `models/triton_repo.py`'s configs ask for.
fn assert_mapped(loaded: &LoadedRepository) {
    let cheap = spec(loaded, "digits-cheap");
    assert_eq!(
        (cheap.batching.max_batch_size, cheap.batching.max_queue_delay),
        (64, Duration::from_micros(200))
    );
    assert_eq!(cheap.pools.len(), 1);
    assert_eq!(
        (cheap.pools[0].device, cheap.pools[0].workers, cheap.pools[0].intra_op_threads),
        (DeviceKind::Cpu, 1, 1)
    );
    let heavy = spec(loaded, "digits-heavy");
    assert_eq!(heavy.batching.max_batch_size, 32, "preferred_batch_size [32] caps the batches");
    assert_eq!(heavy.batching.max_queue_delay, Duration::from_micros(300));
    assert_eq!((heavy.pools[0].name.as_str(), heavy.pools[0].workers), ("cpu", 2), "instance_group count 2");
    let minilm = spec(loaded, "minilm-l6");
    assert_eq!((minilm.batching.max_batch_size, minilm.batching.queue_capacity), (32, 256));
    assert_eq!(minilm.batching.max_queue_delay, Duration::from_millis(1));
    assert_eq!(minilm.pools[0].workers, 2);
    for m in &loaded.models {
        assert!(m.warnings.is_empty(), "{}: {:?}", m.name, m.warnings);
    }
}

fn tokens(rows: usize, len: usize) -> InferenceRequest {
    let ids: Vec<i64> =
        (0..rows * len).map(|i| if i % len == 0 { 101 } else { 2000 + (i % 50) as i64 }).collect();
    let t = |values: Vec<i64>| {
        Tensor::new(
            switchyard_runtime::DataType::I64,
            vec![rows, len],
            switchyard_runtime::TensorData::Fixed(bytes::Bytes::from(
                values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
            )),
        )
        .unwrap()
    };
    InferenceRequest::new(vec![
        ("input_ids".into(), t(ids)),
        ("attention_mask".into(), t(vec![1; rows * len])),
        ("token_type_ids".into(), t(vec![0; rows * len])),
    ])
}

/// Registers the specs, checks each declared signature against its graph,
/// and runs digits and MiniLM once.
async fn serve(loaded: &LoadedRepository) {
    common::init();
    let repo: Arc<ModelRepository> = ModelRepository::new(loaded.specs.clone()).unwrap();
    assert!(repo.failures().is_empty(), "{:?}", repo.failures());
    for model in &loaded.models {
        let problems = check_signature(&model.config, &repo.signature(&model.name).unwrap());
        assert!(problems.is_empty(), "{}: {problems:?}", model.name);
    }
    let out = common::within(repo.infer("digits-cheap", None, common::classify(3, 5))).await.unwrap();
    assert_eq!(out.outputs.iter().find(|(n, _)| n == "label").unwrap().1.shape(), [3]);
    let out = common::within(repo.infer("minilm-l6", None, tokens(2, 7))).await.unwrap();
    assert_eq!(out.outputs[0].1.shape(), [2, 384]);
    repo.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_triton_repository_is_served_with_its_pools_and_batching() {
    let dir = tempfile::tempdir().unwrap();
    triton_repo(dir.path(), ALL, 1, false);
    let uri = StoreUri::parse(&format!("file://{}", dir.path().display()), "uri").unwrap();
    let store =
        ModelStore::open(StoreSettings::new(uri, dir.path().join("unused-cache")), &AwsEnv::default())
            .unwrap();
    let loaded = load_repository(&store, &SpecDefaults::default()).await.unwrap();
    assert!(loaded.rejected.is_empty(), "{:?}", loaded.rejected);
    assert_eq!(loaded.specs.len(), 3);
    assert!(loaded.versions.iter().all(|v| v.source == VersionSource::InPlace));
    assert_eq!(spec(&loaded, "digits-cheap").path, dir.path().join("digits-cheap/1/model.onnx"));
    assert_mapped(&loaded);
    serve(&loaded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_triton_repository_in_s3_is_pulled_served_updated_and_survives_the_store_going_down() {
    let mut moto = Moto::start();
    let up = moto.uploader();
    let dir = tempfile::tempdir().unwrap();
    triton_repo(dir.path(), ALL, 1, true);
    upload_dir(&up, dir.path(), "triton").await;
    put(
        &up,
        "triton/broken/config.pbtxt",
        b"name: \"broken\"\nmax_batch_size: 4\ninstance_grup [ ]\n".to_vec(),
    )
    .await;
    put(&up, "triton/broken/1/model.onnx", b"x".to_vec()).await;
    let cache = tempfile::tempdir().unwrap();
    let endpoint = moto.endpoint.clone();
    let s = || -> StoreSettings { settings(&endpoint, "triton", cache.path()) };
    // Warm-up on: every version is pulled while the repository is loaded
    // (off, versions not cached are pulled on first load).
    let eager = SpecDefaults { warmup: true, ..SpecDefaults::default() };

    let store = ModelStore::open(s(), &moto.env()).unwrap();
    let loaded = load_repository(&store, &eager).await.unwrap();
    let (name, err) = &loaded.rejected[0];
    assert_eq!(loaded.rejected.len(), 1);
    assert_eq!(name, "broken");
    assert!(
        err.to_string().contains("config.pbtxt:3:1") && err.to_string().contains("instance_grup"),
        "{err}"
    );
    assert!(loaded.versions.iter().all(|v| v.source == VersionSource::Downloaded));
    assert!(spec(&loaded, "minilm-l6").path.starts_with(cache.path()));
    assert_mapped(&loaded);
    serve(&loaded).await;

    // A new version appears: the poll sees it, a reload serves it.
    assert!(store.poll().await.unwrap().is_empty());
    let v2 = tempfile::tempdir().unwrap();
    triton_repo(v2.path(), "digits-heavy", 2, false);
    upload_dir(&up, &v2.path().join("digits-heavy/2"), "triton/digits-heavy/2").await;
    assert_eq!(store.poll().await.unwrap(), [RepositoryChange::VersionAdded("digits-heavy".into(), 2)]);
    let reloaded = load_repository(&store, &eager).await.unwrap();
    assert_eq!(spec(&reloaded, "digits-heavy").version, 2, "latest-1 policy: the new version");
    let sources: Vec<_> = reloaded.versions.iter().map(|v| (v.model.as_str(), v.version, v.source)).collect();
    assert!(sources.contains(&("digits-heavy", 2, VersionSource::Downloaded)), "{sources:?}");
    assert!(sources.contains(&("minilm-l6", 1, VersionSource::Cached)), "{sources:?}");
    drop((loaded, reloaded));

    // The store goes down: a restarted gateway serves what its cache holds.
    moto.stop();
    let restarted = ModelStore::open(s(), &moto.env()).unwrap();
    let offline = load_repository(&restarted, &eager).await.unwrap();
    assert!(offline.from_cache);
    assert!(offline.versions.iter().all(|v| v.source == VersionSource::CachedOffline));
    assert_eq!(spec(&offline, "digits-heavy").version, 2);
    assert_mapped(&offline);
    serve(&offline).await;
    let err = restarted.materialize("digits-cheap", 9).await.unwrap_err();
    assert!(matches!(err, StoreError::NotCached { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_warmup_off_versions_are_pulled_on_first_load_and_checked_against_their_config() {
    let moto = Moto::start();
    let up = moto.uploader();
    let dir = tempfile::tempdir().unwrap();
    triton_repo(dir.path(), "digits-cheap,digits-heavy", 1, false);
    // digits-heavy's config lies about its input's datatype.
    let config = dir.path().join("digits-heavy/config.pbtxt");
    std::fs::write(&config, std::fs::read_to_string(&config).unwrap().replace("TYPE_FP32", "TYPE_FP64"))
        .unwrap();
    upload_dir(&up, dir.path(), "triton").await;
    let cache = tempfile::tempdir().unwrap();
    let store = ModelStore::open(settings(&moto.endpoint, "triton", cache.path()), &moto.env()).unwrap();

    let loaded = load_repository(&store, &SpecDefaults::default()).await.unwrap();
    assert!(loaded.versions.is_empty(), "nothing pulled while loading the repository");
    assert!(!spec(&loaded, "digits-cheap").path.exists());
    assert_eq!(store.stats().versions_downloaded, 0);
    common::init();
    let repo = ModelRepository::new(loaded.specs.clone()).unwrap();
    assert!(repo.failures().is_empty(), "{:?}", repo.failures());
    // Registered from the declaration: the signature clients see.
    assert_eq!(repo.signature("digits-cheap").unwrap().inputs[0].shape, [-1, 64]);

    let out = common::within(repo.infer("digits-cheap", None, common::classify(3, 5))).await.unwrap();
    assert_eq!(out.outputs.iter().find(|(n, _)| n == "label").unwrap().1.shape(), [3]);
    assert!(spec(&loaded, "digits-cheap").path.exists());
    assert_eq!(store.stats().versions_downloaded, 1);

    let err = common::within(repo.infer("digits-heavy", None, common::classify(1, 5))).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("does not match its declared signature") && text.contains("FP64"), "{text}");
    assert_eq!(err.class(), switchyard_runtime::ErrorClass::Unavailable, "{err:?}");
    repo.shutdown();
}
