//! `server.tls`, `server.admin_tls`, `server.grpc_tls`: TLS on the V2, admin
//! and gRPC listeners (absent: cleartext), and `server.h2c` (HTTP/2 with
//! prior knowledge on a cleartext V2 listener). The files are read and
//! checked here ([`crate::tls::material`]), so a missing file, a PEM that
//! does not parse, a key that does not match its certificate or an expired
//! certificate is a config problem at its field path: start-up refuses
//! it, and a reload refuses it while the running certificate keeps serving.

use super::issue::Issues;
use crate::tls::material::{self, Alpn, TlsFiles, TlsMaterial};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

/// `{ cert, key, client_ca }` of one listener.
#[derive(Debug, Deserialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    /// PEM certificate chain, leaf first (relative to the config file's
    /// folder). Re-read on every reload: rotation.
    pub cert: String,
    /// PEM private key of the leaf (PKCS#8, RSA or EC).
    pub key: String,
    /// PEM CA certificate(s): when set, clients must present a
    /// certificate that chains to one of them (mTLS).
    pub client_ca: Option<String>,
}

/// One listener's TLS, checked.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// The files (absolute or relative to the config's folder).
    pub files: TlsFiles,
    /// What they hold, ready to serve.
    pub material: Arc<TlsMaterial>,
}

/// The TLS of every listener (`None`: cleartext).
#[derive(Debug, Clone, Default)]
pub struct ListenerTls {
    /// `server.tls`, the V2 listener.
    pub api: Option<TlsConfig>,
    /// `server.admin_tls`.
    pub admin: Option<TlsConfig>,
    /// `server.grpc_tls`.
    pub grpc: Option<TlsConfig>,
}

impl ListenerTls {
    /// Each listener's name (the metrics label) and its TLS, when on.
    pub fn each(&self) -> impl Iterator<Item = (&'static str, &TlsConfig)> {
        [("api", &self.api), ("admin", &self.admin), ("grpc", &self.grpc)]
            .into_iter()
            .filter_map(|(name, tls)| tls.as_ref().map(|t| (name, t)))
    }

    /// One line per TLS listener, for `check-config`:
    /// `server.tls: certificate CN=... (serial ...) expires ... (in N days)`.
    pub fn describe(&self) -> Vec<String> {
        self.each().map(|(name, tls)| format!("{}: {}", field_path(name), tls.material.describe())).collect()
    }
}

/// The config field of listener `name` (`api`, `admin`, `grpc`).
pub fn field_path(name: &str) -> &'static str {
    match name {
        "admin" => "server.admin_tls",
        "grpc" => "server.grpc_tls",
        _ => "server.tls",
    }
}

/// Checks the three listeners' TLS tables; paths start at `base_dir`.
/// (`server.grpc_tls` without a gRPC listener is checked, and unused.)
pub fn check(raw: [Option<&RawTls>; 3], base_dir: &Path, issues: &mut Issues) -> ListenerTls {
    let [api, admin, grpc] = raw;
    ListenerTls {
        api: api.and_then(|t| one(t, "server.tls", Alpn::H2Http1, base_dir, issues)),
        admin: admin.and_then(|t| one(t, "server.admin_tls", Alpn::H2Http1, base_dir, issues)),
        grpc: grpc.and_then(|t| one(t, "server.grpc_tls", Alpn::H2, base_dir, issues)),
    }
}

fn one(raw: &RawTls, path: &str, alpn: Alpn, base_dir: &Path, issues: &mut Issues) -> Option<TlsConfig> {
    let mut empty = false;
    for (field, value) in [("cert", &raw.cert), ("key", &raw.key)] {
        if value.trim().is_empty() {
            issues.push(format!("{path}.{field}"), "must name a PEM file");
            empty = true;
        }
    }
    if empty {
        return None;
    }
    let files = TlsFiles {
        cert: base_dir.join(&raw.cert),
        key: base_dir.join(&raw.key),
        client_ca: raw.client_ca.as_ref().map(|ca| base_dir.join(ca)),
    };
    match material::load(&files, alpn) {
        Ok(material) => Some(TlsConfig { files, material: Arc::new(material) }),
        Err(e) => {
            issues.push(path, e.to_string());
            None
        }
    }
}
