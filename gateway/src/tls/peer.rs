//! The identity a verified client certificate gives (`client_ca` on a
//! listener): its subject's common name (CN), which routes may accept as
//! a tenant beside API keys (`auth.keys[].client_cert_cn`). Read once per
//! connection, after the handshake verified the chain against the CA.

use x509_parser::prelude::{FromDer, X509Certificate};

/// The subject CN of the DER certificate `der` (the first, when it has
/// several); `None` when it cannot be parsed or has no CN as text.
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(String::from)
}

#[cfg(test)]
mod tests {
    use super::common_name;

    #[test]
    fn not_a_certificate_has_no_name() {
        assert_eq!(common_name(b""), None);
        assert_eq!(common_name(b"\x30\x03\x02\x01\x01"), None);
    }
}
