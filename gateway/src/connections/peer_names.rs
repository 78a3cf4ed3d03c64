//! The verified client-certificate name (subject CN, [`crate::tls::peer`])
//! of each open TLS connection of the HTTP listener, by its addresses, so
//! a request (an HTTP/1 request or an HTTP/2 stream, whose sessions reach
//! the connection only through their digest's socket addresses) can be
//! authenticated by its connection's certificate (`auth.keys[].client_cert_cn`).

use super::h2_calls::ConnKey;
use parking_lot::Mutex;
use pingora::proxy::Session;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// The names of the connections open, by their addresses.
static LIVE: LazyLock<Mutex<HashMap<ConnKey, Arc<str>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// A connection's entry; dropping it (the connection's end) removes it.
#[derive(Debug)]
pub struct Registration(ConnKey);

impl Drop for Registration {
    fn drop(&mut self) {
        LIVE.lock().remove(&self.0);
    }
}

/// Lists the connection `key` under `name` (none: without a name) until
/// the registration drops.
pub fn register(key: ConnKey, name: Option<&str>) -> Registration {
    let mut live = LIVE.lock();
    match name {
        Some(name) => live.insert(key, Arc::from(name)),
        None => live.remove(&key),
    };
    Registration(key)
}

/// The certificate name of `session`'s connection, when it presented a
/// verified client certificate with a CN.
pub fn of_session(session: &Session) -> Option<Arc<str>> {
    let socket = session.as_downstream().digest()?.socket_digest.as_ref()?;
    let key = (*socket.local_addr()?.as_inet()?, *socket.peer_addr()?.as_inet()?);
    LIVE.lock().get(&key).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_lives_as_long_as_its_registration() {
        let key: ConnKey = ("127.0.0.1:1".parse().unwrap(), "127.0.0.1:65001".parse().unwrap());
        let registration = register(key, Some("svc-a"));
        assert_eq!(LIVE.lock().get(&key).map(|n| n.to_string()), Some("svc-a".into()));
        drop(registration);
        assert!(!LIVE.lock().contains_key(&key));
        let lingering = register(key, Some("svc-a"));
        let unnamed = register(key, None);
        assert!(!LIVE.lock().contains_key(&key), "a connection without a name takes no earlier one's");
        drop((lingering, unnamed));
    }
}
