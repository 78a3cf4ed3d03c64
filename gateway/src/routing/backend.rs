//! What plan execution needs from the world: run a model on a pool, and
//! see the fleet. [`RuntimeBackend`] is the real one for local models (the
//! model repository plus the config), `super::MixedBackend` adds the
//! upstream models; tests substitute a scripted fake to exercise failures
//! and fallbacks that the real runtime cannot be made to produce on demand.
//!
//! The boundary speaks its own words, so that neither side leaks into the
//! other: a [`BackendResponse`] says on which [`Device`] it was computed
//! (a runtime pool's CPU or CUDA, or an upstream server), and a
//! [`BackendError`] says where it failed ([`BackendError::Local`]: the
//! runtime, [`BackendError::Remote`]: an upstream server). The runtime
//! knows nothing of upstreams.

use super::fleet::{device, fleet_view};
use crate::config::Config;
use crate::error::{runtime_falls_back, GatewayError};
use crate::upstream_error::UpstreamError;
use router_policies::{Device, FleetView};
use std::future::Future;
use std::time::Instant;
use switchyard_runtime::{InferenceRequest, InferenceResponse, ModelRepository, RuntimeError, Tensor};
use thiserror::Error;

/// Runs models and reports the fleet, for [`super::run`].
pub trait Backend: Sync {
    /// A fresh view of `models` (a route's list, in order). Called before
    /// each decision: once per request, twice for a cascade.
    fn fleet(&self, models: &[String]) -> FleetView;

    /// True when `model` produces an output named `output`; used to ask the
    /// cheap model of a cascade for its confidence output.
    fn has_output(&self, model: &str, output: &str) -> bool;

    /// Runs `request` on `model`, on `pool` (or the backend's choice with
    /// `None`). An error's [`BackendError::falls_back`] decides whether a
    /// fallback is tried.
    fn run(
        &self,
        model: &str,
        pool: Option<&str>,
        request: InferenceRequest,
    ) -> impl Future<Output = Result<BackendResponse, BackendError>> + Send;
}

/// What a backend answered: the outputs, and the model, pool and device
/// that computed them.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendResponse {
    /// The model that ran.
    pub model: String,
    /// Its version.
    pub version: u64,
    /// The pool that ran it (a runtime pool, or the upstream's name).
    pub pool: String,
    /// That pool's device.
    pub device: Device,
    /// Rows in the executed batch this request was part of.
    pub batch_size: usize,
    /// The requested outputs (this request's rows only).
    pub outputs: Vec<(String, Tensor)>,
}

impl From<InferenceResponse> for BackendResponse {
    /// A local pool's answer.
    fn from(r: InferenceResponse) -> BackendResponse {
        BackendResponse {
            model: r.model,
            version: r.version,
            pool: r.pool,
            device: device(r.device),
            batch_size: r.batch_size,
            outputs: r.outputs,
        }
    }
}

/// Why a backend could not answer, by where it failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BackendError {
    /// The runtime (a local model's pool) refused or failed it.
    #[error(transparent)]
    Local(#[from] RuntimeError),
    /// An upstream server could not answer for its model.
    #[error(transparent)]
    Remote(#[from] UpstreamError),
}

impl BackendError {
    /// True for errors another pool or model may not have: overload,
    /// unavailability, execution failures, a failing or slow upstream
    /// server. Client errors (bad input, an unknown output, a request the
    /// upstream refused) would fail the same way anywhere.
    pub fn falls_back(&self) -> bool {
        match self {
            BackendError::Local(e) => runtime_falls_back(e),
            BackendError::Remote(e) => e.failure.falls_back(),
        }
    }
}

impl From<BackendError> for GatewayError {
    fn from(e: BackendError) -> GatewayError {
        match e {
            BackendError::Local(e) => GatewayError::Runtime(e),
            BackendError::Remote(e) => GatewayError::Upstream(e),
        }
    }
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
    /// The request's priority class: with the deadline, its place in the
    /// pool's queue ([`ModelRepository::infer_ranked`]).
    pub class: u8,
}

impl Backend for RuntimeBackend<'_> {
    fn fleet(&self, models: &[String]) -> FleetView {
        fleet_view(&self.repo.load_of(models), self.config, models, self.class)
    }

    fn has_output(&self, model: &str, output: &str) -> bool {
        self.repo.signature(model).is_ok_and(|s| s.outputs.iter().any(|o| o.name == output))
    }

    fn run(
        &self,
        model: &str,
        pool: Option<&str>,
        request: InferenceRequest,
    ) -> impl Future<Output = Result<BackendResponse, BackendError>> + Send {
        let (repo, rank) = (self.repo, switchyard_runtime::Rank::new(self.class, self.deadline));
        async move {
            let response = repo.infer_ranked(model, pool, request, rank).await?;
            crate::telemetry::spans::record_execution(&response);
            Ok(response.into())
        }
    }
}
