//! Switchyard gateway: the Pingora HTTP front, the Open Inference Protocol
//! (V2) with Triton's binary extension, configuration and routing.
//!
//! A request's path, top to bottom: [`app`] (Pingora phases: admission,
//! body, dispatch, access log) -> [`handlers`] (one function per endpoint)
//! -> [`v2`] (decode/encode) and the runtime.

pub mod admin;
pub mod app;
pub mod cache;
pub mod config;
pub mod error;
pub mod handlers;
pub mod http_io;
pub mod metrics;
pub mod reply;
pub mod routing;
pub mod serve;
pub mod state;
pub mod telemetry;
pub mod v2;
