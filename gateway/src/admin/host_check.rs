//! The `Host` check of the admin listener, against DNS rebinding: a web
//! page at `http://evil.example:9000/` whose name is re-pointed at
//! 127.0.0.1 is same-origin with the listener as far as the browser knows,
//! and could read `/admin/config` or post edits. The browser still sends
//! `Host: evil.example:9000`, so every admin request (public endpoints
//! included) must name the listener itself:
//!
//! 1. `localhost` or a loopback address (`127.0.0.1`, `[::1]`, any
//!    127.x.y.z), the way local tools and port forwards reach it;
//! 2. the listener's bound IP address, or any IP address when it is bound
//!    to all of them (`0.0.0.0`, `[::]`), as Prometheus and the kubelet
//!    reach a pod (`Host: <pod IP>:9000`);
//! 3. a name or address listed in `server.admin_hosts`.
//!
//! The port is not compared: a port forward or a container's published
//! port changes it, and a rebinding page cannot choose its host name,
//! which is what is checked. A request without `Host` (HTTP/1.0) passes:
//! browsers always send one. An absolute request target
//! (`GET http://name/...`) is checked like `Host`. Refusals are 403.

use crate::config::admin_hosts_section::{parse_host, AdminHost};
use crate::error::GatewayError;
use http::header::HOST;
use http::{HeaderMap, Uri};
use std::net::{IpAddr, SocketAddr};

/// Checks the request's `Host` (and absolute target) against the
/// listener's address `listen` and the configured `extra` names.
pub fn check_host(
    uri: &Uri,
    headers: &HeaderMap,
    listen: SocketAddr,
    extra: &[AdminHost],
) -> Result<(), GatewayError> {
    if let Some(authority) = uri.authority() {
        check_one(authority.host(), listen, extra)?;
    }
    let Some(value) = headers.get(HOST) else { return Ok(()) };
    let text = value
        .to_str()
        .map_err(|_| GatewayError::BadHeader { name: "host", message: "not visible ASCII".into() })?;
    let authority = text.parse::<http::uri::Authority>().map_err(|_| GatewayError::BadHeader {
        name: "host",
        message: format!("{text:?} is not a host[:port]"),
    })?;
    check_one(authority.host(), listen, extra)
}

fn check_one(host: &str, listen: SocketAddr, extra: &[AdminHost]) -> Result<(), GatewayError> {
    let parsed = parse_host(host).ok();
    let allowed = match &parsed {
        Some(AdminHost::Name(name)) => name == "localhost" || extra.contains(&AdminHost::Name(name.clone())),
        Some(AdminHost::Ip(ip)) => own_ip(*ip, listen.ip()) || extra.contains(&AdminHost::Ip(*ip)),
        None => false,
    };
    if allowed {
        return Ok(());
    }
    Err(GatewayError::Forbidden(format!(
        "Host {host:?} is not this admin listener ({listen}, localhost, a loopback address) \
         nor a name in server.admin_hosts; add the name you reach it by to server.admin_hosts"
    )))
}

/// Whether `ip` addresses a listener bound to `bound`.
fn own_ip(ip: IpAddr, bound: IpAddr) -> bool {
    ip.is_loopback() || ip == bound || bound.is_unspecified()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(host: &str, listen: &str, extra: &[AdminHost]) -> Result<(), u16> {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, host.parse().unwrap());
        check_host(&Uri::from_static("/admin/config"), &headers, listen.parse().unwrap(), extra)
            .map_err(|e| e.status())
    }

    #[test]
    fn loopback_listener_answers_to_its_own_names_only() {
        for host in
            ["127.0.0.1:9000", "localhost:9000", "LOCALHOST", "[::1]:9000", "127.0.0.1:19000", "localhost."]
        {
            assert_eq!(check(host, "127.0.0.1:9000", &[]), Ok(()), "{host}");
        }
        for host in ["evil.example:9000", "evil.example", "10.1.2.3:9000", "localhost.evil.example"] {
            assert_eq!(check(host, "127.0.0.1:9000", &[]), Err(403), "{host}");
        }
    }

    #[test]
    fn a_listener_on_every_address_answers_to_any_ip_but_not_names() {
        assert_eq!(check("10.1.2.3:9000", "0.0.0.0:9000", &[]), Ok(()));
        assert_eq!(check("[fd00::7]:9000", "[::]:9000", &[]), Ok(()));
        assert_eq!(check("svc.cluster.local:9000", "0.0.0.0:9000", &[]), Err(403));
        assert_eq!(check("10.1.2.3:9000", "10.1.2.4:9000", &[]), Err(403));
        assert_eq!(check("10.1.2.4:9000", "10.1.2.4:9000", &[]), Ok(()));
    }

    #[test]
    fn configured_names_are_accepted() {
        let extra = [AdminHost::Name("admin.example".into()), AdminHost::Ip("203.0.113.7".parse().unwrap())];
        assert_eq!(check("Admin.Example:443", "127.0.0.1:9000", &extra), Ok(()));
        assert_eq!(check("203.0.113.7", "127.0.0.1:9000", &extra), Ok(()));
        assert_eq!(check("other.example", "127.0.0.1:9000", &extra), Err(403));
    }

    #[test]
    fn absolute_targets_and_missing_hosts() {
        let listen: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        let uri: Uri = "http://evil.example/admin/config".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(HOST, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(check_host(&uri, &headers, listen, &[]).map_err(|e| e.status()), Err(403));
        let plain = Uri::from_static("/healthz");
        assert!(check_host(&plain, &HeaderMap::new(), listen, &[]).is_ok());
        headers.insert(HOST, "a b".parse().unwrap());
        assert_eq!(check_host(&plain, &headers, listen, &[]).map_err(|e| e.status()), Err(400));
    }
}
