//! How `upstreams[].addrs` names (`name:port`) become addresses: the
//! system resolver, unless a harness that must not touch the network (the
//! config fuzz target, which checks tens of thousands of configs a minute)
//! installs its own before the first config is checked.

use std::net::SocketAddr;
use std::sync::OnceLock;

/// Resolves `host:port` text to its addresses.
pub type Resolver = fn(&str) -> std::io::Result<Vec<SocketAddr>>;

static INSTALLED: OnceLock<Resolver> = OnceLock::new();

/// Replaces the system resolver for the rest of the process. Only the first
/// call takes effect; returns whether this one did. Servers never call it.
pub fn use_resolver(resolver: Resolver) -> bool {
    INSTALLED.set(resolver).is_ok()
}

/// The addresses of `text` (`host:port`) by the installed resolver.
pub(super) fn lookup(text: &str) -> std::io::Result<Vec<SocketAddr>> {
    match INSTALLED.get() {
        Some(resolver) => resolver(text),
        None => std::net::ToSocketAddrs::to_socket_addrs(text).map(Iterator::collect),
    }
}
