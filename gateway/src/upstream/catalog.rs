//! Where the V2 handlers look models up: in the local repository or among
//! the upstream models. Metadata, readiness and request checks go through
//! it, so that a route (or a directly addressed model) on an upstream
//! answers like a local one.

use super::registry::{SignatureState, Upstreams};
use crate::error::GatewayError;
use crate::upstream_error::{UpstreamError, UpstreamFailure};
use std::sync::Arc;
use switchyard_runtime::{BatchingSpec, ModelRepository, ModelSignature, ModelSpec, ModelState};

/// The models a request can reach.
#[derive(Clone, Copy)]
pub struct Catalog<'a> {
    /// Local ONNX models.
    pub repo: &'a ModelRepository,
    /// Models on upstream servers.
    pub upstreams: &'a Upstreams,
}

impl Catalog<'_> {
    /// Whether `model` exists (locally or upstream).
    pub fn knows(&self, model: &str) -> bool {
        self.upstreams.has_model(model) || self.repo.has_signature(model)
    }

    /// `model`'s signature. An upstream model whose signature is not
    /// known yet (its server unreachable since start-up) or does not match
    /// its route is unavailable (503).
    pub fn signature(&self, model: &str) -> Result<Arc<ModelSignature>, GatewayError> {
        match self.upstreams.model(model) {
            None => Ok(self.repo.signature(model)?),
            Some((upstream, remote)) => match remote.state() {
                SignatureState::Known(sig) => Ok(sig),
                SignatureState::Unknown(why) | SignatureState::Incompatible(why) => {
                    Err(GatewayError::Upstream(UpstreamError {
                        model: model.to_string(),
                        upstream: upstream.config.name.clone(),
                        failure: UpstreamFailure::ModelUnavailable,
                        message: why,
                    }))
                }
            },
        }
    }

    /// The signature of a group of models that share one (a route's
    /// members): the first one known, so a route answers metadata calls
    /// while one of its upstream models is unreachable.
    pub fn shared_signature(&self, models: &[String]) -> Result<Arc<ModelSignature>, GatewayError> {
        let mut first_error = None;
        for model in models {
            match self.signature(model) {
                Ok(sig) => return Ok(sig),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| GatewayError::NotFound("no models".into())))
    }

    /// Batching of the first local model among `models`; `None` when all
    /// are upstream models (their batching is the upstream's business).
    pub fn batching(&self, models: &[String]) -> Option<BatchingSpec> {
        models.iter().filter(|m| !self.upstreams.has_model(m)).find_map(|m| self.repo.batching(m).ok())
    }

    /// The spec of the first local model among `models`; `None` when all
    /// are upstream models.
    pub fn local_spec(&self, models: &[String]) -> Option<ModelSpec> {
        models.iter().filter(|m| !self.upstreams.has_model(m)).find_map(|m| self.repo.spec(m).ok())
    }

    /// Whether `model` can serve: a local model not failed to load, or an
    /// upstream model with a usable signature and a usable address.
    pub fn can_serve(&self, model: &str) -> bool {
        match self.upstreams.model(model) {
            Some((upstream, remote)) => remote.signature().is_some() && upstream.is_usable(),
            None => !matches!(self.repo.state(model), Ok(ModelState::Failed(_)) | Err(_)),
        }
    }
}
