//! Where a TLS listener takes the settings for each new connection: the
//! config snapshot in force when the connection arrives, so a reload that
//! rotated the certificate applies to the next connection and never to an
//! open one.

use super::material::TlsMaterial;
use crate::config::tls_section::{ListenerTls, TlsConfig};
use crate::state::AppState;
use pingora::listeners::tls::Acceptor;
use std::sync::Arc;

/// One listener's TLS settings, read from the snapshot in force.
#[derive(Clone)]
pub struct TlsSource {
    state: Arc<AppState>,
    pick: fn(&ListenerTls) -> Option<&TlsConfig>,
}

impl TlsSource {
    /// The V2 listener's (`server.tls`).
    pub fn api(state: &Arc<AppState>) -> TlsSource {
        TlsSource { state: state.clone(), pick: |t| t.api.as_ref() }
    }

    /// The admin listener's (`server.admin_tls`).
    pub fn admin(state: &Arc<AppState>) -> TlsSource {
        TlsSource { state: state.clone(), pick: |t| t.admin.as_ref() }
    }

    /// The gRPC listener's (`server.grpc_tls`).
    pub fn grpc(state: &Arc<AppState>) -> TlsSource {
        TlsSource { state: state.clone(), pick: |t| t.grpc.as_ref() }
    }

    /// The settings in force; `None` when the listener is cleartext.
    pub fn material(&self) -> Option<Arc<TlsMaterial>> {
        let snap = self.state.snapshot.load();
        (self.pick)(&snap.config.server.tls).map(|t| t.material.clone())
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
