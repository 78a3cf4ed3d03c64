//! The certificate each TLS listener serves, read at scrape time from the
//! config snapshot in force (so a rotation shows at the next scrape).

use super::family::Family;
use crate::config::tls_section::ListenerTls;
use prometheus::proto::MetricFamily;

/// `switchyard_tls_certificate_expiry_seconds{listener}`: when each TLS
/// listener's certificate expires, as a Unix time (time left:
/// `switchyard_tls_certificate_expiry_seconds - time()`). No family when
/// no listener has TLS.
pub fn tls_families(tls: &ListenerTls) -> Vec<MetricFamily> {
    let mut expiry = Family::gauge(
        "switchyard_tls_certificate_expiry_seconds",
        "Unix time the certificate a TLS listener serves to new connections expires (api, admin, grpc).",
        &["listener"],
    );
    for (listener, config) in tls.each() {
        expiry.sample(&[listener], config.material.not_after as f64);
    }
    expiry.finish().into_iter().collect()
}
