//! The config file as written: plain serde structs with
//! `deny_unknown_fields`, so a typo is an error rather than a silent
//! default. [`super::validate`] turns these into checked runtime types.

use super::cache_section::{RawCache, RawRouteCache};
use super::one_of::OneOf;
use super::size::ByteSize;
use serde::Deserialize;

/// The whole TOML file.
#[derive(Debug, Deserialize, Default)]
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
    pub admin: Option<super::control_section::RawAdmin>,
    /// Watching the config file for hot reload.
    pub reload: Option<super::control_section::RawReload>,
    /// Upstream servers (V2 model servers and plain HTTP apps).
    #[serde(default)]
    pub upstreams: Vec<super::proxy_raw::RawUpstream>,
    /// Path prefixes proxied to upstreams.
    #[serde(default)]
    pub prefix_routes: Vec<super::proxy_raw::RawPrefixRoute>,
    /// Trace export; absent = off.
    pub telemetry: Option<super::telemetry_section::RawTelemetry>,
}

/// `[server]`
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// V2 API listener, default `127.0.0.1:8000`.
    pub listen: Option<String>,
    /// Admin listener (metrics, admin API), default `127.0.0.1:9000`.
    pub admin_listen: Option<String>,
    /// Extra names the admin listener answers to (see
    /// [`super::admin_hosts_section`]).
    pub admin_hosts: Option<Vec<String>>,
    /// gRPC listener (Open Inference Protocol over gRPC); absent = off.
    pub grpc_listen: Option<String>,
    /// Worker threads of the HTTP server, default: number of cores.
    pub threads: Option<usize>,
    /// Largest request body accepted (413 beyond), default 64MiB.
    pub max_body_bytes: Option<ByteSize>,
    /// Requests served at once; more get 429. Default 4096.
    pub max_concurrent_requests: Option<usize>,
    /// Time allowed to receive the whole body, default 30000 ms.
    pub body_read_timeout_ms: Option<u64>,
    /// Most elements one request may declare across its inputs, default 16M.
    pub max_request_elements: Option<usize>,
    /// Largest response an infer request may produce (413 beyond, checked
    /// before the models run and before encoding), default 64MiB.
    pub max_response_bytes: Option<ByteSize>,
    /// Seconds in-flight requests get to finish after SIGTERM, default 10.
    pub shutdown_grace_s: Option<u64>,
    /// After SIGTERM, keep accepting for this long while readiness says
    /// 503, so load balancers stop sending first; default 0.
    pub shutdown_notice_ms: Option<u64>,
    /// Most open client connections (see [`super::connections_section`]).
    pub max_connections: Option<usize>,
    /// Idle keep-alive connections are closed after this, default 60 s.
    pub keepalive_timeout_s: Option<u64>,
    /// Time from a request's first byte to the end of its head, default 10000 ms.
    pub header_timeout_ms: Option<u64>,
    /// Concurrent HTTP/2 streams per gRPC connection (see
    /// [`super::grpc_section`]), default 128.
    pub grpc_max_streams: Option<u32>,
    /// `ModelStreamInfer` requests in flight per stream, default 32.
    pub grpc_max_in_flight_per_stream: Option<usize>,
    /// Admission permits one gRPC connection may hold, default three
    /// quarters of `max_concurrent_requests`.
    pub grpc_max_requests_per_connection: Option<usize>,
    /// Bytes of large gRPC messages being received at once, default
    /// `max_body_bytes`.
    pub grpc_max_receiving_bytes: Option<ByteSize>,
}

/// `[onnxruntime]`
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawOnnxRuntime {
    /// Path to `libonnxruntime.so`; default from `ORT_DYLIB_PATH` or the
    /// set-up's cache folder.
    pub library: Option<String>,
}

/// `[repository]` (its model store settings: [`super::store_section`]).
pub use super::store_section::RawRepository;

