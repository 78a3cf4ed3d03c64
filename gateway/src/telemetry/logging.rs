//! The process's `tracing` subscriber: logs to stderr (text or JSON lines)
//! through the log buffer ([`super::log_sink`]), filtered by `RUST_LOG`; plus, when
//! `[telemetry] otlp_endpoint` is set, the OpenTelemetry layer that turns
//! Switchyard's spans into exported traces.
//!
//! Log lines written while serving a request carry its request id
//! ([`super::log_format`]).
//!
//! Each layer has its own filter: `RUST_LOG` decides what is logged and
//! never what is traced. The trace layer takes Switchyard's spans (the
//! per-request span at INFO, its children at DEBUG) and WARN/ERROR events
//! (as span events). Without an endpoint the trace layer is not installed
//! at all: no request span is created and the DEBUG child spans stay
//! disabled at their call sites, so tracing costs nothing.

use super::log_format::RequestIdFormat;
use super::log_sink::{LogGuard, LogSink};
use crate::config::redact::redact_url;
use crate::config::telemetry_section::TelemetryConfig;
use tracing::Level;
use tracing_subscriber::filter::{filter_fn, FilterExt, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// The log filter when `RUST_LOG` is unset.
pub const DEFAULT_FILTER: &str = "info,pingora=warn,ort=warn";

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// The stderr log layer: JSON lines or text; colours only on a terminal.
/// Lines go through the log buffer ([`LogSink`]); the returned sink is
/// that buffer, the guard writes what is pending when dropped.
fn log_layer(json: bool) -> anyhow::Result<(BoxedLayer, LogSink, LogGuard, bool)> {
    use std::io::IsTerminal;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let ansi = std::io::stderr().is_terminal();
    let (sink, guard) = LogSink::start(Box::new(std::io::stderr()))?;
    let layer = tracing_subscriber::fmt::layer().with_writer(sink.clone()).with_ansi(ansi);
    let layer: BoxedLayer = if json {
        layer.json().map_event_format(RequestIdFormat::json).with_filter(filter).boxed()
    } else {
        layer.map_event_format(RequestIdFormat::text).with_filter(filter).boxed()
    };
    Ok((layer, sink, guard, ansi))
}

/// Installs the global subscriber: logs, and traces when `telemetry` is
/// given (the exporter is built here, so call it outside any async
/// runtime). `log` records (Pingora's) are forwarded too.
pub fn init(json: bool, telemetry: Option<&TelemetryConfig>) -> anyhow::Result<LogGuard> {
    let (logs, sink, guard, ansi) = log_layer(json)?;
    let registry = tracing_subscriber::registry().with(logs);
    match telemetry {
        None => {
            registry.try_init()?;
            // Plain, untraced lines: the access log may write its own.
            if !ansi {
                super::access_log::write_by_hand_into(sink, json);
            }
        }
        Some(config) => {
            let tracer = super::otlp::install(super::otlp::provider(config)?);
            let switchyard = Targets::new()
                .with_target("switchyard", Level::DEBUG)
                .with_target("switchyard_runtime", Level::DEBUG);
            let spans_and_warnings = filter_fn(|m| m.is_span() || *m.level() <= Level::WARN);
            // Parents come from the tracing span tree, so the OTel context
            // need not be attached on every poll; no busy/idle timings.
            let traces = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_location(false)
                .with_threads(false)
                .with_context_activation(false)
                .with_tracked_inactivity(false)
                .with_filter(switchyard.and(spans_and_warnings));
            registry.with(traces).try_init()?;
            super::set_enabled();
            tracing::info!(endpoint = %redact_url(&config.otlp_endpoint), ratio = config.sampling_ratio,
                "exporting traces (OTLP/HTTP)");
        }
    }
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test in this binary that installs the global subscriber.
    #[test]
    fn default_logging_keeps_the_global_level_at_info() {
        std::env::remove_var("RUST_LOG");
        let _guard = init(false, None).unwrap();
        // Asked of the installed subscriber, not `LevelFilter::current()`:
        // that is the maximum over every live dispatcher, and other tests
        // in this binary hold scoped TRACE-level ones while they run.
        assert!(tracing::enabled!(Level::INFO));
        assert!(!tracing::enabled!(Level::DEBUG));
        assert!(!tracing::enabled!(target: "switchyard::telemetry::spans", Level::DEBUG));
        assert!(!super::super::enabled());
    }
}
