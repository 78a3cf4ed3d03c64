//! TLS on the listeners: the V2 and admin listeners through Pingora's
//! rustls backend ([`pingora::listeners::tls::Acceptor`], ALPN `h2` and
//! `http/1.1`), the gRPC listener through tokio-rustls (the acceptor
//! tonic's own TLS feature wraps) with the same rustls settings (ALPN
//! `h2`).
//!
//! Why rustls and not OpenSSL: it builds from crates alone (no system
//! OpenSSL headers or BoringSSL's cmake/Go build), it is what the gRPC
//! listener (tonic) and the object store already use, so every listener
//! shares one TLS stack and one settings type, and a settings object can
//! be handed to each new connection, which is what rotation needs.
//!
//! Rotation: the checked settings ([`material::TlsMaterial`]) are part of
//! the config snapshot. A reload (`SIGHUP`, `POST /admin/reload`, the file
//! watch) re-reads the PEM files while checking the new config; each new
//! connection takes the settings of the snapshot in force when it arrives
//! ([`source::TlsSource`], composed by the server over the snapshot), so
//! open connections keep theirs.
//!
//! A layer-2 module beside `config` (which checks the files through
//! [`material`]): it knows neither the config types nor the state. A broken new
//! pair fails the check and the whole reload is refused, with the old
//! settings still in force.

pub mod grpc_io;
pub mod material;
pub mod peer;
pub mod source;

pub use source::TlsSource;
