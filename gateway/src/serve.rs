//! Starts the gateway: ONNX Runtime, the model repository, the listeners
//! (V2, admin, and gRPC when `server.grpc_listen` is set; bound before
//! serving, see [`crate::bound`]), the reload triggers, then the Pingora
//! server on its own thread; stops it gracefully ([`crate::shutdown`]).

use crate::admin::AdminApp;
use crate::app::GatewayApp;
use crate::bound::BoundAddrs;
use crate::cache::service::CacheService;
use crate::config::connections_section::ConnectionLimits;
use crate::config::http2_section::Http2Limits;
use crate::config::tls_section::{ListenerTls, TlsConfig};
use crate::config::Config;
use crate::config::ServerConfig;
use crate::connections::{rlimit, ConnTable, GuardedApp, Listener};
use crate::grpc::GrpcListener;
use crate::reload::{ConfigSource, Reloader};
use crate::shutdown::{SignalWatch, Stopped};
use crate::state::AppState;
use crate::tls::TlsSource;
use crate::upstream::health::HealthService;
use crate::upstream::Upstreams;
use anyhow::Context;
use pingora::apps::HttpServerOptions;
use pingora::prelude::{ProxyHttp, Server};
use pingora::protocols::http::v2::server::{default_h2_options, H2Options};
use pingora::proxy::HttpProxy;
use pingora::server::configuration::ServerConf;
use pingora::server::RunArgs;
use pingora::services::background::background_service;
use std::path::Path;
use std::sync::mpsc::Sender;
use std::sync::Arc;

