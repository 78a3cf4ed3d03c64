//! The checked configuration: [`Config`], one field per section, each the
//! checked type of the section that built it (`*_section.rs`). Built only
//! by [`super::validate::check`], so every value here has been checked.

use super::cache_section::CacheConfig;
use super::control_section::{AdminConfig, ReloadConfig};
use super::model_section::ModelRouting;
use super::prefix_route_section::PrefixRouteConfig;
use super::route_section::RouteConfig;
use super::server_section::ServerConfig;
use super::store_section::StoreConfig;
use super::telemetry_section::TelemetryConfig;
use super::tenant_section::TenantConfig;
use super::upstream_section::{UpstreamConfig, UpstreamModelConfig};
use std::collections::HashMap;
use std::path::PathBuf;
use switchyard_runtime::ModelSpec;

/// One immutable configuration snapshot.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listeners and limits.
    pub server: ServerConfig,
    /// Explicit ONNX Runtime library path, if configured.
    pub onnxruntime_library: Option<PathBuf>,
    /// Models, with paths resolved against the repository folder.
    pub models: Vec<ModelSpec>,
    /// Routes clients call.
    pub routes: Vec<RouteConfig>,
    /// Routing attributes (cost, quality) of each model, by model name.
    pub model_routing: HashMap<String, ModelRouting>,
    /// The `[[models]] rows_independent` settings given, by model name
    /// (read through [`Config::rows_independent`]).
    pub rows_independent: HashMap<String, bool>,
    /// The response cache; `None` (no `[cache]` section) = no caching.
    pub cache: Option<CacheConfig>,
    /// The admin API's token.
    pub admin: AdminConfig,
    /// Watching the config file.
    pub reload: ReloadConfig,
    /// Upstream servers and prefix routes.
    pub proxy: ProxyConfig,
    /// OpenTelemetry trace export; `None` = off.
    pub telemetry: Option<TelemetryConfig>,
    /// `[repository] uri`'s model store; `None` = none. Its models are
    /// added to `models` by `crate::prepare::store` before serving.
    pub store: Option<StoreConfig>,
    /// `[[tenants]]`: tenants and their limits across routes.
    pub tenants: Vec<TenantConfig>,
    /// `[fleet_limits]`: tenant request limits held in the cache's Redis
    /// across replicas; `None` = per process.
    pub fleet_limits: Option<super::fleet_limits_section::FleetLimits>,
}

impl Config {
    /// The route named `name`.
    pub fn route(&self, name: &str) -> Option<&RouteConfig> {
        self.routes.iter().find(|r| r.name == name)
    }

    /// Whether `model`'s rows are answered independently of each other,
    /// so the cache may keep one entry per row (`crate::cache::rows`):
    /// its `rows_independent` setting, or by default true for a text
    /// model (one with a tokenizer) and false for every other model.
    pub fn rows_independent(&self, model: &str) -> bool {
        match self.rows_independent.get(model) {
            Some(&set) => set,
            None => self.models.iter().any(|m| m.name == model && m.text.is_some()),
        }
    }
}

/// Everything served by other servers: the checked `[[upstreams]]` and
/// `[[prefix_routes]]`, what the upstream registry ([`crate::upstream`])
/// and the prefix proxy ([`crate::proxy`]) run on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProxyConfig {
    /// Upstream servers, in config order.
    pub upstreams: Vec<UpstreamConfig>,
    /// Path-prefix routes, in config order (matching takes the longest).
    pub prefix_routes: Vec<PrefixRouteConfig>,
}

impl ProxyConfig {
    /// The upstream named `name`.
    pub fn upstream(&self, name: &str) -> Option<&UpstreamConfig> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// The upstream model named `name` and the upstream serving it.
    pub fn upstream_model(&self, name: &str) -> Option<(&UpstreamConfig, &UpstreamModelConfig)> {
        super::upstream_section::find_model(&self.upstreams, name)
    }
}
