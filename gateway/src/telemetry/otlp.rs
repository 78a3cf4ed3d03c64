//! The OTLP trace exporter: spans are batched on the SDK's own background
//! thread and POSTed as protobuf (`ExportTraceServiceRequest`) with a
//! blocking HTTP client, so nothing depends on Pingora's tokio runtimes.
//! The batch processor (not the simple one) keeps exports off the request
//! threads; [`shutdown`] exports what is left when the server stops.

use crate::config::redact::redact_url;
use crate::config::telemetry_section::TelemetryConfig;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider,
};
use opentelemetry_sdk::Resource;
use std::sync::OnceLock;

/// The instrumentation scope name of every span.
pub const SCOPE: &str = "switchyard";

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Builds the exporter and tracer provider for `config`. Call outside any
/// async runtime (the blocking HTTP client is created here).
pub fn provider(config: &TelemetryConfig) -> anyhow::Result<SdkTracerProvider> {
    let exporter = exporter(config)?;
    let batch = BatchConfigBuilder::default().with_scheduled_delay(config.batch_delay).build();
    let processor = BatchSpanProcessor::builder(exporter).with_batch_config(batch).build();
    // A request with a `traceparent` follows its caller's sampling flag;
    // new traces are sampled at the configured ratio.
    let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(config.sampling_ratio)));
    let resource = Resource::builder().with_service_name(config.service_name.clone()).build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(sampler)
        .with_resource(resource)
        .build())
}

/// Builds the exporter as [`provider`] does and drops it: what
/// `check-config` runs, so that an exporter `serve` could not build fails
/// the check too. Call outside any async runtime.
pub fn check(config: &TelemetryConfig) -> anyhow::Result<()> {
    exporter(config).map(drop)
}

/// The OTLP/HTTP exporter for `config`.
fn exporter(config: &TelemetryConfig) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
    opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(config.otlp_endpoint.clone())
        .with_timeout(config.export_timeout)
        .build()
        // The exporter's own message repeats the endpoint: not shown, it
        // may carry a password.
        .map_err(|e| {
            let why = e.to_string().replace(&config.otlp_endpoint, &redact_url(&config.otlp_endpoint));
            anyhow::anyhow!("OTLP exporter for {}: {why}", redact_url(&config.otlp_endpoint))
        })
}

/// Keeps `provider` for [`tracer`] and [`shutdown`]; returns its tracer.
/// Only the first call in a process takes effect.
pub fn install(provider: SdkTracerProvider) -> SdkTracer {
    let tracer = provider.tracer(SCOPE);
    let _ = PROVIDER.set(provider);
    TRACER.get_or_init(|| tracer).clone()
}

/// The installed tracer, for spans built with explicit timestamps.
pub fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// Exports the spans still queued and stops the exporter. Idempotent;
/// does nothing when tracing is off. Call after the server stopped, from
/// outside its runtimes.
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        // Shutting down exports what is queued first; a second call only
        // reports that it already happened.
        if let Err(e) = provider.shutdown() {
            tracing::debug!(error = %e, "trace exporter shutdown");
        }
    }
}
