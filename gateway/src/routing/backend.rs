//! What plan execution needs from the world: run a model on a pool, and
//! see the fleet. [`RuntimeBackend`] is the real one (the model repository
//! plus the config); tests substitute a scripted fake to exercise failures
//! and fallbacks that the real runtime cannot be made to produce on demand.

use super::fleet::fleet_view;
use crate::config::Config;
use router_policies::FleetView;
use std::future::Future;
use std::time::Instant;
use switchyard_runtime::{InferenceRequest, InferenceResponse, ModelRepository, RuntimeError};

/// Runs models and reports the fleet, for [`super::run`].
pub trait Backend: Sync {
    /// A fresh view of `models` (a route's list, in order). Called before
    /// each decision: once per request, twice for a cascade.
    fn fleet(&self, models: &[String]) -> FleetView;

    /// True when `model` produces an output named `output`; used to ask the
    /// cheap model of a cascade for its confidence output.
    fn has_output(&self, model: &str, output: &str) -> bool;

    /// Runs `request` on `model`, on `pool` (or the runtime's choice with
    /// `None`). Errors are the runtime's own, so their class decides whether
    /// a fallback is tried.
    fn run(
        &self,
        model: &str,
        pool: Option<&str>,
        request: InferenceRequest,
    ) -> impl Future<Output = Result<InferenceResponse, RuntimeError>> + Send;
}

/// The real backend: the model repository under one config snapshot.
pub struct RuntimeBackend<'a> {
    /// Loaded and loadable models.
    pub repo: &'a ModelRepository,
    /// The snapshot the request runs under (costs, batch sizes).
    pub config: &'a Config,
    /// The request's deadline: a request still queued on a paused pool
    /// then gives up ([`ModelRepository::infer_within`]).
    pub deadline: Option<Instant>,
}

impl Backend for RuntimeBackend<'_> {
    fn fleet(&self, models: &[String]) -> FleetView {
        fleet_view(&self.repo.load_of(models), self.config, models)
    }

    fn has_output(&self, model: &str, output: &str) -> bool {
        self.repo.signature(model).is_ok_and(|s| s.outputs.iter().any(|o| o.name == output))
    }

    fn run(
        &self,
        model: &str,
        pool: Option<&str>,
        request: InferenceRequest,
    ) -> impl Future<Output = Result<InferenceResponse, RuntimeError>> + Send {
        let (repo, deadline) = (self.repo, self.deadline);
        async move {
            let result = repo.infer_within(model, pool, request, deadline).await;
            if let Ok(response) = &result {
                crate::telemetry::spans::record_execution(response);
            }
            result
        }
    }
}
