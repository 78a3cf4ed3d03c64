//! Client connections: how many a listener holds open, how long an idle
//! one is kept, how long a request head may take to arrive, and noticing
//! a client that left while its request is computed.
//!
//! Each listener's app is wrapped in a [`GuardedApp`] with its own
//! [`ConnTable`]. A connection goes through three phases
//! ([`state::Phase`]): idle (no request: closed after
//! `server.keepalive_timeout_s`), head (a request's first byte arrived:
//! its head must be complete within `server.header_timeout_ms`), busy (a
//! request is served under its own limits). The app moves it between them
//! with [`request_started`] (head parsed) and [`request_finished`]
//! (response done). At `server.max_connections` the connections waiting
//! longest without a request in progress are closed to make room; a new
//! connection is refused with a 503 only when there are none.
//!
//! Why at this level: Pingora's read timeout applies per read, so a head
//! trickled one byte at a time never times out, and keep-alive waits are
//! unbounded; the transport sees every read and can bound them all.
//!
//! The listeners themselves ([`Listener`]) are the gateway's, not
//! Pingora's: they bind at start-up (port 0 allowed) and close without
//! losing a connection they accepted (see [`listener`]).

pub mod client_gone;
pub mod coarse_clock;
pub mod guarded_app;
pub mod h2_calls;
pub mod listen_socket;
pub mod listener;
pub mod peer_names;
pub mod read_guard;
pub mod rlimit;
pub mod state;
pub mod stream;
pub mod table;

pub use guarded_app::GuardedApp;
pub use listener::{Listener, ListenerStatus};
pub use table::{ConnSnapshot, ConnTable};

use pingora::prelude::Session;
use state::Phase;
use std::os::unix::io::RawFd;
use stream::GuardedStream;

/// The guarded transport of `session`'s connection (HTTP/1 only).
fn guarded(session: &Session) -> Option<&GuardedStream> {
    let stream = session.as_downstream().stream()?;
    (**stream).as_any().downcast_ref::<GuardedStream>()
}

/// The addresses of an HTTP/2 session's connection, from its digest.
fn h2_socket(session: &Session) -> Option<h2_calls::ConnKey> {
    let socket = session.as_downstream().digest()?.socket_digest.as_ref()?;
    Some((*socket.local_addr()?.as_inet()?, *socket.peer_addr()?.as_inet()?))
}

/// Marks the connection as serving a request: its head has been read, so
/// the head deadline no longer applies. Call once per request, first.
pub fn request_started(session: &Session) {
    if let Some(stream) = guarded(session) {
        stream.state().set_phase(Phase::Busy, stream.table().now_ms());
    } else if let Some(key) = h2_socket(session) {
        h2_calls::call_started(key);
    }
}

/// Marks the connection as idle: the request's response is done, and the
/// keep-alive timeout runs until the next request's first byte. Call once
/// per request, last.
pub fn request_finished(session: &Session) {
    if let Some(stream) = guarded(session) {
        stream.state().set_phase(Phase::Idle, stream.table().now_ms());
    } else if let Some(key) = h2_socket(session) {
        h2_calls::call_finished(key);
    }
}

/// The socket of `session`'s connection, for [`client_gone::client_gone`].
pub fn socket_fd(session: &Session) -> Option<RawFd> {
    session.as_downstream().stream().map(|s| (**s).id())
}
