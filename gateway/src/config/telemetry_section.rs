//! `[telemetry]`: OpenTelemetry trace export over OTLP/HTTP (protobuf).
//! Absent, or without `otlp_endpoint`, traces are off and cost nothing.
//! Read once at start-up (a reload does not change it). See
//! [`crate::telemetry`] for what is traced.

use super::issue::Issues;
use super::schema_default::some_u64;
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// Default `service.name` of the exported spans.
pub const DEFAULT_SERVICE_NAME: &str = "switchyard";
/// Default share of new traces sampled.
pub const DEFAULT_SAMPLING_RATIO: f64 = 1.0;
/// Default wait of finished spans before a batch is exported.
pub const DEFAULT_BATCH_DELAY_MS: u64 = 1000;
/// Default timeout of one export request.
pub const DEFAULT_EXPORT_TIMEOUT_MS: u64 = 10_000;

/// `[telemetry]` as written.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    /// OTLP/HTTP traces URL, e.g. `http://127.0.0.1:4318/v1/traces`
    /// (used verbatim; `https://` is verified against the system roots);
    /// absent = tracing off.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans, default `switchyard`.
    #[schemars(default = "default_service_name")]
    pub service_name: Option<String>,
    /// Share of new traces sampled, 0.0 to 1.0, default 1.0. A request
    /// with a `traceparent` follows its caller's sampling decision.
    #[schemars(default = "default_sampling_ratio", range(min = 0, max = 1))]
    pub sampling_ratio: Option<f64>,
    /// How long finished spans wait to be exported in a batch, default
    /// 1000 ms.
    #[schemars(default = "some_u64::<DEFAULT_BATCH_DELAY_MS>", range(min = 1))]
    pub batch_delay_ms: Option<u64>,
    /// Timeout of one export request, default 10000 ms.
    #[schemars(default = "some_u64::<DEFAULT_EXPORT_TIMEOUT_MS>", range(min = 1))]
    pub export_timeout_ms: Option<u64>,
}

/// `[telemetry]`, checked; present only when an endpoint is configured.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// Where spans are POSTed (OTLP/HTTP protobuf).
    pub otlp_endpoint: String,
    /// `service.name` resource attribute.
    pub service_name: String,
    /// Ratio of root traces sampled.
    pub sampling_ratio: f64,
    /// Export batching delay.
    pub batch_delay: Duration,
    /// Timeout of one export.
    pub export_timeout: Duration,
}

/// The schema's `telemetry.service_name` default.
fn default_service_name() -> Option<&'static str> {
    Some(DEFAULT_SERVICE_NAME)
}

/// The schema's `telemetry.sampling_ratio` default.
fn default_sampling_ratio() -> Option<f64> {
    Some(DEFAULT_SAMPLING_RATIO)
}

/// Checks `[telemetry]`; `None` when traces are off.
pub fn check(raw: Option<&RawTelemetry>, issues: &mut Issues) -> Option<TelemetryConfig> {
    let raw = raw?;
    let service_name = raw.service_name.clone().unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_string());
    if service_name.trim().is_empty() {
        issues.push("telemetry.service_name", "must not be empty");
    }
    let sampling_ratio = raw.sampling_ratio.unwrap_or(DEFAULT_SAMPLING_RATIO);
    if !(0.0..=1.0).contains(&sampling_ratio) {
        issues.push("telemetry.sampling_ratio", format!("{sampling_ratio} is not between 0.0 and 1.0"));
    }
    let batch_delay = issues.millis(raw.batch_delay_ms, DEFAULT_BATCH_DELAY_MS, "telemetry.batch_delay_ms");
    let export_timeout =
        issues.millis(raw.export_timeout_ms, DEFAULT_EXPORT_TIMEOUT_MS, "telemetry.export_timeout_ms");
    let endpoint = raw.otlp_endpoint.as_deref()?;
    if let Err(message) = check_endpoint(endpoint) {
        issues.push("telemetry.otlp_endpoint", message);
    }
    Some(TelemetryConfig {
        otlp_endpoint: endpoint.to_string(),
        service_name,
        sampling_ratio,
        batch_delay,
        export_timeout,
    })
}

