//! `tls = { ca, client_cert, client_key, server_name, verify }`: how the
//! gateway speaks TLS to a backend it connects to, an `https://` upstream
//! (`upstreams[].tls`) or a `rediss://` Redis (`cache.redis.tls`).
//!
//! Every file is read and parsed when the config is checked, so an
//! unreadable file, a file without a PEM certificate or key, or a key that
//! does not belong to the certificate is refused at start-up (or at a
//! reload) with the field path and the reason, never at the first
//! request. The checked [`ClientTls`] holds the parsed certificates and a
//! ready rustls client configuration; two configs compare equal when the
//! files' contents are equal, so a reload sees a renewed certificate.
//!
//! Without `ca` the backend's certificate is verified against the system
//! roots (`/etc/ssl/certs`, or the `SSL_CERT_FILE`/`SSL_CERT_DIR` the
//! environment names).

use super::issue::Issues;
use super::schema_default::some_bool;
use crate::tls::material::provider;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// `cache.redis.tls = { ca, client_cert, client_key }`: the name checked
/// is the URL's host, and the certificate is always verified.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRedisTls {
    /// PEM file of the CA certificate(s) the server's certificate must
    /// chain to; default the system roots. Relative to the config file.
    pub ca: Option<String>,
    /// PEM file of the client certificate presented to a server that asks
    /// for one (`tls-auth-clients yes`); needs `client_key`.
    pub client_cert: Option<String>,
    /// PEM file of the private key of `client_cert`.
    pub client_key: Option<String>,
}

impl RawRedisTls {
    /// The same settings as an upstream's `tls`.
    pub fn as_client_tls(&self) -> RawClientTls {
        RawClientTls {
            ca: self.ca.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            server_name: None,
            verify: None,
        }
    }
}

/// `upstreams[].tls = { ... }`.
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawClientTls {
    /// PEM file of the CA certificate(s) the backend's certificate must
    /// chain to; default the system roots. Relative to the config file.
    pub ca: Option<String>,
    /// PEM file of the client certificate (and its chain) presented to a
    /// backend that asks for one (mTLS); needs `client_key`.
    pub client_cert: Option<String>,
    /// PEM file of the private key of `client_cert` (PKCS#8, PKCS#1 or SEC1).
    pub client_key: Option<String>,
    /// Name sent as SNI and checked against the backend's certificate;
    /// default the host of each address (a name, or an IP checked against
    /// the certificate's IP addresses).
    pub server_name: Option<String>,
    /// Verify the backend's certificate, default true. `false` accepts any
    /// certificate (traffic is encrypted but not authenticated): for tests
    /// only.
    #[schemars(default = "some_bool::<true>")]
    pub verify: Option<bool>,
}

/// A client certificate and its key.
#[derive(Clone)]
pub struct ClientIdentity {
    /// The certificate chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key, DER.
    pub key: Arc<PrivateKeyDer<'static>>,
    /// The certificate file's PEM text (for clients that take PEM).
    pub cert_pem: Vec<u8>,
    /// The key file's PEM text.
    pub key_pem: Vec<u8>,
}

/// TLS settings to one backend, checked.
#[derive(Clone)]
pub struct ClientTls {
    /// The configured CA certificates; `None` = the system roots.
    pub ca: Option<Vec<CertificateDer<'static>>>,
    /// The CA file's PEM text.
    pub ca_pem: Option<Vec<u8>>,
    /// The client certificate, for mTLS.
    pub identity: Option<ClientIdentity>,
    /// SNI and the name checked, overriding each address's host.
    pub server_name: Option<String>,
    /// Whether the backend's certificate is verified.
    pub verify: bool,
    /// A rustls client configuration with these roots, this identity and
    /// this verification.
    pub rustls: Arc<ClientConfig>,
}

impl PartialEq for ClientTls {
    /// Equal when the same certificates, key, name and verification are
    /// configured (the built rustls configuration follows from them).
    fn eq(&self, other: &Self) -> bool {
        self.ca == other.ca
            && self.identity.as_ref().map(|i| (&i.chain, &i.key_pem))
                == other.identity.as_ref().map(|i| (&i.chain, &i.key_pem))
            && self.server_name == other.server_name
            && self.verify == other.verify
    }
}

impl Eq for ClientTls {}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca_certificates", &self.ca.as_ref().map(Vec::len))
            .field("client_certificate", &self.identity.is_some())
            .field("server_name", &self.server_name)
            .field("verify", &self.verify)
            .finish()
    }
}

/// Checks `raw` at `path` (e.g. `upstreams[0].tls`); files are relative to
/// `base_dir`. `None` after an issue was recorded.
pub fn check(raw: &RawClientTls, base_dir: &Path, path: &str, issues: &mut Issues) -> Option<ClientTls> {
    let before = issues.len();
    let ca = raw.ca.as_ref().and_then(|file| {
        let at = format!("{path}.ca");
        let pem = read(base_dir, file, &at, issues)?;
        let certs = certificates(&pem, file, &at, issues)?;
        Some((certs, pem))
    });
    let identity = match (&raw.client_cert, &raw.client_key) {
        (Some(cert), Some(key)) => identity(base_dir, (cert, key), path, issues),
        (Some(_), None) => {
            issues.push(format!("{path}.client_key"), "missing: client_cert needs its private key");
            None
        }
        (None, Some(_)) => {
            issues.push(format!("{path}.client_cert"), "missing: client_key needs its certificate");
            None
        }
        (None, None) => None,
    };
    if let Some(name) = &raw.server_name {
        if ServerName::try_from(name.as_str()).is_err() {
            issues
                .push(format!("{path}.server_name"), format!("{name:?} is not a DNS name or an IP address"));
        }
    }
    if issues.len() > before {
        return None;
    }
    let verify = raw.verify.unwrap_or(true);
    match build(ca, identity, raw.server_name.clone(), verify) {
        Ok(tls) => Some(tls),
        Err(why) => {
            let field = if raw.client_cert.is_some() { "client_key" } else { "ca" };
            issues.push(format!("{path}.{field}"), why);
            None
        }
    }
}

