//! Calls in progress on the HTTP listeners' HTTP/2 connections (ALPN `h2`
//! over TLS, or h2c). Pingora serves each HTTP/2 stream as a session of
//! its own that does not reach the connection's transport, so the app
//! cannot mark the connection busy through it as it does on HTTP/1. The
//! session's digest still names the connection's socket: each HTTP/2
//! connection is listed here by its addresses, and a call marks it busy
//! (no idle deadline, never closed for room) until its last call ends, as
//! the gRPC listener's calls do ([`crate::grpc::conn`]).

use super::state::{ConnState, Phase};
use super::table::ConnTable;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

/// A connection's (local, peer) addresses: unique among the open
/// connections of the process.
pub type ConnKey = (SocketAddr, SocketAddr);

/// The HTTP/2 connections open, by their addresses.
static LIVE: LazyLock<Mutex<HashMap<ConnKey, Arc<H2Conn>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// One HTTP/2 connection's calls.
#[derive(Debug)]
struct H2Conn {
    state: Arc<ConnState>,
    table: Arc<ConnTable>,
    calls: AtomicUsize,
}

/// A connection's entry; dropping it (the connection's end) removes it.
#[derive(Debug)]
pub struct Registration {
    key: ConnKey,
    conn: Arc<H2Conn>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut live = LIVE.lock();
        // The addresses may already belong to a newer connection.
        if live.get(&self.key).is_some_and(|c| Arc::ptr_eq(c, &self.conn)) {
            live.remove(&self.key);
        }
    }
}

/// Lists the connection `key` with its `state` in `table`.
pub fn register(key: ConnKey, state: Arc<ConnState>, table: Arc<ConnTable>) -> Registration {
    let conn = Arc::new(H2Conn { state, table, calls: AtomicUsize::new(0) });
    LIVE.lock().insert(key, conn.clone());
    Registration { key, conn }
}

fn find(key: ConnKey) -> Option<Arc<H2Conn>> {
    LIVE.lock().get(&key).cloned()
}

/// A call began on the connection `key` (nothing when it is not an
/// HTTP/2 connection of these listeners).
pub fn call_started(key: ConnKey) {
    if let Some(conn) = find(key) {
        if conn.calls.fetch_add(1, Ordering::AcqRel) == 0 {
            conn.state.set_phase(Phase::Busy, conn.table.now_ms());
        }
    }
}

/// A call ended on the connection `key`; the last one makes the
/// connection idle (and wakes its reader to arm the idle deadline).
pub fn call_finished(key: ConnKey) {
    if let Some(conn) = find(key) {
        let before = conn.calls.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if before == Ok(1) {
            conn.state.set_phase(Phase::Idle, conn.table.now_ms());
            conn.state.wake();
        }
    }
}
