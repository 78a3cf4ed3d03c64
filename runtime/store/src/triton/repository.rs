//! Reading a Triton model repository (`<model>/config.pbtxt`,
//! `<model>/<version>/model.onnx`) from a [`ModelStore`]: which models and
//! versions it holds ([`scan_repository`]), and everything needed to serve
//! them as local files ([`load_repository`]).
//!
//! Models that cannot be served (unparsable `config.pbtxt`, another
//! backend, no version with a model file, a folder name with `@`) are
//! listed in `rejected` with the reason; the others are served. Per model, everything not mapped
//! exactly is in its `warnings`.

use std::sync::Arc;

use futures::StreamExt;
use switchyard_runtime::spec::ModelSpec;

use crate::error::StoreError;
use crate::listing::ModelListing;
use crate::model_store::{LocalVersion, ModelStore};

use super::config::TritonConfig;
use super::fetcher::StoreFetcher;
use super::mapping::{map_config, MappedModel, SpecDefaults};

/// Name of a model's configuration file.
pub const CONFIG_FILE: &str = "config.pbtxt";

/// What joins a model's name and an older version's number in the name
/// it is served by ([`served_name`]); a model folder with it in its name
/// is refused, so that no folder can take an older version's name.
pub const VERSION_SEPARATOR: char = '@';

/// Versions pulled at once by [`load_repository`].
const PULLS_AT_ONCE: usize = 4;

/// One servable model of the repository.
#[derive(Debug, Clone)]
pub struct TritonModel {
    /// The model folder's name (= `config.pbtxt`'s `name` when given).
    pub name: String,
    /// The parsed configuration.
    pub config: TritonConfig,
    /// Its Switchyard settings.
    pub mapped: MappedModel,
    /// Versions to serve, newest first (by `version_policy`, among version
    /// folders that hold the model file).
    pub versions: Vec<u64>,
    /// The model folder as listed.
    pub listing: ModelListing,
    /// Everything not mapped exactly, and repository oddities (folders that
    /// are not versions, versions without a model file).
    pub warnings: Vec<String>,
}

/// The result of [`scan_repository`].
#[derive(Debug, Clone, Default)]
pub struct RepositoryScan {
    /// Servable models, by name.
    pub models: Vec<TritonModel>,
    /// Models that cannot be served, with the reason.
    pub rejected: Vec<(String, StoreError)>,
    /// True when the store was unreachable and the cache answered.
    pub from_cache: bool,
}

/// Lists the repository and reads each model's configuration (see the
/// module docs). Fails only when the repository itself cannot be listed.
pub async fn scan_repository(
    store: &ModelStore,
    defaults: &SpecDefaults,
) -> Result<RepositoryScan, StoreError> {
    let listing = store.list().await?;
    let mut scan = RepositoryScan { from_cache: listing.from_cache, ..RepositoryScan::default() };
    for (name, model) in &listing.models {
        if name.contains(VERSION_SEPARATOR) {
            let reason = format!(
                "'{VERSION_SEPARATOR}' names an older version of a model (<model>{VERSION_SEPARATOR}<version>, see version_policy); rename the folder"
            );
            scan.rejected.push((name.clone(), StoreError::RefusedFolder { folder: name.clone(), reason }));
            continue;
        }
        match read_model(store, name, model, defaults).await {
            Ok(m) => scan.models.push(m),
            Err(e) => scan.rejected.push((name.clone(), e)),
        }
    }
    Ok(scan)
}

async fn read_model(
    store: &ModelStore,
    name: &str,
    listing: &ModelListing,
    defaults: &SpecDefaults,
) -> Result<TritonModel, StoreError> {
    let invalid = |file: String, reason: String| StoreError::InvalidModelConfig {
        model: name.to_string(),
        file,
        reason,
    };
    let mut warnings = Vec::new();
    let config = match listing.files.get(CONFIG_FILE) {
        Some(info) => {
            let bytes = store.read_model_file(name, CONFIG_FILE, info).await?;
            let text =
                String::from_utf8(bytes).map_err(|_| invalid(CONFIG_FILE.into(), "not UTF-8".into()))?;
            TritonConfig::parse(&text).map_err(|(pos, reason)| {
                let file = pos.map_or(CONFIG_FILE.to_string(), |(l, c)| format!("{CONFIG_FILE}:{l}:{c}"));
                invalid(file, reason)
            })?
        }
        None => {
            warnings.push(format!("no {CONFIG_FILE}: Triton's defaults (one CPU worker, no batching)"));
            TritonConfig::defaults()
        }
    };
    if let Some(declared) = config.name.as_deref().filter(|n| *n != name) {
        return Err(invalid(
            CONFIG_FILE.into(),
            format!("name {declared:?} differs from the folder name {name:?}"),
        ));
    }
    let mapped = map_config(&config, defaults).map_err(|reason| invalid(CONFIG_FILE.into(), reason))?;
    warnings.extend(mapped.warnings.iter().cloned());
    for dir in &listing.ignored {
        warnings.push(format!("folder {dir:?} is not a version (a positive integer); ignored"));
    }
    let file = &config.default_model_filename;
    let mut available = Vec::new();
    for (version, files) in &listing.versions {
        if files.files.contains_key(file) {
            available.push(*version);
        } else {
            warnings.push(format!("version {version} has no {file}; skipped"));
        }
    }
    let selection = config.version_policy.select(&available);
    for v in &selection.missing {
        warnings.push(format!("version_policy names version {v}, which is not in the repository"));
    }
    if selection.versions.is_empty() {
        return Err(StoreError::NotFound {
            store: store.uri().to_string(),
            what: format!(
                "a version of model '{name}' with {file} (version_policy {:?})",
                config.version_policy
            ),
        });
    }
    Ok(TritonModel {
        name: name.to_string(),
        versions: selection.versions,
        listing: listing.clone(),
        config,
        mapped,
        warnings,
    })
}

