//! Pulling one model version from the store into the cache: its checksum
//! objects first (small), then its other files, several at once, each
//! checked ([`crate::integrity`]), all into a temporary folder that is
//! installed into the cache in one rename ([`crate::disk_cache`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStoreExt;

use crate::backend::{map_error, Backend};
use crate::disk_cache::{DiskCache, DiskCacheLease};
use crate::download::download;
use crate::error::StoreError;
use crate::integrity::{Expected, CHECKSUM_SUFFIX};
use crate::listing::{ObjectInfo, VersionListing};
use crate::manifest::VersionManifest;
use crate::settings::StoreSettings;
use crate::stats::StoreCounters;

/// What a pull needs from its store.
pub(crate) struct PullContext<'a> {
    pub backend: &'a Backend,
    pub cache: &'a DiskCache,
    pub settings: &'a StoreSettings,
    pub counters: &'a Arc<StoreCounters>,
}

/// Downloads `listing`'s files for `model`/`version` and installs them;
/// returns a lease on the installed version. Nothing is left behind on
/// failure.
pub(crate) async fn pull_version(
    ctx: &PullContext<'_>,
    model: &str,
    version: u64,
    listing: &VersionListing,
) -> Result<DiskCacheLease, StoreError> {
    let tmp = ctx.cache.temp_dir()?;
    let result = fetch_all(ctx, &tmp, listing).await;
    let installed = match result {
        Ok(()) => {
            let manifest = VersionManifest {
                model: model.to_string(),
                version,
                store: ctx.backend.name.clone(),
                files: listing.files.clone(),
            };
            let (cache, dir) = (ctx.cache.clone(), tmp.clone());
            tokio::task::spawn_blocking(move || cache.install(&manifest, &dir))
                .await
                .map_err(|e| StoreError::cache(&tmp, format!("install task failed: {e}")))?
        }
        Err(e) => Err(e),
    };
    if installed.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    let (lease, evicted) = installed?;
    ctx.counters.count_download();
    ctx.counters.add_evictions(evicted);
    Ok(lease)
}

async fn fetch_all(ctx: &PullContext<'_>, tmp: &Path, listing: &VersionListing) -> Result<(), StoreError> {
    let mut checksums: HashMap<&str, String> = HashMap::new();
    for (rel, info) in listing.files.iter().filter(|(rel, _)| rel.ends_with(CHECKSUM_SUFFIX)) {
        let bytes = fetch_small(ctx.backend, info, ctx.counters).await?;
        write_file(&tmp.join(rel), &bytes)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        checksums.insert(rel.trim_end_matches(CHECKSUM_SUFFIX), text);
    }
    let files: Vec<(&String, &ObjectInfo)> =
        listing.files.iter().filter(|(rel, _)| !rel.ends_with(CHECKSUM_SUFFIX)).collect();
    let mut plans = Vec::with_capacity(files.len());
    for (rel, info) in files {
        let expected = Expected::for_file(
            info,
            checksums.get(rel.as_str()).map(String::as_str),
            &ctx.settings.integrity,
        )?;
        if expected == Expected::SizeOnly {
            tracing::warn!(key = %info.key, "no checksum object and no single-part ETag: only the size is checked");
        }
        plans.push((tmp.join(rel), info, expected));
    }
    futures::stream::iter(plans.iter().map(Ok))
        .try_for_each_concurrent(4, |(dest, info, expected)| async move {
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(|e| StoreError::cache(parent, e))?;
            }
            download(ctx.backend, info, expected, dest, &ctx.settings.transfer, ctx.counters).await
        })
        .await
}

/// One small object in memory (checksum objects, `config.pbtxt`).
pub(crate) async fn fetch_small(
    backend: &Backend,
    info: &ObjectInfo,
    counters: &StoreCounters,
) -> Result<bytes::Bytes, StoreError> {
    counters.count_get();
    let location = ObjectPath::from(info.key.as_str());
    let got = backend.store.get(&location).await.map_err(|e| map_error(backend, &info.key, e))?;
    let bytes = got.bytes().await.map_err(|e| map_error(backend, &info.key, e))?;
    counters.add_bytes(bytes.len() as u64);
    Ok(bytes)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| StoreError::cache(parent, e))?;
    }
    std::fs::write(path, bytes).map_err(|e| StoreError::cache(path, e))
}
