//! Switchyard gateway: the Pingora HTTP front, the Open Inference Protocol
//! (V2) with Triton's binary extension, configuration and routing.
//!
//! A request's path, top to bottom: [`app`] (Pingora phases: admission,
//! body, dispatch, access log) -> [`handlers`] (one function per endpoint)
//! -> [`v2`] (decode/encode) and the runtime.

pub mod admin;
pub mod answer;
pub mod app;
pub mod auth;
pub mod bound;
pub mod breaker;
pub mod cache;
pub mod config;
pub mod connections;
pub mod endpoint;
pub mod error;
pub mod grpc;
pub mod handlers;
pub mod header_names;
pub mod http_io;
pub mod inference;
pub mod lifecycle;
pub mod memory;
pub mod metrics;
pub mod prefix;
pub mod prepare;
pub mod proxy;
pub mod random_draws;
pub mod record;
pub mod reload;
pub mod replay;
pub mod reply;
pub mod request_limits;
pub mod routing;
pub mod serve;
pub mod shutdown;
pub mod snapshot;
pub mod state;
pub mod stream;
pub mod target;
pub mod telemetry;
pub mod upstream;
pub mod upstream_error;
pub mod v2;

#[cfg(test)]
mod test_util;
