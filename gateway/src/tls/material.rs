//! A listener's certificate, key and (optional) client CA, read from their
//! PEM files and checked into a ready rustls [`ServerConfig`]: the files
//! exist and parse, the key matches the certificate, the certificate is
//! valid now, and the client CA holds at least one certificate. Built when
//! a config is checked (start-up, `check-config`, every reload), so a
//! broken pair is refused with its reason before it can serve.

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The protocols a listener offers in ALPN, most preferred first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// `h2` then `http/1.1` (the V2 and admin listeners).
    H2Http1,
    /// `h2` only (the gRPC listener).
    H2,
}

impl Alpn {
    fn wire(self) -> Vec<Vec<u8>> {
        match self {
            Alpn::H2Http1 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            Alpn::H2 => vec![b"h2".to_vec()],
        }
    }
}

/// The files of one listener's TLS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC).
    pub key: PathBuf,
    /// PEM CA certificates client certificates must chain to; `None`: no
    /// client certificate is asked for.
    pub client_ca: Option<PathBuf>,
}

/// Why a listener's TLS files cannot be used. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file is missing or unreadable.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O or PEM error.
        reason: String,
    },
    /// A file has no PEM block of the kind expected.
    #[error("{path} holds no {what} (expected PEM \"-----BEGIN {what}-----\")")]
    Empty {
        /// The file.
        path: PathBuf,
        /// What was looked for.
        what: &'static str,
    },
    /// The leaf certificate cannot be parsed as X.509.
    #[error("{path}: the first certificate is not valid X.509: {reason}")]
    BadCertificate {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// The leaf certificate's validity does not include now.
    #[error("{path}: the certificate {when}")]
    NotValidNow {
        /// The file.
        path: PathBuf,
        /// "expired at ..." or "is not valid before ...".
        when: String,
    },
    /// rustls refused the pair (key not matching the certificate, a key
    /// type it cannot sign with) or the client CA.
    #[error("{what}: {reason}")]
    Refused {
        /// What was refused.
        what: String,
        /// rustls's reason.
        reason: String,
    },
}

/// A checked certificate and key, ready to accept connections.
#[derive(Debug)]
pub struct TlsMaterial {
    /// The rustls settings every new connection of the listener uses.
    pub server_config: Arc<ServerConfig>,
    /// When the leaf certificate expires (seconds since the Unix epoch).
    pub not_after: i64,
    /// The same, as text (`Nov 27 13:00:00 2027 +00:00`).
    pub not_after_text: String,
    /// The leaf certificate's serial number (hex), for logs and tests.
    pub serial: String,
    /// The leaf certificate's subject, as text.
    pub subject: String,
    /// Whether client certificates are required.
    pub client_auth: bool,
}

impl TlsMaterial {
    /// Seconds until the certificate expires (negative once expired).
    pub fn expires_in_s(&self) -> i64 {
        self.not_after.saturating_sub(unix_now())
    }

    /// One line for `check-config`: whose certificate, its serial, when it
    /// expires and whether client certificates are required.
    pub fn describe(&self) -> String {
        let days = self.expires_in_s() / 86_400;
        let mtls = if self.client_auth { "; client certificates required" } else { "" };
        format!(
            "certificate {} (serial {}) expires {} (in {days} days){mtls}",
            self.subject, self.serial, self.not_after_text
        )
    }
}

/// The crypto provider of every listener and every backend connection
/// (ring, as Pingora's rustls backend uses), built once.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: std::sync::OnceLock<Arc<CryptoProvider>> = std::sync::OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

/// Reads and checks `files` into settings offering `alpn`.
pub fn load(files: &TlsFiles, alpn: Alpn) -> Result<TlsMaterial, TlsError> {
    let chain = read_certs(&files.cert)?;
    let key = read_key(&files.key)?;
    let leaf = Leaf::parse(&files.cert, chain.first())?;
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| refused("the TLS protocol versions", &e))?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in read_certs(ca)? {
                roots.add(cert).map_err(|e| refused(&format!("{}: a CA certificate", ca.display()), &e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Refused {
                    what: format!("{}: the client CA", ca.display()),
                    reason: e.to_string(),
                })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| TlsError::Refused {
        what: format!("{} with {}", files.cert.display(), files.key.display()),
        reason: match e {
            rustls::Error::InconsistentKeys(_) => "the private key does not match the certificate".into(),
            other => other.to_string(),
        },
    })?;
    config.alpn_protocols = alpn.wire();
    Ok(TlsMaterial {
        server_config: Arc::new(config),
        not_after: leaf.not_after,
        not_after_text: leaf.not_after_text,
        serial: leaf.serial,
        subject: leaf.subject,
        client_auth: files.client_ca.is_some(),
    })
}

/// What the gateway reads from the leaf certificate.
struct Leaf {
    not_after: i64,
    not_after_text: String,
    serial: String,
    subject: String,
}

impl Leaf {
    /// Parses `cert` (from `path`) and checks it is valid now.
    fn parse(path: &Path, cert: Option<&CertificateDer<'static>>) -> Result<Leaf, TlsError> {
        let cert = cert.ok_or_else(|| TlsError::Empty { path: path.into(), what: "CERTIFICATE" })?;
        let (_, x509) = x509_parser::parse_x509_certificate(cert.as_ref())
            .map_err(|e| TlsError::BadCertificate { path: path.into(), reason: e.to_string() })?;
        let validity = x509.validity();
        let (not_before, not_after) = (validity.not_before.timestamp(), validity.not_after.timestamp());
        let now = unix_now();
        if now > not_after {
            let when = format!("expired at {}", validity.not_after);
            return Err(TlsError::NotValidNow { path: path.into(), when });
        }
        if now < not_before {
            let when = format!("is not valid before {}", validity.not_before);
            return Err(TlsError::NotValidNow { path: path.into(), when });
        }
        Ok(Leaf {
            not_after,
            not_after_text: validity.not_after.to_string(),
            serial: x509.raw_serial_as_string(),
            subject: x509.subject().to_string(),
        })
    }
}

/// Every certificate in the PEM file at `path`.
fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| read_error(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::Empty { path: path.into(), what: "CERTIFICATE" });
    }
    Ok(certs)
}

/// The first private key in the PEM file at `path`.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => {
            TlsError::Empty { path: path.into(), what: "PRIVATE KEY" }
        }
        other => read_error(path, other),
    })
}

fn read_error(path: &Path, e: rustls_pki_types::pem::Error) -> TlsError {
    let reason = match e {
        rustls_pki_types::pem::Error::Io(io) => io.to_string(),
        other => format!("not PEM: {other}"),
    };
    TlsError::Read { path: path.into(), reason }
}

fn refused(what: &str, e: &rustls::Error) -> TlsError {
    TlsError::Refused { what: what.into(), reason: e.to_string() }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, cert: &str, key: &str) -> TlsFiles {
        TlsFiles { cert: dir.join(cert), key: dir.join(key), client_ca: None }
    }

    #[test]
    fn a_missing_file_is_named_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let err = load(&files(dir.path(), "none.pem", "none.key"), Alpn::H2Http1).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("none.pem") && text.contains("cannot read"), "{text}");
    }

    #[test]
    fn a_file_without_pem_blocks_says_what_it_lacks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.pem"), "hello\n").unwrap();
        let err = load(&files(dir.path(), "c.pem", "k.pem"), Alpn::H2).unwrap_err();
        assert!(matches!(err, TlsError::Empty { what: "CERTIFICATE", .. }), "{err}");
    }
}