/// An `http://` or `https://host[:port]/path` URL (https: TLS verified
/// against the system roots, which `SSL_CERT_FILE` can replace).
fn check_endpoint(endpoint: &str) -> Result<(), String> {
    // Messages show the endpoint without a password its user-info may hold.
    let url = &super::redact::redact_url(endpoint);
    let Some(rest) = endpoint.strip_prefix("http://").or_else(|| endpoint.strip_prefix("https://")) else {
        return Err(format!(
            "{url:?} is not an http:// or https:// URL, e.g. \"http://127.0.0.1:4318/v1/traces\""
        ));
    };
    let authority = rest.split('/').next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host_port)| host_port);
    let host_ok = !host_port.is_empty() && !authority.contains(char::is_whitespace);
    let port_ok = match host_port.rsplit_once(':') {
        Some((_, port)) if !host_port.ends_with(']') => port.parse::<u16>().is_ok(),
        _ => true,
    };
    if !host_ok || !port_ok {
        return Err(format!("{url:?} has no valid host[:port]"));
    }
    // What the exporter parses it with: a URL it refuses would stop the
    // server at start-up instead of failing this check.
    if endpoint.parse::<http::Uri>().is_err() {
        return Err(format!("{url:?} is not a valid URL"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::parse;
    use std::path::Path;
    use std::time::Duration;

    fn issues(text: &str) -> Vec<String> {
        parse(text, Path::new(".")).err().unwrap_or_default().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn absent_or_without_endpoint_is_off() {
        assert!(parse("", Path::new(".")).unwrap().telemetry.is_none());
        let c = parse("[telemetry]\nservice_name = \"gw\"\n", Path::new(".")).unwrap();
        assert!(c.telemetry.is_none());
    }

    #[test]
    fn defaults_and_values() {
        let c = parse("[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/v1/traces\"\n", Path::new("."))
            .unwrap()
            .telemetry
            .unwrap();
        assert_eq!(c.service_name, "switchyard");
        assert_eq!(c.sampling_ratio, 1.0);
        assert_eq!(c.batch_delay, Duration::from_millis(1000));
        let c = parse(
            "[telemetry]\notlp_endpoint = \"http://otel:4318/v1/traces\"\nsampling_ratio = 0.25\n\
             batch_delay_ms = 50\nservice_name = \"edge\"\n",
            Path::new("."),
        )
        .unwrap()
        .telemetry
        .unwrap();
        assert_eq!(
            (c.sampling_ratio, c.batch_delay, c.service_name.as_str()),
            (0.25, Duration::from_millis(50), "edge")
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        let all = issues(
            "[telemetry]\notlp_endpoint = \"ftp://x/v1/traces\"\nsampling_ratio = 1.5\nbatch_delay_ms = 0\n",
        );
        assert!(
            all.iter().any(|i| i.starts_with("telemetry.otlp_endpoint: ") && i.contains("https://")),
            "{all:?}"
        );
        assert!(all.iter().any(|i| i.starts_with("telemetry.sampling_ratio: ")), "{all:?}");
        assert!(all.iter().any(|i| i.starts_with("telemetry.batch_delay_ms: ")), "{all:?}");
        let all = issues("[telemetry]\notlp_endpoint = \"127.0.0.1:4318\"\n");
        assert!(all.iter().any(|i| i.starts_with("telemetry.otlp_endpoint: ")), "{all:?}");
        let all = issues("[telemetry]\notlp_endpoint = \"http://h:99999/v1/traces\"\n");
        assert!(all.iter().any(|i| i.contains("host[:port]")), "{all:?}");
        let all = issues("[telemetry]\notlp_endpiont = \"http://h/v1/traces\"\n");
        assert!(all.iter().any(|i| i.starts_with("telemetry")), "{all:?}");
        // What the exporter would refuse at start-up is refused here.
        let all = issues("[telemetry]\notlp_endpoint = \"http://h:4318/v1/tr aces\"\n");
        assert!(all.iter().any(|i| i.contains("not a valid URL")), "{all:?}");
    }

    #[test]
    fn a_password_in_the_endpoint_is_accepted_and_never_echoed() {
        let text = "[telemetry]\notlp_endpoint = \"http://u:s3cret@otel:4318/v1/traces\"\n";
        assert!(parse(text, Path::new(".")).unwrap().telemetry.is_some());
        for bad in
            ["https://u:s3cret@otel:99999/v1/traces", "http://u:s3cret@otel:99999/x", "ftp://u:s3cret@otel/"]
        {
            let all = issues(&format!("[telemetry]\notlp_endpoint = {bad:?}\n"));
            assert!(!all.is_empty() && all.iter().all(|i| !i.contains("s3cret")), "{all:?}");
        }
    }
}
