//! The config file as written: [`RawConfig`], one field per TOML table,
//! each the raw type of the section that checks it (`*_section.rs`). Every
//! raw type has `deny_unknown_fields`, so a typo is an error rather than a
//! silent default. [`super::validate`] turns them into a checked
//! [`super::Config`].

use super::cache_section::RawCache;
use super::control_section::{RawAdmin, RawReload};
use super::fleet_limits_section::RawFleetLimits;
use super::model_section::RawModel;
use super::onnxruntime_section::RawOnnxRuntime;
use super::prefix_route_section::RawPrefixRoute;
use super::route_section::RawRoute;
use super::server_section::RawServer;
use super::store_section::RawRepository;
use super::telemetry_section::RawTelemetry;
use super::tenant_section::RawTenant;
use super::upstream_section::RawUpstream;
use schemars::JsonSchema;
use serde::Deserialize;

/// The whole TOML file.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Listeners and limits.
    #[serde(default)]
    pub server: RawServer,
    /// Where the ONNX Runtime shared library is.
    #[serde(default)]
    pub onnxruntime: RawOnnxRuntime,
    /// Where model files are looked up.
    #[serde(default)]
    pub repository: RawRepository,
    /// Models the runtime may load.
    #[serde(default)]
    pub models: Vec<RawModel>,
    /// Names clients call, each backed by one or more models.
    #[serde(default)]
    pub routes: Vec<RawRoute>,
    /// The response cache; absent = no caching.
    pub cache: Option<RawCache>,
    /// The admin API's bearer token.
    pub admin: Option<RawAdmin>,
    /// Watching the config file for hot reload.
    pub reload: Option<RawReload>,
    /// Upstream servers (V2 model servers and plain HTTP apps).
    #[serde(default)]
    pub upstreams: Vec<RawUpstream>,
    /// Path prefixes proxied to upstreams.
    #[serde(default)]
    pub prefix_routes: Vec<RawPrefixRoute>,
    /// Trace export; absent = off.
    pub telemetry: Option<RawTelemetry>,
    /// Tenants (as API keys name them) and their limits across routes.
    #[serde(default)]
    pub tenants: Vec<RawTenant>,
    /// Tenant request limits held across replicas in the cache's Redis;
    /// absent = each replica holds its own.
    pub fleet_limits: Option<RawFleetLimits>,
}
