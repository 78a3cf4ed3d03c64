//! Resolves the name in `/v2/models/{name}` to what serves it: a route
//! (one public name over several models) or a model addressed directly.

use crate::config::{Config, RouteConfig};
use crate::error::GatewayError;
use crate::upstream::Catalog;
use std::sync::Arc;
use switchyard_runtime::ModelSignature;

/// What a V2 model name refers to.
#[derive(Debug, Clone)]
pub struct Target {
    /// The name the client used; echoed as `model_name`.
    pub public_name: String,
    /// The version clients see: the model's own, or 1 for a route.
    pub version: u64,
    /// Models that may answer, cheapest first.
    pub models: Vec<String>,
    /// True when the name is a route.
    pub is_route: bool,
}

impl Target {
    /// The model that answers until routing policies choose: the last
    /// (most accurate) one.
    pub fn default_model(&self) -> &str {
        self.models.last().map_or(self.public_name.as_str(), String::as_str)
    }

    /// The route's config when the name is a route of `config`.
    pub fn route<'c>(&self, config: &'c Config) -> Option<&'c RouteConfig> {
        self.is_route.then(|| config.route(&self.public_name)).flatten()
    }
}

/// Finds `name` (and checks `version` when given) among routes, then
/// models (local, then upstream models, version 1).
pub fn resolve(
    config: &Config,
    catalog: &Catalog<'_>,
    name: &str,
    version: Option<&str>,
) -> Result<Target, GatewayError> {
    let target = if let Some(route) = config.route(name) {
        Target { public_name: name.to_string(), version: 1, models: route.models.clone(), is_route: true }
    } else if let Some(spec) = config.models.iter().find(|m| m.name == name) {
        Target {
            public_name: name.to_string(),
            version: spec.version,
            models: vec![name.to_string()],
            is_route: false,
        }
    } else if catalog.upstreams.has_model(name) {
        Target { public_name: name.to_string(), version: 1, models: vec![name.to_string()], is_route: false }
    } else if let Some(e) = config.store.as_ref().and_then(|s| s.unavailable(name)) {
        // A model the store names but could not deliver: its error's status (503 while down).
        return Err(GatewayError::Runtime(switchyard_runtime::RuntimeError::StoreUnavailable {
            model: name.to_string(),
            class: e.class(),
            label: e.label(),
            message: e.to_string(),
        }));
    } else if let Some(uri) =
        config.store.as_ref().filter(|s| s.offline()).map(|s| s.settings.uri.to_string())
    {
        // The store was down when this generation was built: it may hold the model.
        return Err(GatewayError::Runtime(switchyard_runtime::RuntimeError::StoreUnavailable {
            model: name.to_string(),
            class: switchyard_runtime::ErrorClass::Unavailable,
            label: "store_not_cached",
            message: format!(
                "{:?} is not cached and the model store {uri} is unreachable",
                crate::error::cut(name)
            ),
        }));
    } else {
        return Err(GatewayError::NotFound(format!("unknown model or route {:?}", crate::error::cut(name))));
    };
    if let Some(v) = version {
        if v.parse::<u64>().ok() != Some(target.version) {
            return Err(GatewayError::NotFound(format!(
                "{:?} has no version {:?} (available: {})",
                crate::error::cut(name),
                crate::error::cut(v),
                target.version
            )));
        }
    }
    // The repository must know the model; a config/repository mismatch is a 404, not a panic.
    if !catalog.knows(target.default_model()) {
        return Err(GatewayError::NotFound(format!("unknown model {:?}", target.default_model())));
    }
    Ok(target)
}

/// The signature clients see for a target (all models of a route share
/// it; the first one known is used, so a route answers while one of its
/// upstream models is unreachable).
pub fn signature(catalog: &Catalog<'_>, target: &Target) -> Result<Arc<ModelSignature>, GatewayError> {
    catalog.shared_signature(&target.models)
}
