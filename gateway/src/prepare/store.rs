//! `[repository] uri`: the model store's models made ready to serve, at
//! start-up, on `check-config` and on every reload (so a reload, by
//! `POST /admin/reload`, `SIGHUP`, the file or the store poller, picks up
//! new versions). The store is listed, each model's `config.pbtxt` mapped
//! and every selected version made local (pulled into the disk cache, one
//! shared download per version, or found there); the resulting specs join
//! `[[models]]` and are loaded with them before anything is swapped in.
//!
//! The store's I/O runs on one small runtime of its own (the store's HTTP
//! connections outlive a reload, and the reload thread is itself inside a
//! runtime). A store that cannot be listed at all (wrong credentials, no
//! such bucket, unreachable with nothing cached) fails start-up or the
//! reload with the reason at `repository.uri`; a model that cannot be made
//! local is kept in [`ResolvedStore::unavailable`] and answered with the
//! store error's status (503 while the store is down).

use super::store_gate::GateInputs;
use super::store_runtime::{run_on_store, store_runtime};
use crate::config::store_section::{ResolvedStore, StoreConfig};
use crate::config::{Config, ConfigIssue};
use crate::routing::rollout::Status;
use std::collections::BTreeMap;
use std::sync::Arc;
use switchyard_store::triton::{load_repository, SpecDefaults};
use switchyard_store::{AwsEnv, ModelStore, RepositoryChange, StoreError};

/// Resolves `config`'s model store (if any) and appends its models to
/// `config.models`. `previous` is the running generation's store config:
/// with the same settings its open store is reused, and its gate state
/// carried on (`rollout = "gated"`, [`super::store_gate`]; `status` says
/// where the rollout of a candidate name stands).
pub fn resolve(
    config: &mut Config,
    previous: Option<&StoreConfig>,
    status: &dyn Fn(&str) -> Option<Status>,
) -> Result<(), Vec<ConfigIssue>> {
    let Some(mut store_config) = config.store.take() else { return Ok(()) };
    let issue = |message: String| vec![ConfigIssue { path: "repository.uri".into(), message }];
    let reused = previous
        .filter(|p| p.settings == store_config.settings)
        .and_then(|p| p.resolved.as_ref())
        .map(|r| Arc::clone(&r.store));
    let store = match reused {
        Some(store) => store,
        None => ModelStore::open(store_config.settings.clone(), &AwsEnv::from_process())
            .map_err(|e| issue(e.to_string()))?,
    };
    let defaults = SpecDefaults { warmup: store_config.warmup, ..SpecDefaults::default() };
    let mut loaded = {
        let store = Arc::clone(&store);
        let defaults = defaults.clone();
        run_on_store(async move { load_repository(&store, &defaults).await })
            .map_err(issue)?
            .map_err(|e| issue(format!("model store {}: {e}", store_config.settings.uri)))?
    };
    let gate_inputs = GateInputs {
        plan: store_config.gated.as_ref(),
        // The gate's memory holds for the same store only.
        previous: previous
            .filter(|p| p.settings.uri == store_config.settings.uri)
            .and_then(|p| p.resolved.as_ref())
            .map(|r| &r.gate),
        status,
        defaults: &defaults,
    };
    let gate = super::store_gate::apply(&mut loaded, &store, config, &gate_inputs);
    let mut unavailable = BTreeMap::new();
    for (name, error) in loaded.rejected {
        tracing::warn!(model = %name, error = %error, "model store: model not served");
        unavailable.insert(name, error);
    }
    let mut warnings = BTreeMap::new();
    for model in &loaded.models {
        for warning in &model.warnings {
            tracing::warn!(model = %model.name, "model store: {warning}");
        }
        warnings.insert(model.name.clone(), model.warnings.clone());
    }
    let mut issues = Vec::new();
    let (models, routes, proxy) = (&config.models, &config.routes, &config.proxy);
    for spec in &loaded.specs {
        if let Some(i) = models.iter().position(|m| m.name == spec.name) {
            issues.push(format!("the store's model {:?} has the name of models[{i}]", spec.name));
        } else if routes.iter().any(|r| r.name == spec.name) || proxy.upstream_model(&spec.name).is_some() {
            issues
                .push(format!("the store's model {:?} has the name of a route or upstream model", spec.name));
        }
    }
    if !issues.is_empty() {
        return Err(issues.into_iter().flat_map(issue).collect());
    }
    tracing::info!(
        uri = %store_config.settings.uri,
        models = loaded.specs.len(),
        unavailable = unavailable.len(),
        from_cache = loaded.from_cache,
        "model store resolved"
    );
    store_config.resolved = Some(Arc::new(ResolvedStore {
        store,
        versions: loaded.versions,
        unavailable,
        warnings,
        from_cache: loaded.from_cache,
        gate,
    }));
    config.models.extend(loaded.specs);
    // Routes over store models: their fingerprint (a cache key part) names
    // the versions now served.
    let (models, upstreams) = (&config.models, &config.proxy.upstreams);
    config.routes = std::mem::take(&mut config.routes)
        .into_iter()
        .map(|r| crate::config::route_section::with_fingerprint(r, models, upstreams))
        .collect();
    config.store = Some(store_config);
    Ok(())
}

/// Lists the store again and says what changed since the last listing
/// (nothing on the first call: it sets the baseline).
pub async fn poll(store: Arc<ModelStore>) -> Result<Vec<RepositoryChange>, StoreError> {
    let runtime = match store_runtime() {
        Ok(rt) => rt,
        Err(reason) => return Err(StoreError::Backend { store: store.uri().to_string(), reason }),
    };
    match runtime.spawn(async move { store.poll().await }).await {
        Ok(result) => result,
        Err(e) => Err(StoreError::Backend { store: "model store".into(), reason: e.to_string() }),
    }
}
