//! The TOML config loader and validator (`switchyard check-config`, start-up
//! and every reload run it).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// Parses `data` as a config file and checks the outcome: an accepted
/// config parses again to the same models and routes; a rejected one says where
/// (a field path, or `(syntax)`) and why.
pub fn run(data: &[u8]) {
    switchyard::use_config_resolver(offline_resolver);
    let Ok(text) = std::str::from_utf8(data) else { return };
    // A folder that does not exist: no model file or tokenizer is found,
    // nothing on this machine is read.
    let base = Path::new("/nonexistent/switchyard-fuzz");
    match switchyard::parse_config(text, base) {
        Err(issues) => {
            assert!(!issues.is_empty(), "rejected without an issue");
            for issue in &issues {
                assert!(!issue.path.is_empty() && !issue.message.is_empty(), "issue without path or message");
            }
        }
        Ok(config) => {
            let names = |c: &switchyard::Config| {
                let models = c.models.iter().map(|m| (m.name.clone(), m.path.clone()));
                let routes = c.routes.iter().map(|r| (r.name.clone(), r.fingerprint.clone()));
                (models.collect::<Vec<_>>(), routes.collect::<Vec<_>>())
            };
            let again = switchyard::parse_config(text, base).map(|c| names(&c));
            assert_eq!(again.ok(), Some(names(&config)), "parsing is not deterministic");
        }
    }
}

/// Upstream names are resolved without the network (the system resolver
/// would be asked thousands of times a second and throttle, which AFL
/// reports as hangs): a name of even length has two loopback addresses,
/// one of odd length none, so both outcomes are explored, deterministically.
fn offline_resolver(text: &str) -> std::io::Result<Vec<SocketAddr>> {
    let (host, port) = text.rsplit_once(':').unwrap_or((text, "0"));
    let port: u16 = port.parse().map_err(|_| std::io::Error::other("bad port"))?;
    if host.len() % 2 == 0 {
        Ok(vec![SocketAddr::from((Ipv4Addr::LOCALHOST, port)), SocketAddr::from((Ipv6Addr::LOCALHOST, port))])
    } else {
        Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such host (offline resolver)"))
    }
}