/// The runtime name of a served version: the model's own name for its
/// newest selected version, `<model>@<version>` for older ones (a
/// `version_policy` that serves several).
pub fn served_name(model: &str, version: u64, newest: bool) -> String {
    if newest {
        model.to_string()
    } else {
        format!("{model}{VERSION_SEPARATOR}{version}")
    }
}

/// A repository made ready to serve: specs whose files are local.
#[derive(Debug, Clone, Default)]
pub struct LoadedRepository {
    /// One spec per served version (see [`served_name`]), model file local.
    pub specs: Vec<ModelSpec>,
    /// The local versions behind `specs`; keep them as long as the specs
    /// are served (they keep the files in the cache).
    pub versions: Vec<LocalVersion>,
    /// The models, with their configuration, versions and warnings.
    pub models: Vec<TritonModel>,
    /// Models (or `<model>@<version>`s) that cannot be served, and why:
    /// the scan's rejections plus versions that could not be pulled
    /// (e.g. [`StoreError::NotCached`] while the store is down).
    pub rejected: Vec<(String, StoreError)>,
    /// True when the store was unreachable and the cache answered.
    pub from_cache: bool,
}

/// Scans the repository and makes every selected version local (pulling
/// into the cache as needed, [`PULLS_AT_ONCE`] at a time). With
/// `defaults.warmup` off, versions of an object store that are not cached
/// yet are not pulled: their specs carry a [`StoreFetcher`] source that
/// pulls them on the model's first load. Every store model's graph is
/// checked against its declared inputs and outputs when it is probed.
pub async fn load_repository(
    store: &Arc<ModelStore>,
    defaults: &SpecDefaults,
) -> Result<LoadedRepository, StoreError> {
    let scan = scan_repository(store, defaults).await?;
    let runtime = tokio::runtime::Handle::current();
    let wanted: Vec<(&TritonModel, u64, bool)> = scan
        .models
        .iter()
        .flat_map(|m| m.versions.iter().enumerate().map(move |(i, v)| (m, *v, i == 0)))
        .collect();
    let on_demand = |m: &TritonModel, v: u64| -> Option<std::path::PathBuf> {
        let listing = m.listing.versions.get(&v)?;
        let dir = store.cache_dir_of(&m.name, v)?;
        (!defaults.warmup && !store.is_cached(&m.name, v, listing)).then_some(dir)
    };
    // Owned inputs, so the future is `Send` for any caller's runtime.
    let jobs: Vec<_> = wanted
        .iter()
        .map(|(m, v, _)| {
            let deferred = on_demand(m, *v);
            let (store, name, version) = (Arc::clone(store), m.name.clone(), *v);
            let listing = m.listing.versions.get(v).cloned();
            async move {
                match deferred {
                    Some(dir) => Ok(Pulled::Deferred(dir)),
                    None => {
                        store.materialize_listed(&name, version, listing.as_ref()).await.map(Pulled::Local)
                    }
                }
            }
        })
        .collect();
    let pulls = futures::stream::iter(jobs).buffered(PULLS_AT_ONCE).collect::<Vec<_>>().await;
    let mut loaded = LoadedRepository {
        from_cache: scan.from_cache,
        rejected: scan.rejected.clone(),
        ..Default::default()
    };
    for ((model, version, newest), pulled) in wanted.iter().zip(pulls) {
        let name = served_name(&model.name, *version, *newest);
        let file = &model.config.default_model_filename;
        let source = StoreFetcher::source(
            store,
            &name,
            &model.name,
            *version,
            model.listing.versions.get(version).cloned(),
            &model.config,
            runtime.clone(),
        );
        let path = match pulled {
            Ok(Pulled::Local(local)) => {
                let path = local.file(file);
                loaded.versions.push(local);
                path
            }
            Ok(Pulled::Deferred(dir)) => dir.join(file),
            Err(e) => {
                loaded.rejected.push((name, e));
                continue;
            }
        };
        let mut spec = model.mapped.spec(&name, *version, path, defaults);
        spec.source = Some(source);
        loaded.specs.push(spec);
    }
    loaded.models = scan.models;
    Ok(loaded)
}

/// A selected version: local now, or pulled on first load into `dir`.
enum Pulled {
    Local(LocalVersion),
    Deferred(std::path::PathBuf),
}