/// One `[[models]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// Name used in routes and as a V2 model name.
    pub name: String,
    /// Version reported to clients and part of cache keys; default 1.
    pub version: Option<u64>,
    /// ONNX file, relative to the repository folder.
    pub path: String,
    /// Unload after this many idle seconds (scale to zero); absent = never.
    pub idle_unload_s: Option<u64>,
    /// Load at start-up and run one request through it.
    #[serde(default)]
    pub warmup: bool,
    /// Dynamic batching; absent = defaults.
    #[serde(default)]
    pub batching: RawBatching,
    /// Device pools; absent = one CPU pool with one worker.
    #[serde(default)]
    pub pools: Vec<RawPool>,
    /// Relative cost of one inference (any unit, > 0); routing policies
    /// prefer cheaper models. Default: 1 + the model's position in the route.
    pub cost: Option<f64>,
    /// Accuracy rank (higher = more accurate). Default: the model's position
    /// in the route (cheapest first = least accurate).
    pub quality: Option<u32>,
    /// Makes this a text model: clients send strings, the runtime tokenises
    /// them (see [`super::text_section`]); absent = the graph's own inputs.
    pub tokenizer: Option<super::text_section::RawTokenizer>,
    /// Per-request limits `{ max_rows, max_tokens }`; absent fields take
    /// defaults from the batching (see `switchyard_runtime::limits`).
    pub limits: Option<switchyard_runtime::RequestLimits>,
}

/// A model's `batching = { ... }`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawBatching {
    /// Rows per batch, default 32; 0 or 1 disables batching.
    pub max_batch_size: Option<usize>,
    /// How long the first request waits for others, default 500 us.
    pub max_queue_delay_us: Option<u64>,
    /// Queued requests per pool before `Overloaded`, default 1024.
    pub queue_capacity: Option<usize>,
    /// Dispatch at once when nobody else is likely to join the batch
    /// instead of waiting out the delay, default true (see `BatchingSpec::idle_dispatch`).
    pub idle_dispatch: Option<bool>,
    /// A request into an idle CPU pool whose batch is predicted to run
    /// within this many microseconds runs on the caller's thread, default
    /// 50; 0 turns it off (see `BatchingSpec::inline_max`).
    pub inline_max_us: Option<u64>,
}

/// One entry of a model's `pools = [ ... ]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    /// Pool name, default the device name (`cpu`, `cuda`).
    pub name: Option<String>,
    /// `cpu` or `cuda`.
    pub device: OneOf<PoolDevice>,
    /// Worker threads, each with its own session; default 1.
    pub workers: Option<usize>,
    /// ONNX Runtime intra-op threads per worker; default 1.
    pub intra_op_threads: Option<usize>,
    /// Relative cost of running here vs. the model's other pools (> 0);
    /// the cheapest pool that fits the budget is used. Default 1.
    pub cost: Option<f64>,
    /// This pool's own batching (fields left out take the model's), e.g.
    /// larger batches on a GPU pool than on a CPU pool.
    pub batching: Option<RawBatching>,
}

/// Where a pool runs: the devices a config may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolDevice {
    /// ONNX Runtime's CPU execution provider.
    Cpu,
    /// ONNX Runtime's CUDA execution provider.
    Cuda,
}

impl From<PoolDevice> for switchyard_runtime::DeviceKind {
    fn from(device: PoolDevice) -> Self {
        match device {
            PoolDevice::Cpu => switchyard_runtime::DeviceKind::Cpu,
            PoolDevice::Cuda => switchyard_runtime::DeviceKind::Cuda,
        }
    }
}

/// One `[[routes]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    /// Name clients use as the V2 model name.
    pub name: String,
    /// Models behind the route, cheapest first.
    pub models: Vec<String>,
    /// Latency budget.
    #[serde(default)]
    pub budget_ms: RawBudget,
    /// Routing policy; absent = `fixed` on the route's last model.
    pub policy: Option<router_policies::PolicyConfig>,
    /// Response caching for this route; absent = on with default TTLs
    /// (when a `[cache]` section exists).
    pub cache: Option<RawRouteCache>,
    /// Client API keys; absent = open route.
    pub auth: Option<super::control_section::RawRouteAuth>,
    /// Draft-then-final streaming (SSE); see `config::draft_section`.
    pub draft: Option<super::draft_section::RawDraft>,
    /// A traffic sample for replay; see `config::record_section`.
    pub record: Option<super::record_section::RawRecord>,
    /// Online cascade calibration; see `config::calibrate_section`.
    pub calibrate: Option<super::calibrate_section::RawCalibrate>,
}

/// A route's `budget_ms = { default, max }`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawBudget {
    /// Budget when the request names none, default 1000 ms.
    pub default: Option<u64>,
    /// Largest budget a request may ask for, default 10x default.
    pub max: Option<u64>,
}
