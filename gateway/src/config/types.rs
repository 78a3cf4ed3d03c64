//! Validated configuration: what the server runs on. Built only by
//! [`super::validate::validate`], so every value here has been checked.

pub use super::cache_section::{CacheConfig, RedisConfig, RouteCache};
pub use super::control_section::{AdminConfig, ApiKey, ReloadConfig, RouteAuth, TokenSource};
use router_policies::PolicyConfig;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
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
    /// The response cache; `None` (no `[cache]` section) = no caching.
    pub cache: Option<CacheConfig>,
    /// The admin API's token.
    pub admin: AdminConfig,
    /// Watching the config file.
    pub reload: ReloadConfig,
    /// Upstream servers and prefix routes.
    pub proxy: super::proxy_types::ProxyConfig,
    /// OpenTelemetry trace export; `None` = off.
    pub telemetry: Option<super::telemetry_section::TelemetryConfig>,
    /// `[repository] uri`'s model store; `None` = none. Its models are
    /// added to `models` by `crate::prepare::store` before serving.
    pub store: Option<super::store_section::StoreConfig>,
}

/// What routing policies know about one model beyond its [`ModelSpec`]:
/// the optional `cost` and `quality` of its `[[models]]` entry and each
/// pool's `cost`. Absent values get route-position defaults when the
/// fleet view is built (see `routing::fleet`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRouting {
    /// Relative cost of one inference, if configured.
    pub cost: Option<f64>,
    /// Accuracy rank (higher = more accurate), if configured.
    pub quality: Option<u32>,
    /// Relative cost of each pool, by pool name (default 1.0).
    pub pool_costs: HashMap<String, f64>,
}

/// `[server]`, checked.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// V2 API listener.
    pub listen: SocketAddr,
    /// Admin listener.
    pub admin_listen: SocketAddr,
    /// Names besides its own address that the admin listener answers to
    /// (`server.admin_hosts`; [`crate::admin::host_check`]).
    pub admin_hosts: Vec<super::admin_hosts_section::AdminHost>,
    /// gRPC listener ([`crate::grpc`]); `None`: gRPC is off.
    pub grpc_listen: Option<SocketAddr>,
    /// HTTP worker threads.
    pub threads: usize,
    /// Request limits.
    pub limits: Limits,
    /// Time in-flight requests get after SIGTERM.
    pub shutdown_grace: Duration,
    /// Time between SIGTERM and closing the listeners, while readiness
    /// answers 503.
    pub shutdown_notice: Duration,
    /// Client connection limits and timeouts.
    pub connections: super::connections_section::ConnectionLimits,
    /// What one gRPC connection may ask at once.
    pub grpc: super::grpc_section::GrpcLimits,
}

/// Limits that protect the server from oversized or slow requests.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest body accepted; beyond it the answer is 413.
    pub max_body_bytes: usize,
    /// Requests in flight at once; beyond it the answer is 429.
    pub max_concurrent_requests: usize,
    /// Time allowed to read the whole body.
    pub body_read_timeout: Duration,
    /// Most tensor elements one request may declare.
    pub max_request_elements: usize,
    /// Largest encoded response of one infer request (an upper bound,
    /// see `v2::size`); beyond it the answer is 413.
    pub max_response_bytes: usize,
}

/// A route: a name clients address as a V2 model.
#[derive(Debug, Clone)]
pub struct RouteConfig {
    /// The name in `/v2/models/{name}/infer`.
    pub name: String,
    /// Models behind it, cheapest first; all share one signature.
    pub models: Vec<String>,
    /// Budget used when the request names none.
    pub default_budget: Duration,
    /// Largest budget a request may ask for.
    pub max_budget: Duration,
    /// The routing policy (default: `fixed` on the last model).
    pub policy: PolicyConfig,
    /// What, besides the request, decides this route's answers: the policy
    /// settings and the identity (size, modification time) of each model
    /// file when the config was loaded. Part of every cache key, so a
    /// changed threshold or a replaced model file never serves old entries.
    pub fingerprint: String,
    /// Response caching for this route.
    pub cache: RouteCache,
    /// Client API keys; `None` = open route.
    pub auth: Option<RouteAuth>,
    /// How streamed (SSE) infer calls are answered.
    pub draft: super::draft_section::DraftConfig,
    /// The route's traffic sample; `None` = not recorded.
    pub record: Option<super::record_section::RecordConfig>,
    /// Online calibration of a cascade's threshold; `None` = off.
    pub calibrate: Option<super::calibrate_section::CalibrateConfig>,
}

impl Config {
    /// The route named `name`.
    pub fn route(&self, name: &str) -> Option<&RouteConfig> {
        self.routes.iter().find(|r| r.name == name)
    }
}
