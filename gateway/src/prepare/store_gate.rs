//! `[repository] rollout = "gated"` applied to a freshly loaded store:
//! per model, [`crate::routing::rollout::store::decide`] says which
//! version serves under the model's name; where the serving version is
//! kept, its spec replaces the newest's, the newest is served as
//! `<model>@<version>` and offered to the routes as their candidate (or
//! not served at all, once refused). Without a gate every model serves
//! its newest version, and the state only records it (so that turning the
//! gate on later starts from what serves).

use super::store_runtime::{run_on_store, store_runtime};
use crate::config::candidate_section::CandidateConfig;
use crate::config::store_section::GateState;
use crate::config::Config;
use crate::routing::rollout::store::{candidate_name, decide, offer, Decision, Found};
use crate::routing::rollout::Status;
use std::sync::Arc;
use switchyard_store::triton::{LoadedRepository, SpecDefaults, StoreFetcher, TritonModel};
use switchyard_store::{LocalVersion, ModelStore, StoreError};

/// What the gate needs besides the loaded store.
pub struct GateInputs<'a> {
    /// The plan's candidate template (`None`: not gated).
    pub plan: Option<&'a CandidateConfig>,
    /// The previous generation's gate state.
    pub previous: Option<&'a GateState>,
    /// Where the rollout of a candidate name stands.
    pub status: &'a dyn Fn(&str) -> Option<Status>,
    /// The store's spec defaults.
    pub defaults: &'a SpecDefaults,
}

/// A model whose serving version is kept.
struct Kept {
    model: usize,
    serving: u64,
    newest: u64,
    mirror: bool,
}

/// Applies the gate to `loaded` (module docs); routes of `config` get the
/// mirrored versions as candidates. Returns the state for the next
/// generation.
pub fn apply(
    loaded: &mut LoadedRepository,
    store: &Arc<ModelStore>,
    config: &mut Config,
    inputs: &GateInputs<'_>,
) -> GateState {
    let mut next = GateState::default();
    let mut kept = Vec::new();
    for (i, model) in loaded.models.iter().enumerate() {
        let Some(&newest) = model.versions.first() else { continue };
        let Some(_) = inputs.plan else {
            next.serving.insert(model.name.clone(), newest);
            continue;
        };
        let file = &model.config.default_model_filename;
        let listed = |v: u64| model.listing.versions.get(&v).is_some_and(|l| l.files.contains_key(file));
        let routed = config.routes.iter().any(|r| r.models.contains(&model.name));
        let found = Found { model: &model.name, newest, listed: &listed, routed };
        if let Decision::Keep { serving, mirror } = decide(&found, inputs.previous, inputs.status, &mut next)
        {
            kept.push(Kept { model: i, serving, newest, mirror });
        }
    }
    if kept.is_empty() {
        return next;
    }
    let pulled = pull(store, loaded, &kept);
    let handle = store_runtime().map(|rt| rt.handle().clone());
    for (k, local) in kept.iter().zip(pulled) {
        let model = loaded.models[k.model].clone();
        let (local, handle) = match (local, &handle) {
            (Ok(local), Ok(handle)) => (local, handle),
            (Err(e), _) => {
                tracing::warn!(model = %model.name, version = k.serving, error = %e,
                    "gated store version: the serving version cannot be made local; the newest serves");
                next.serving.insert(model.name.clone(), k.newest);
                next.candidates.remove(&model.name);
                continue;
            }
            (_, Err(e)) => {
                tracing::warn!(model = %model.name, error = %e, "gated store version: the newest serves");
                next.serving.insert(model.name.clone(), k.newest);
                next.candidates.remove(&model.name);
                continue;
            }
        };
        let source = |served: &str, version: u64| source(store, &model, served, version, handle.clone());
        let mut newest_spec =
            loaded.specs.iter().position(|s| s.name == model.name).map(|i| loaded.specs.remove(i));
        if let (true, Some(spec)) = (k.mirror, newest_spec.as_mut()) {
            let name = candidate_name(&model.name, k.newest);
            spec.name = name.clone();
            spec.source = Some(source(&name, k.newest));
            loaded.specs.push(spec.clone());
            if let Some(plan) = inputs.plan {
                offer(&mut config.routes, &model.name, &CandidateConfig { model: name, ..plan.clone() });
            }
            tracing::info!(model = %model.name, serving = k.serving, candidate = k.newest,
                "gated store version: mirrored as the routes' candidate, the serving version keeps the name");
        }
        let path = local.file(&model.config.default_model_filename);
        let mut spec = model.mapped.spec(&model.name, k.serving, path, inputs.defaults);
        spec.source = Some(source(&model.name, k.serving));
        loaded.specs.push(spec);
        loaded.versions.push(local);
    }
    next
}

/// The kept versions made local (they served the previous generation, so
/// the cache normally has them).
fn pull(
    store: &Arc<ModelStore>,
    loaded: &LoadedRepository,
    kept: &[Kept],
) -> Vec<Result<LocalVersion, StoreError>> {
    let jobs: Vec<_> = kept
        .iter()
        .map(|k| {
            let m = &loaded.models[k.model];
            (m.name.clone(), k.serving, m.listing.versions.get(&k.serving).cloned())
        })
        .collect();
    let store = Arc::clone(store);
    let work = async move {
        let mut out = Vec::new();
        for (name, version, listing) in jobs {
            out.push(store.materialize_listed(&name, version, listing.as_ref()).await);
        }
        out
    };
    run_on_store(work).unwrap_or_else(|reason| {
        let error = || StoreError::Backend { store: "model store".into(), reason: reason.clone() };
        kept.iter().map(|_| Err(error())).collect()
    })
}

/// The model source of `model`'s `version` served as `served`.
fn source(
    store: &Arc<ModelStore>,
    model: &TritonModel,
    served: &str,
    version: u64,
    handle: tokio::runtime::Handle,
) -> switchyard_runtime::ModelSource {
    StoreFetcher::source(
        store,
        served,
        &model.name,
        version,
        model.listing.versions.get(&version).cloned(),
        &model.config,
        handle,
    )
}
