//! TLS of the Pingora peers of an `https://` upstream (prefix routes and
//! HTTP health checks): TLS on, the address's server name as SNI (and
//! the name checked), the configured CA in place of the system roots,
//! the client certificate for mTLS, verification on or off.
//!
//! Built once per upstream ([`PeerTls::new`]); each peer shares its
//! certificates. Pingora keys its pool of upstream connections by all of
//! these, so TLS connections are reused like plain ones.

use crate::config::upstream_section::UpstreamTls;
use pingora::protocols::tls::CaType;
use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::{parse_x509, CertKey, WrappedX509};
use std::net::SocketAddr;
use std::sync::Arc;

/// The certificates every peer of one upstream carries.
#[derive(Clone)]
pub struct PeerTls {
    config: UpstreamTls,
    ca: Option<Arc<CaType>>,
    cert_key: Option<Arc<CertKey>>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls").field("config", &self.config).finish()
    }
}

impl PeerTls {
    /// The peers' TLS settings of an upstream configured with `config`
    /// (its certificates were parsed when the config was checked).
    pub fn new(config: &UpstreamTls) -> PeerTls {
        let settings = &config.settings;
        let ca = settings.ca.as_ref().map(|certs| {
            let wrapped: Vec<WrappedX509> =
                certs.iter().map(|c| WrappedX509::new(c.as_ref().to_vec(), parse_x509)).collect();
            Arc::<CaType>::from(wrapped)
        });
        let cert_key = settings.identity.as_ref().map(|id| {
            let chain = id.chain.iter().map(|c| c.as_ref().to_vec()).collect();
            Arc::new(CertKey::new(chain, id.key.secret_der().to_vec()))
        });
        PeerTls { config: config.clone(), ca, cert_key }
    }

    /// The name sent as SNI to `addr`.
    pub fn server_name(&self, addr: SocketAddr) -> String {
        self.config.server_name(addr)
    }

    /// A TLS peer for `addr`.
    pub fn peer(&self, addr: SocketAddr) -> HttpPeer {
        let mut peer = HttpPeer::new(addr, true, self.server_name(addr));
        self.apply(&mut peer);
        peer
    }

    /// Sets CA, client certificate and verification on `peer` (whose TLS
    /// flag and SNI the caller set).
    pub fn apply(&self, peer: &mut HttpPeer) {
        let verify = self.config.settings.verify;
        peer.options.verify_cert = verify;
        peer.options.verify_hostname = verify;
        peer.options.ca = self.ca.clone();
        peer.client_cert_key = self.cert_key.clone();
    }
}
