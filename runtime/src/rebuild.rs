//! Building a repository for a new configuration from the one serving now,
//! for hot reload: what did not change keeps running, what changed is
//! ready before anyone can send it a request.
//!
//! [`ModelRepository::rebuild`], per model of the new spec list:
//! 1. Same name, equal [`ModelSpec`], same file on disk ([`FileIdentity`])
//!    and not `Failed` in the previous repository: the very same model is
//!    shared (loaded sessions, queues and statistics carry over).
//! 2. Otherwise a new model is registered (its signature probed). When it
//!    replaces a model that was loaded, or its spec asks for `warmup`, its
//!    sessions are built now, so the first request after the swap does not
//!    pay a cold start.
//! 3. A new or changed model whose file cannot be registered or loaded
//!    fails the whole rebuild with that error: the caller keeps serving
//!    the previous repository.
//!
//! Models only in the previous repository are not touched: they stop when
//! the last holder of the previous repository drops it (requests still
//! running on it finish first).

use std::sync::Arc;
use std::time::Duration;

use crate::error::RuntimeError;
use crate::model::Model;
use crate::model_state::ModelState;
use crate::ort_env::environment;
use crate::repository::{check_specs, ModelRepository};
use crate::spec::ModelSpec;

/// Why a model of the new list did not reuse the previous one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChange {
    /// No model of that name before.
    Added,
    /// Its spec (path, version, pools, batching...) changed.
    SpecChanged,
    /// Same spec, but the file on disk is another one.
    FileChanged,
    /// The previous one had failed; registration was tried again.
    RetriedAfterFailure,
}

/// Why [`ModelRepository::rebuild`] failed, and for which model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct RebuildError {
    /// The model concerned, when the error is about one model.
    pub model: Option<String>,
    /// The runtime's error (boxed: rebuilds are rare, results stay small).
    pub error: Box<RuntimeError>,
}

impl RebuildError {
    fn of(model: &str) -> impl FnOnce(RuntimeError) -> RebuildError + '_ {
        move |error| RebuildError { model: Some(model.to_string()), error: Box::new(error) }
    }
}

/// What [`ModelRepository::rebuild`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RebuildReport {
    /// Models shared unchanged with the previous repository.
    pub reused: Vec<String>,
    /// Models registered anew, and why.
    pub changed: Vec<(String, ModelChange)>,
    /// Models whose sessions were built before returning, with the time it took.
    pub loaded: Vec<(String, Duration)>,
    /// Models of the previous repository that are not in the new one.
    pub removed: Vec<String>,
    /// Models that were already `Failed` and still are (tolerated: the
    /// rebuild does not make them worse).
    pub still_failed: Vec<(String, String)>,
}

impl ModelRepository {
    /// A repository for `specs` that reuses unchanged models of `previous`
    /// (see the module docs). Blocking: it may build sessions; call it off
    /// the async threads. `previous` keeps serving, untouched, whatever the
    /// result.
    pub fn rebuild(
        specs: Vec<ModelSpec>,
        previous: &ModelRepository,
    ) -> Result<(Arc<Self>, RebuildReport), RebuildError> {
        environment().map_err(|error| RebuildError { model: None, error: Box::new(error) })?;
        check_specs(&specs).map_err(|error| {
            let model = match &error {
                RuntimeError::InvalidSpec { model, .. } => Some(model.clone()),
                _ => None,
            };
            RebuildError { model, error: Box::new(error) }
        })?;
        let mut report = RebuildReport::default();
        let mut models = Vec::with_capacity(specs.len());
        for spec in specs {
            let old = previous.find(&spec.name);
            if let Some(old) = old.filter(|m| reusable(m, &spec)) {
                report.reused.push(spec.name.clone());
                models.push(Arc::clone(old));
                continue;
            }
            let change = match old {
                None => ModelChange::Added,
                Some(m) if m.spec != spec => ModelChange::SpecChanged,
                Some(m) if m.failure().is_some() => ModelChange::RetriedAfterFailure,
                Some(_) => ModelChange::FileChanged,
            };
            let was_loaded = old.is_some_and(|m| m.state() == ModelState::Ready);
            let model = Arc::new(Model::register(spec));
            if let Some(err) = model.failure() {
                if change != ModelChange::RetriedAfterFailure {
                    return Err(RebuildError::of(&model.spec.name)(err));
                }
                report.still_failed.push((model.spec.name.clone(), err.to_string()));
            } else if was_loaded || model.spec.warmup {
                let loaded = model.load_blocking().map_err(RebuildError::of(&model.spec.name))?;
                report.loaded.push((model.spec.name.clone(), loaded.cold_start));
            }
            report.changed.push((model.spec.name.clone(), change));
            models.push(model);
        }
        report.removed = previous
            .model_names()
            .into_iter()
            .filter(|name| !models.iter().any(|m| &m.spec.name == name))
            .collect();
        Ok((ModelRepository::from_models(models), report))
    }
}

/// True when `old` can serve as the model for `spec`.
fn reusable(old: &Model, spec: &ModelSpec) -> bool {
    old.spec == *spec && old.failure().is_none() && old.file_unchanged()
}
