//! Configuration: the TOML file operators write, checked into an immutable
//! [`Config`] snapshot.
//!
//! - [`raw`]: the file's shape (`deny_unknown_fields`).
//! - [`validate`]: checks and defaults, with field-path errors.
//! - [`types`]: what the server runs on.
//!
//! With no `--config`, [`load_default`] serves the bundled example models
//! (`default.toml`, embedded in the binary) relative to the current folder.

pub mod admin_hosts_section;
pub mod cache_section;
pub mod calibrate_section;
pub mod connections_section;
pub mod control_section;
pub mod draft_section;
pub mod edit;
pub mod grpc_section;
pub mod issue;
pub mod one_of;
pub mod proxy_raw;
pub mod proxy_types;
pub mod raw;
pub mod record_files;
pub mod record_section;
pub mod redact;
pub mod resolver;
pub mod secret;
pub mod size;
pub mod store_section;
pub mod telemetry_section;
pub mod text_section;
pub mod types;
pub mod upstream_section;
pub mod validate;

pub use issue::ConfigIssue;
pub use proxy_types::{PrefixRouteConfig, ProxyConfig, UpstreamConfig, UpstreamKind, UpstreamModelConfig};
pub use resolver::use_resolver;
pub use types::{
    AdminConfig, ApiKey, CacheConfig, Config, Limits, RedisConfig, ReloadConfig, RouteAuth, RouteCache,
    RouteConfig, ServerConfig, TokenSource,
};

use std::path::Path;

/// The example config embedded in the binary, used when no file is given.
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");

/// Parses and checks TOML text; relative paths start at `base_dir`.
pub fn parse(text: &str, base_dir: &Path) -> Result<Config, Vec<ConfigIssue>> {
    let deserializer =
        toml::Deserializer::parse(text).map_err(|e| vec![ConfigIssue::new("(syntax)", located(text, &e))])?;
    let raw: raw::RawConfig = serde_path_to_error::deserialize(deserializer)
        .map_err(|e| vec![ConfigIssue::new(e.path().to_string(), located(text, e.inner()))])?;
    validate::validate(raw, base_dir)
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
