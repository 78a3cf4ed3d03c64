//! The addresses the listeners are bound to. A configured port 0 becomes a
//! free port chosen by the kernel when the listener binds it, so nothing
//! else can take the port between its choice and its use (tests and
//! scripts that start several servers on one machine). The bound
//! addresses are logged (`switchyard serving`) and, with
//! `serve --ports-file PATH`, written to a file as JSON once every
//! listener is bound:
//!
//! ```json
//! {"listen":"127.0.0.1:41234","admin_listen":"127.0.0.1:41235","grpc_listen":null}
//! ```

use serde::Serialize;
use std::io;
use std::net::SocketAddr;
use std::path::Path;

/// Where each listener listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BoundAddrs {
    /// The V2 listener (`server.listen`).
    pub listen: SocketAddr,
    /// The admin listener (`server.admin_listen`).
    pub admin_listen: SocketAddr,
    /// The gRPC listener (`server.grpc_listen`), if on.
    pub grpc_listen: Option<SocketAddr>,
}

impl BoundAddrs {
    /// Writes the addresses to `path` as one JSON object. The file is
    /// written beside `path` and renamed over it, so a reader polling for
    /// `path` never sees it half written.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        let json = serde_json::to_vec(self).map_err(io::Error::other)?;
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        std::fs::write(&partial, json)?;
        std::fs::rename(&partial, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ports_file_is_one_json_object() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ports.json");
        let addrs = BoundAddrs {
            listen: "127.0.0.1:41234".parse().unwrap(),
            admin_listen: "127.0.0.1:41235".parse().unwrap(),
            grpc_listen: None,
        };
        addrs.write(&path).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({"listen": "127.0.0.1:41234", "admin_listen": "127.0.0.1:41235", "grpc_listen": null})
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no partial file left behind");
    }
}
