//! Configuration: the TOML file operators write, checked into an immutable
//! [`Config`] snapshot.
//!
//! One `*_section.rs` per TOML table holds that table's raw serde type
//! (`deny_unknown_fields`), its checked type and its `check(raw, ..,
//! &mut Issues)`, which reports every problem with its field path
//! ([`issue`]). Closed sets of words are serde enums read through
//! [`one_of::OneOf`].
//!
//! - [`raw`]: [`raw::RawConfig`], the whole file, composing the sections'
//!   raw types.
//! - [`validate`]: the top-level check, calling each section's and what
//!   spans sections.
//! - [`types`]: [`Config`], what the server runs on, composing the
//!   sections' checked types.
//!
//! With no `--config`, [`load_default`] serves the bundled example models
//! (`default.toml`, embedded in the binary) relative to the current folder.

pub mod admin_hosts_section;
pub mod cache_section;
pub mod calibrate_section;
pub mod candidate_section;
pub mod client_tls_section;
pub mod connections_section;
pub mod control_section;
pub mod draft_section;
pub mod edit;
pub mod fleet_limits_section;
pub mod grpc_section;
pub mod http2_section;
pub mod issue;
pub mod model_section;
pub mod one_of;
pub mod onnxruntime_section;
pub mod prefix_route_section;
pub mod raw;
pub mod record_files;
pub mod record_section;
pub mod redact;
pub mod resolver;
pub mod route_section;
pub mod schema;
pub mod schema_default;
pub mod secret;
pub mod server_section;
pub mod size;
pub mod sticky_section;
pub mod store_section;
pub mod telemetry_section;
pub mod tenant_section;
pub mod text_section;
pub mod tls_section;
pub mod types;
pub mod upstream_section;
pub mod validate;

pub use cache_section::{CacheConfig, RedisConfig, RouteCache};
pub use control_section::{AdminConfig, RouteAuth, TokenSource};
pub use issue::ConfigIssue;
pub use prefix_route_section::PrefixRouteConfig;
pub use resolver::use_resolver;
pub use route_section::RouteConfig;
pub use schema::config_json_schema;
pub use server_section::{Limits, ServerConfig};
pub use types::{Config, ProxyConfig};
pub use upstream_section::{UpstreamConfig, UpstreamModelConfig};

use std::path::Path;

/// The example config embedded in the binary, used when no file is given.
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");

/// Parses and checks TOML text; relative paths start at `base_dir`.
pub fn parse(text: &str, base_dir: &Path) -> Result<Config, Vec<ConfigIssue>> {
    let deserializer =
        toml::Deserializer::parse(text).map_err(|e| vec![ConfigIssue::new("(syntax)", located(text, &e))])?;
    let raw: raw::RawConfig = serde_path_to_error::deserialize(deserializer)
        .map_err(|e| vec![ConfigIssue::new(e.path().to_string(), located(text, e.inner()))])?;
    validate::check(raw, base_dir)
}

/// Reads and checks a config file; relative paths start at its folder.
pub fn load_file(path: &Path) -> Result<Config, Vec<ConfigIssue>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![ConfigIssue::new(path.display().to_string(), format!("cannot read: {e}"))])?;
    parse_file(&text, path)
}

/// Checks `text`, the contents of the config file at `path`: [`parse`]
/// with relative paths starting at its folder, and no route recording
/// into the file itself ([`record_files`]).
pub fn parse_file(text: &str, path: &Path) -> Result<Config, Vec<ConfigIssue>> {
    let config = parse(text, base_dir(path))?;
    match record_files::check_config_file(&config.routes, path) {
        issues if issues.is_empty() => Ok(config),
        issues => Err(issues),
    }
}

/// The folder a config file's relative paths start from: its own.
pub fn base_dir(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// The embedded example config, with paths relative to the current folder.
pub fn load_default() -> Result<Config, Vec<ConfigIssue>> {
    parse(DEFAULT_CONFIG, Path::new("."))
}

/// The error's own message with the line it points at.
fn located(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let line = text.get(..span.start).map_or(0, |t| t.matches('\n').count()) + 1;
            format!("{} (line {line})", e.message().trim())
        }
        None => e.message().trim().to_string(),
    }
}

#[cfg(test)]
mod tests;
