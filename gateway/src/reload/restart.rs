//! Settings a reload cannot change in a running process, and what a reload
//! does with them: the running values are kept (so the effective config
//! stays truthful), the rest of the new config is applied, and the changed
//! fields are reported as needing a restart (reload response, log,
//! `/admin/config` `restart_pending`).
//!
//! Why each needs a restart: listeners are bound once; `threads`,
//! `shutdown_grace_s` are Pingora's server settings; the connection
//! limits (`max_connections`, `keepalive_timeout_s`, `header_timeout_ms`)
//! and the gRPC listener's (`grpc_max_*`) are fixed when the listeners
//! start; the admission
//! semaphore is sized once (`max_concurrent_requests`); ONNX Runtime is
//! loaded once per process; the `[cache]` section builds the L1 and the
//! Redis connection once (per-route TTLs and `enabled` do reload);
//! `[[upstreams]]` and `[[prefix_routes]]` build the upstream registry,
//! its health checks and the prefix routes' caches once; `[telemetry]`
//! installs the trace exporter once; `server.h2c`, `[server.http2]` and whether a listener
//! has TLS at all (`server.tls`, `admin_tls`, `grpc_tls`) are fixed when
//! it is bound, while new certificate files for a TLS listener apply at
//! once (rotation, [`crate::tls`]).

use crate::config::Config;

/// `new` with every restart-only setting taken from `running`, and the
/// paths of those that differed.
pub fn carry_over(mut new: Config, running: &Config) -> (Config, Vec<String>) {
    let mut pending = Vec::new();
    let mut keep = |changed: bool, path: &str| {
        if changed {
            pending.push(path.to_string());
        }
    };
    let (s, r) = (&mut new.server, &running.server);
    keep(s.listen != r.listen, "server.listen");
    s.listen = r.listen;
    keep(s.admin_listen != r.admin_listen, "server.admin_listen");
    s.admin_listen = r.admin_listen;
    keep(s.grpc_listen != r.grpc_listen, "server.grpc_listen");
    s.grpc_listen = r.grpc_listen;
    keep(s.threads != r.threads, "server.threads");
    s.threads = r.threads;
    keep(
        s.limits.max_concurrent_requests != r.limits.max_concurrent_requests,
        "server.max_concurrent_requests",
    );
    s.limits.max_concurrent_requests = r.limits.max_concurrent_requests;
    keep(s.shutdown_grace != r.shutdown_grace, "server.shutdown_grace_s");
    s.shutdown_grace = r.shutdown_grace;
    let (c, rc) = (&s.connections, &r.connections);
    keep(c.max_connections != rc.max_connections, "server.max_connections");
    keep(c.keepalive_timeout != rc.keepalive_timeout, "server.keepalive_timeout_s");
    keep(c.header_timeout != rc.header_timeout, "server.header_timeout_ms");
    s.connections = r.connections;
    let (g, rg) = (&s.grpc, &r.grpc);
    keep(g.max_streams != rg.max_streams, "server.grpc_max_streams");
    keep(g.max_in_flight_per_stream != rg.max_in_flight_per_stream, "server.grpc_max_in_flight_per_stream");
    keep(
        g.max_requests_per_connection != rg.max_requests_per_connection,
        "server.grpc_max_requests_per_connection",
    );
    keep(g.max_receiving_bytes != rg.max_receiving_bytes, "server.grpc_max_receiving_bytes");
    s.grpc = r.grpc;
    keep(s.h2c != r.h2c, "server.h2c");
    s.h2c = r.h2c;
    keep(s.http2 != r.http2, "server.http2");
    s.http2 = r.http2;
    // A listener's TLS turned on or off needs a restart; new files for a
    // listener that has TLS apply at once (rotation).
    let (t, rt) = (&mut s.tls, &r.tls);
    keep(t.api.is_some() != rt.api.is_some(), "server.tls");
    if t.api.is_some() != rt.api.is_some() {
        t.api = rt.api.clone();
    }
    keep(t.admin.is_some() != rt.admin.is_some(), "server.admin_tls");
    if t.admin.is_some() != rt.admin.is_some() {
        t.admin = rt.admin.clone();
    }
    keep(t.grpc.is_some() != rt.grpc.is_some(), "server.grpc_tls");
    if t.grpc.is_some() != rt.grpc.is_some() {
        t.grpc = rt.grpc.clone();
    }
    keep(new.onnxruntime_library != running.onnxruntime_library, "onnxruntime.library");
    new.onnxruntime_library = running.onnxruntime_library.clone();
    keep(new.cache != running.cache, "cache");
    new.cache = running.cache.clone();
    keep(new.telemetry != running.telemetry, "telemetry");
    new.telemetry = running.telemetry.clone();
    keep(new.proxy.upstreams != running.proxy.upstreams, "upstreams");
    keep(new.proxy.prefix_routes != running.proxy.prefix_routes, "prefix_routes");
    new.proxy = running.proxy.clone();
    (new, pending)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;
    use std::time::Duration;

    const BASE: &str =
        "[server]\nlisten = \"127.0.0.1:8000\"\n[cache]\n[[models]]\nname = \"m\"\npath = \"m.onnx\"\n\
                        [[routes]]\nname = \"r\"\nmodels = [\"m\"]\ncache = { ttl_s = 5 }\n";

    #[test]
    fn restart_only_settings_keep_running_values_and_are_reported() {
        let running = parse(BASE, Path::new("/")).unwrap();
        let text = BASE
            .replace("127.0.0.1:8000", "127.0.0.1:8001")
            .replace("[cache]\n", "[cache]\nl1_max_bytes = \"1MiB\"\n")
            .replace("ttl_s = 5", "ttl_s = 7");
        let (applied, pending) = carry_over(parse(&text, Path::new("/")).unwrap(), &running);
        assert_eq!(pending, vec!["server.listen".to_string(), "cache".to_string()]);
        assert_eq!(applied.server.listen, running.server.listen);
        assert_eq!(applied.cache, running.cache);
        assert_eq!(applied.route("r").unwrap().cache.ttl, Duration::from_secs(7), "route TTLs reload");
    }

    #[test]
    fn upstream_and_prefix_route_changes_wait_for_a_restart() {
        let with_app = |port: u16| {
            format!(
                "{BASE}[[upstreams]]\nname = \"app\"\naddrs = [\"127.0.0.1:{port}\"]\n\
                 [[prefix_routes]]\nname = \"app\"\nprefix = \"/apps/app/\"\nupstream = \"app\"\n"
            )
        };
        let running = parse(&with_app(8100), Path::new("/")).unwrap();
        let (applied, pending) = carry_over(parse(&with_app(8101), Path::new("/")).unwrap(), &running);
        assert_eq!(pending, vec!["upstreams".to_string()]);
        assert_eq!(applied.proxy, running.proxy, "the running upstreams stay in force");
    }

    #[test]
    fn http2_limits_wait_for_a_restart() {
        let running = parse(BASE, Path::new("/")).unwrap();
        let text = BASE.replace("[cache]\n", "[server.http2]\nmax_concurrent_streams = 7\n[cache]\n");
        let (applied, pending) = carry_over(parse(&text, Path::new("/")).unwrap(), &running);
        assert_eq!(pending, vec!["server.http2".to_string()]);
        assert_eq!(applied.server.http2, running.server.http2, "the bound listeners' limits stay in force");
    }

    #[test]
    fn an_unchanged_file_needs_no_restart() {
        let running = parse(BASE, Path::new("/")).unwrap();
        let (_, pending) = carry_over(parse(BASE, Path::new("/")).unwrap(), &running);
        assert!(pending.is_empty(), "{pending:?}");
    }
}
