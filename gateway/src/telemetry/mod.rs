//! Logs and traces.
//!
//! - [`logging`]: the `tracing` subscriber: stderr logs (text or JSON,
//!   `RUST_LOG`) and, with `[telemetry] otlp_endpoint`, OpenTelemetry
//!   trace export over OTLP/HTTP protobuf ([`otlp`]).
//! - [`access_log`]: one line per request, written by hand into
//!   [`log_sink`] (the buffer a background thread writes in bursts).
//! - [`request`]: each request's id (on its log lines, through
//!   [`log_format`]) and, when tracing, its span.
//! - [`spans`]: the request's child spans (parse, cache lookup, decide,
//!   queue wait, inference, cache fill, upstream call).
//! - [`propagation`]: W3C `traceparent` in (the request span's parent) and
//!   out (upstream calls).
//!
//! Start-up: [`init`] once, outside any async runtime, after the config is
//! read. Shutdown: [`shutdown`] after the server stopped, to export the
//! last spans. With tracing off, [`enabled`] is false and no span is
//! created for requests.

pub mod access_log;
pub mod log_format;
pub mod log_sink;
pub mod logging;
pub mod otlp;
pub mod propagation;
pub mod request;
pub mod spans;

pub use request::{adopt_request_id, RequestObs};

use crate::config::telemetry_section::TelemetryConfig;
use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// True once trace export is installed.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn set_enabled() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Installs logging (JSON lines with `json`) and, when `telemetry` is
/// given, trace export. Keep the returned guard alive until the process
/// ends: dropping it flushes pending log lines.
pub fn init(json: bool, telemetry: Option<&TelemetryConfig>) -> anyhow::Result<log_sink::LogGuard> {
    logging::init(json, telemetry)
}

/// Exports the spans still queued and stops the exporter (no-op when
/// tracing is off). Call after `server.run` returns.
pub fn shutdown() {
    otlp::shutdown();
}
