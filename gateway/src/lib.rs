//! Switchyard gateway: the Pingora HTTP front and the tonic gRPC front of
//! the Open Inference Protocol (KServe V2, with Triton's binary tensors),
//! the exact-match cache, routing over ONNX Runtime pools and upstream
//! servers, the prefix reverse proxy, configuration and hot reload.
//!
//! The modules are private; this page lists what other crates use: the
//! binary's commands, the config, the in-process request path (for the
//! integration tests and embedders) and the decoders the fuzz targets
//! drive. `gateway/ARCHITECTURE.md` draws the modules in their layers.
//!
//! A request's path, top to bottom:
//! 1. `connections` and `app` (Pingora phases): the client-connection
//!    table and its read deadlines, admission (`max_concurrent_requests`),
//!    the body under its limits; or `grpc` (tonic) with the same limits.
//! 2. `handlers` (one function per REST endpoint) or `grpc::service`,
//!    decoding with [`switchyard_protocol::v2`] (REST) or the protobuf
//!    mapping (gRPC).
//! 3. `inference`, shared by both: the signature check, the budget, the
//!    cache plan (`cache`: keys, L1, L2, coalescing).
//! 4. [`execute`] (`routing`): the one place a routing decision is made
//!    and counted: the policy's plan over runtime pools and upstreams with
//!    its fallbacks, or draft then final for a stream ([`Strategy`]); the
//!    calibration shadow; the decision counters.
//! 5. Back up: the answer is stored by the cache, shaped to the requested
//!    outputs and encoded (V2 JSON or binary, protobuf, or SSE events by
//!    `stream`).
//!
//! [`serve`] composes all of it with the admin listener, reload and
//! shutdown; [`replay`] runs a traffic sample through a candidate config
//! without listeners.

#![deny(missing_docs)]

mod admin;
mod app;
mod auth;
mod bound;
mod breaker;
mod cache;
mod config;
mod connections;
mod endpoint;
mod error;
mod grpc;
mod handlers;
mod header_names;
mod http_io;
mod inference;
mod lifecycle;
mod memory;
mod metrics;
mod openai;
mod prefix;
mod prepare;
mod proxy;
mod random_draws;
mod record;
mod reload;
mod replay;
mod reply;
mod request_limits;
mod routing;
mod serve;
mod shutdown;
mod snapshot;
mod state;
mod stream;
mod target;
mod telemetry;
mod tenants;
mod tls;
mod upstream;
mod upstream_error;

#[cfg(test)]
mod test_util;

// The binary's commands: serve, check-config, replay.
pub use prepare::prepare;
pub use reload::{read_config_file, CliOverrides, ConfigSource};
pub use replay::{replay, Pace};
pub use serve::run as serve;
pub use telemetry::init as init_logging;
pub use telemetry::otlp::check as check_trace_exporter;
pub use upstream::Upstreams;

// The config: parsed, checked, every problem with its field path.
pub use config::{
    config_json_schema, use_resolver as use_config_resolver, Config, ConfigIssue, DEFAULT_CONFIG,
};
pub use config::{load_default as load_default_config, load_file as load_config_file, parse as parse_config};
// TLS clients (backends, Redis, OTLP) share one rustls provider.
pub use config::client_tls_section::install_default_provider as install_tls_provider;

// The request path in process: a snapshot of config and models, the
// state front ends share, and routing's entry point (integration tests,
// embedders).
pub use prepare::open_repository;
pub use reload::build::{next_snapshot, next_snapshot_with};
pub use routing::budget::{resolve as resolve_budget, route_budget};
pub use routing::{execute, RouteRequest, RoutingContext, Strategy};
pub use snapshot::Snapshot;
pub use state::AppState;
pub use target::{resolve as resolve_target, Target};

// What the fuzz targets drive alone: the gRPC request mapping and the SSE
// event writer.
pub use grpc::decode::decode_model_infer;
pub use grpc::proto::ModelInferRequest;
pub use stream::sse::event as sse_event;