/// The client identity of `client_cert` and `client_key`.
fn identity(
    base_dir: &Path,
    (cert, key): (&String, &String),
    path: &str,
    issues: &mut Issues,
) -> Option<ClientIdentity> {
    let cert_at = format!("{path}.client_cert");
    let key_at = format!("{path}.client_key");
    let cert_pem = read(base_dir, cert, &cert_at, issues);
    let key_pem = read(base_dir, key, &key_at, issues);
    let chain = cert_pem.as_ref().and_then(|pem| certificates(pem, cert, &cert_at, issues));
    let parsed_key = key_pem.as_ref().and_then(|pem| match PrivateKeyDer::from_pem_slice(pem) {
        // Pingora re-reads the key from its DER: its format must be recognisable there too.
        Ok(k) if PrivateKeyDer::try_from(k.secret_der()).is_ok() => Some(k),
        Ok(_) => {
            issues.push(key_at.clone(), format!("{key:?}: the key's DER is not PKCS#8, PKCS#1 or SEC1"));
            None
        }
        Err(e) => {
            issues.push(key_at.clone(), format!("{key:?} holds no PEM private key: {e}"));
            None
        }
    });
    Some(ClientIdentity { chain: chain?, key: Arc::new(parsed_key?), cert_pem: cert_pem?, key_pem: key_pem? })
}

/// The file's bytes, or an issue.
fn read(base_dir: &Path, file: &str, at: &str, issues: &mut Issues) -> Option<Vec<u8>> {
    match std::fs::read(base_dir.join(file)) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            issues.push(at, format!("cannot read {file:?}: {e}"));
            None
        }
    }
}

/// The PEM certificates in `pem` (at least one, each a parsable X.509
/// certificate), or an issue.
fn certificates(
    pem: &[u8],
    file: &str,
    at: &str,
    issues: &mut Issues,
) -> Option<Vec<CertificateDer<'static>>> {
    match CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>() {
        Ok(certs) if !certs.is_empty() => {
            for (n, cert) in certs.iter().enumerate() {
                if let Err(e) = RootCertStore::empty().add(cert.clone()) {
                    issues.push(
                        at,
                        format!("{file:?}: certificate {} is not a valid X.509 certificate: {e}", n + 1),
                    );
                    return None;
                }
            }
            Some(certs)
        }
        Ok(_) => {
            issues.push(at, format!("{file:?} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
            None
        }
        Err(e) => {
            issues.push(at, format!("{file:?} is not valid PEM: {e}"));
            None
        }
    }
}

/// Makes the listeners' and backends' provider kind
/// ([`crate::tls::material::provider`], ring) the process's default rustls provider, for clients
/// that take the default (the redis crate's TLS, reqwest's). Idempotent;
/// a default installed before is kept.
pub fn install_default_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The system's root certificates, read once.
fn system_roots() -> Result<Arc<RootCertStore>, String> {
    static ROOTS: OnceLock<Result<Arc<RootCertStore>, String>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let mut store = RootCertStore::empty();
            let (added, _ignored) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found.errors.first().map_or_else(String::new, |e| format!(" ({e})"));
                return Err(format!("the system has no root certificates{why}: set `ca`"));
            }
            Ok(Arc::new(store))
        })
        .clone()
}

/// Builds the rustls configuration: roots, identity (checked against its
/// certificate), verification.
fn build(
    ca: Option<(Vec<CertificateDer<'static>>, Vec<u8>)>,
    identity: Option<ClientIdentity>,
    server_name: Option<String>,
    verify: bool,
) -> Result<ClientTls, String> {
    let roots = match &ca {
        Some((certs, _)) => {
            let mut store = RootCertStore::empty();
            for cert in certs {
                store.add(cert.clone()).map_err(|e| format!("a CA certificate is not usable: {e}"))?;
            }
            Arc::new(store)
        }
        None if verify => system_roots()?,
        None => Arc::new(RootCertStore::empty()),
    };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots);
    let mut config = match &identity {
        Some(id) => builder
            .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
            .map_err(|e| format!("the key does not fit the client certificate: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    if !verify {
        config.dangerous().set_certificate_verifier(Arc::new(AcceptAny(provider())));
    }
    let (ca, ca_pem) = ca.map_or((None, None), |(certs, pem)| (Some(certs), Some(pem)));
    Ok(ClientTls { ca, ca_pem, identity, server_name, verify, rustls: Arc::new(config) })
}

/// `verify = false`: any certificate is accepted; the handshake's
/// signatures are still checked, so the connection is encrypted to
/// whoever holds the certificate's key.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
