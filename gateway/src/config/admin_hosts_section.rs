//! `server.admin_hosts`: the extra names the admin listener answers to.
//!
//! Every admin request's `Host` must name the listener itself (its bound
//! address, a loopback address, `localhost`; any IP address when it is
//! bound to `0.0.0.0` / `[::]`) or one of these names, so that a web page
//! whose name was re-pointed at the listener (DNS rebinding) cannot read
//! or change anything ([`crate::admin::host_check`]). List here the names
//! operators and scrapers use to reach it: a Kubernetes Service name, an
//! ingress name, a public IP that forwards to it. Entries are host names
//! or IP addresses, without scheme or port; names compare without case.
//! Reloadable.

use super::issue::Issues;
use std::net::IpAddr;

/// One checked `server.admin_hosts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminHost {
    /// An IP address (written bare or, for IPv6, in brackets).
    Ip(IpAddr),
    /// A DNS name, lower-case, without a trailing dot.
    Name(String),
}

/// Checks `server.admin_hosts` (absent = none), naming each bad entry by
/// its index.
pub fn check(raw: Option<&[String]>, issues: &mut Issues) -> Vec<AdminHost> {
    let mut hosts = Vec::new();
    for (i, text) in raw.unwrap_or_default().iter().enumerate() {
        match parse_host(text) {
            Ok(host) => hosts.push(host),
            Err(message) => issues.push(format!("server.admin_hosts[{i}]"), message),
        }
    }
    hosts
}

/// A host as written in a `Host` header or a config entry, without its
/// port: an IP address (IPv6 in brackets or bare) or a DNS name.
pub fn parse_host(text: &str) -> Result<AdminHost, String> {
    let unbracketed = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
    if let Ok(ip) = unbracketed.parse::<IpAddr>() {
        return Ok(AdminHost::Ip(ip));
    }
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(format!(
            "{text:?} is not a host name or IP address (write only the name, e.g. \"switchyard-admin.example\", without scheme or port)"
        ));
    }
    Ok(AdminHost::Name(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses_are_accepted_and_normalised() {
        let raw = [
            "Admin.Example.".to_string(),
            "10.0.0.7".to_string(),
            "[::1]".to_string(),
            "fe80::1".to_string(),
        ];
        let mut issues = Issues::default();
        let hosts = check(Some(&raw), &mut issues);
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(hosts[0], AdminHost::Name("admin.example".into()));
        assert_eq!(hosts[1], AdminHost::Ip("10.0.0.7".parse().unwrap()));
        assert_eq!(hosts[2], AdminHost::Ip("::1".parse().unwrap()));
        assert_eq!(hosts[3], AdminHost::Ip("fe80::1".parse().unwrap()));
    }

    #[test]
    fn schemes_ports_and_junk_are_named_by_index() {
        let raw: Vec<String> =
            ["ok.example", "http://a.example", "a.example:9000", "", "a..b", "-a.example", "a b"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let mut issues = Issues::default();
        let hosts = check(Some(&raw), &mut issues);
        assert_eq!(hosts, vec![AdminHost::Name("ok.example".into())]);
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "server.admin_hosts[1]",
                "server.admin_hosts[2]",
                "server.admin_hosts[3]",
                "server.admin_hosts[4]",
                "server.admin_hosts[5]",
                "server.admin_hosts[6]"
            ]
        );
    }
}