/// How long pending L2 cache writes may take to flush at shutdown.
const L2_FLUSH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs the server until it stops (graceful drain after SIGTERM, see
/// [`crate::shutdown`]; SIGINT at once), then flushes pending L2 writes.
/// `source` says which file hot reload rereads ([`crate::reload`]); the
/// bound addresses are written to `ports_file` once every listener is
/// bound ([`crate::bound`]).
pub fn run(mut config: Config, source: ConfigSource, ports_file: Option<&Path>) -> anyhow::Result<()> {
    let upstreams = Arc::new(Upstreams::new(&config.proxy));
    let repo = crate::prepare::prepare(&mut config, &upstreams)?;
    repo.start_idle_reaper().context("start the idle-unload thread")?;
    let grpc_on = config.server.grpc_listen.is_some();
    let state = Arc::new(AppState::with_upstreams(config, repo, upstreams));
    let tables = [Some(&state.connections), grpc_on.then_some(&state.grpc_connections)];
    fit_connection_limits(&tables.into_iter().flatten().collect::<Vec<_>>());
    crate::memory::spawn_idle_trimmer(state.lifecycle.clone()).context("start the memory trim thread")?;
    let reloader = Arc::new(Reloader::new(state.clone(), source));
    let listeners = Listeners::bind(&state, &reloader)?;
    let bound = listeners.addrs();
    if let Some(path) = ports_file {
        bound.write(path).with_context(|| format!("write the ports file {}", path.display()))?;
    }
    crate::reload::triggers::spawn(reloader).context("start the reload thread")?;
    let (stopped_tx, stopped_rx) = std::sync::mpsc::channel();
    let server_state = state.clone();
    std::thread::Builder::new()
        .name("sy-server".into())
        .spawn(move || {
            serve_until_stopped(server_state, listeners, stopped_tx.clone());
            let _ = stopped_tx.send(Stopped::ServerExited);
        })
        .context("start the server thread")?;
    // Every sender gone (the server thread died) also ends the wait.
    let why = stopped_rx.recv().unwrap_or(Stopped::ServerExited);
    // Requests dropped unfinished, and any the stopped runtime never dropped.
    let cut_off = state.lifecycle.cut() + state.lifecycle.in_flight();
    if cut_off > 0 {
        tracing::warn!(
            ?why,
            cut_off,
            "server stopped; requests were cut off before their response was complete"
        );
    } else {
        tracing::info!(?why, "server stopped");
    }
    state.cache.flush_on_shutdown(L2_FLUSH_DEADLINE);
    release_sessions(&state);
    crate::telemetry::shutdown();
    Ok(())
}

/// How long the exit waits for pool workers to drop their sessions.
const WORKER_EXIT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// Unloads every model and waits for the pool workers to drop their ONNX
/// Runtime sessions before the process exits: a session still held by a
/// detached thread while the C++ runtime tears down at exit can crash the
/// process (seen with CUDA sessions: a segmentation fault after a clean
/// drain).
fn release_sessions(state: &AppState) {
    state.snapshot.load().repo.shutdown();
    if !switchyard_runtime::worker_census::wait_for_workers(WORKER_EXIT_DEADLINE) {
        tracing::warn!(
            live = switchyard_runtime::worker_census::live_workers(),
            "pool workers still running at exit"
        );
    }
}

/// Most open connections on the admin listener (its clients are
/// operators and scrapers, not traffic).
const ADMIN_MAX_CONNECTIONS: usize = 256;

/// Raises the open-file limit and fits the client listeners' connection
/// limits under it: the V2 listener's, and the gRPC listener's when it is
/// on, which share the descriptors equally.
fn fit_connection_limits(tables: &[&Arc<ConnTable>]) {
    let soft = rlimit::raise_open_file_limit();
    let listeners = u64::try_from(tables.len()).unwrap_or(1);
    for table in tables {
        let configured = table.max_connections();
        let (max, lowered) = rlimit::fit_connection_limit(configured, soft, listeners);
        if lowered {
            table.set_max_connections(max);
            tracing::warn!(
                configured,
                max_connections = max,
                open_file_limit = soft,
                listeners,
                "server.max_connections lowered to fit the open-file limit (raise `ulimit -n` to allow more)"
            );
        }
    }
}

/// Pingora's server settings, from `server`.
fn server_conf(server: &ServerConfig) -> ServerConf {
    ServerConf {
        threads: server.threads,
        grace_period_seconds: Some(server.shutdown_grace.as_secs()),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    }
}

/// Pingora's HTTP/2 server settings (the `h2` crate's builder) from
/// `[server.http2]`: Pingora's bounded defaults with the configured limits
/// over them.
fn h2_options(limits: &Http2Limits) -> H2Options {
    let mut options = default_h2_options();
    options
        .max_concurrent_streams(limits.max_concurrent_streams)
        .max_header_list_size(limits.max_header_list_bytes)
        .initial_window_size(limits.stream_window_bytes)
        .initial_connection_window_size(limits.connection_window_bytes)
        .max_pending_accept_reset_streams(limits.max_pending_reset_streams);
    options
}

/// The Pingora app `app` behind the connection table `table`, its HTTP/2
/// limited by `http2`; `h2c`: cleartext connections may speak HTTP/2 with
/// prior knowledge.
fn guarded<A>(
    app: A,
    conf: &Arc<ServerConf>,
    table: Arc<ConnTable>,
    http2: &Http2Limits,
    h2c: bool,
) -> GuardedApp<HttpProxy<A, ()>>
where
    A: ProxyHttp + Send + Sync + 'static,
    A::CTX: Send + Sync,
{
    let mut proxy = HttpProxy::new(app, conf.clone());
    proxy.handle_init_modules();
    proxy.h2_options = Some(h2_options(http2));
    if h2c {
        let mut options = HttpServerOptions::default();
        options.h2c = true;
        proxy.server_options = Some(options);
    }
    GuardedApp::new(proxy, table).with_h2c(h2c)
}

/// A listener's TLS settings, read from the snapshot in force when each
/// connection arrives (`pick` chooses the listener's table): rotation.
pub fn tls_source(state: &Arc<AppState>, pick: fn(&ListenerTls) -> Option<&TlsConfig>) -> TlsSource {
    let state = state.clone();
    TlsSource::new(move || pick(&state.snapshot.load().config.server.tls).map(|t| t.material.clone()))
}

/// The listeners, bound at start-up (a port in use fails it; port 0 is a
/// free port, see [`crate::bound`]) and served once the server runs.
struct Listeners {
    v2: Listener<HttpProxy<GatewayApp, ()>>,
    admin: Listener<HttpProxy<AdminApp, ()>>,
    grpc: Option<GrpcListener>,
}

impl Listeners {
    /// Binds the V2, admin and (when configured) gRPC listeners.
    fn bind(state: &Arc<AppState>, reloader: &Arc<Reloader>) -> anyhow::Result<Listeners> {
        let server = state.snapshot.load().config.server.clone();
        let conf = Arc::new(server_conf(&server));
        let v2_app = guarded(
            GatewayApp::new(state.clone()),
            &conf,
            state.connections.clone(),
            &server.http2,
            server.h2c,
        );
        let v2 = Listener::bind("v2", server.listen, v2_app)
            .with_context(|| format!("bind server.listen {}", server.listen))?
            .with_tls(server.tls.api.is_some().then(|| tls_source(state, |t| t.api.as_ref())));
        let admin_table =
            ConnTable::new(ConnectionLimits { max_connections: ADMIN_MAX_CONNECTIONS, ..server.connections });
        let admin_app =
            guarded(AdminApp::new(state.clone(), reloader.clone()), &conf, admin_table, &server.http2, false);
        let admin = Listener::bind("admin", server.admin_listen, admin_app)
            .with_context(|| format!("bind server.admin_listen {}", server.admin_listen))?
            .with_tls(server.tls.admin.is_some().then(|| tls_source(state, |t| t.admin.as_ref())));
        let grpc = server
            .grpc_listen
            .map(|addr| {
                GrpcListener::bind(state.clone(), addr)
                    .with_context(|| format!("bind server.grpc_listen {addr}"))
            })
            .transpose()?;
        Ok(Listeners { v2, admin, grpc })
    }

    /// Where they listen.
    fn addrs(&self) -> BoundAddrs {
        BoundAddrs {
            listen: self.v2.local_addr(),
            admin_listen: self.admin.local_addr(),
            grpc_listen: self.grpc.as_ref().map(GrpcListener::local_addr),
        }
    }
}

/// Builds the Pingora server (the listeners, the cache and upstream health
/// services) and runs it until it shuts down.
fn serve_until_stopped(state: Arc<AppState>, listeners: Listeners, stopped: Sender<Stopped>) {
    let server_config = state.snapshot.load().config.server.clone();
    let mut server = Server::new_with_opt_and_conf(None, server_conf(&server_config));
    server.bootstrap();
    let addrs = listeners.addrs();
    let drained = vec![listeners.v2.status(), listeners.admin.status()];
    let mut v2 = background_service("switchyard", listeners.v2);
    v2.threads = Some(server_config.threads);
    server.add_service(v2);
    let mut admin = background_service("switchyard admin", listeners.admin);
    admin.threads = Some(server_config.threads);
    server.add_service(admin);
    // L2 connection and writer run inside Pingora's runtimes.
    server.add_service(background_service("cache", CacheService::new(state.cache.clone())));
    server.add_service(background_service("upstream health", HealthService::new(state.upstreams.clone())));
    if let Some(grpc) = listeners.grpc {
        let mut service = background_service("grpc", grpc);
        service.threads = Some(server_config.threads);
        server.add_service(service);
    }
    tracing::info!(
        listen = %addrs.listen,
        admin_listen = %addrs.admin_listen,
        grpc_listen = addrs.grpc_listen.map_or_else(|| "off".to_string(), |a| a.to_string()),
        "switchyard serving"
    );
    server.run(RunArgs { shutdown_signal: Box::new(SignalWatch::new(state, drained, stopped)) });
}
