//! Where a TLS listener takes the settings for each new connection: a
//! function the server composes over the config snapshot in force (see
//! `serve` and `grpc::listener`), so a reload that rotated the certificate
//! applies to the next connection and never to an open one.

use super::material::TlsMaterial;
use pingora::listeners::tls::Acceptor;
use std::sync::Arc;

/// One listener's TLS settings in force.
#[derive(Clone)]
pub struct TlsSource {
    load: Arc<dyn Fn() -> Option<Arc<TlsMaterial>> + Send + Sync>,
}

impl TlsSource {
    /// Settings read by `load` when each connection arrives (`None`: the
    /// listener has no TLS settings in force).
    pub fn new(load: impl Fn() -> Option<Arc<TlsMaterial>> + Send + Sync + 'static) -> TlsSource {
        TlsSource { load: Arc::new(load) }
    }

    /// The settings in force.
    pub fn material(&self) -> Option<Arc<TlsMaterial>> {
        (self.load)()
    }

    /// A Pingora acceptor with the settings in force (cheap: it shares
    /// them).
    pub fn acceptor(&self) -> Option<Acceptor> {
        self.material().map(|m| Acceptor::from_server_config(m.server_config.clone()))
    }

    /// A tokio-rustls acceptor with the settings in force (the gRPC
    /// listener's).
    pub fn rustls_acceptor(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.material().map(|m| tokio_rustls::TlsAcceptor::from(m.server_config.clone()))
    }
}
