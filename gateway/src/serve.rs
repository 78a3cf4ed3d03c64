//! Starts the gateway: ONNX Runtime, the model repository, the reload
//! triggers, then the Pingora server (V2 and admin listeners) on its own
//! thread; stops it gracefully ([`crate::shutdown`]).

use crate::admin::AdminApp;
use crate::app::GatewayApp;
use crate::cache::service::CacheService;
use crate::config::{Config, ConfigIssue};
use crate::reload::{ConfigSource, Reloader};
use crate::shutdown::{SignalWatch, Stopped};
use crate::state::AppState;
use crate::upstream::health::HealthService;
use crate::upstream::Upstreams;
use anyhow::Context;
use pingora::prelude::{http_proxy_service, Server};
use pingora::server::configuration::ServerConf;
use pingora::server::RunArgs;
use pingora::services::background::background_service;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use switchyard_runtime::{init_onnxruntime, ModelRepository, ModelSignature};

/// Checks that each route's local models share one signature (same input
/// and output names, datatypes and shapes), so any of them can answer.
/// Upstream members are checked by [`check_upstreams`].
pub fn check_routes(config: &Config, repo: &ModelRepository) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    for (i, route) in config.routes.iter().enumerate() {
        let mut reference: Option<(&String, ModelSignature)> = None;
        let local = route.models.iter().enumerate().filter(|(_, m)| config.proxy.upstream_model(m).is_none());
        for (j, model) in local {
            let path = format!("routes[{i}].models[{j}]");
            match (repo.signature(model), &reference) {
                (Err(e), _) => issues.push(ConfigIssue { path, message: e.to_string() }),
                (Ok(sig), None) => reference = Some((model, sig)),
                (Ok(sig), Some((_, expected))) if sig == *expected => {}
                (Ok(_), Some((first, _))) => issues.push(ConfigIssue {
                    path,
                    message: format!("{model:?} has a different input/output signature than {first:?}"),
                }),
            }
        }
    }
    issues
}

/// Opens ONNX Runtime and the model repository for `config`.
pub fn open_repository(config: &Config) -> anyhow::Result<Arc<ModelRepository>> {
    let lib = init_onnxruntime(config.onnxruntime_library.as_deref()).context("ONNX Runtime library")?;
    tracing::info!(library = %lib.display(), "ONNX Runtime loaded");
    let repo = ModelRepository::new(config.models.clone()).context("model repository")?;
    let issues = check_routes(config, &repo);
    if !issues.is_empty() {
        let lines: Vec<String> = issues.iter().map(ToString::to_string).collect();
        anyhow::bail!("invalid routes:\n  {}", lines.join("\n  "));
    }
    Ok(repo)
}

/// Reads the upstream models' signatures from their servers and checks
/// them against their routes (see [`crate::upstream::startup`]); an
/// unreachable upstream is not an error, a mismatching model is.
pub fn check_upstreams(upstreams: &Upstreams, config: &Config, repo: &ModelRepository) -> anyhow::Result<()> {
    let issues = crate::upstream::startup::prepare(upstreams, config, repo);
    if !issues.is_empty() {
        let lines: Vec<String> = issues.iter().map(ToString::to_string).collect();
        anyhow::bail!("invalid routes:\n  {}", lines.join("\n  "));
    }
    Ok(())
}

/// How long pending L2 cache writes may take to flush at shutdown.
const L2_FLUSH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs the server until it stops (graceful drain after SIGTERM, see
/// [`crate::shutdown`]; SIGINT at once), then flushes pending L2 writes.
/// `source` says which file hot reload rereads ([`crate::reload`]).
pub fn run(config: Config, source: ConfigSource) -> anyhow::Result<()> {
    crate::admin::check_exposure(config.server.admin_listen, &config.admin).map_err(anyhow::Error::msg)?;
    let repo = open_repository(&config)?;
    repo.start_idle_reaper().context("start the idle-unload thread")?;
    let state = Arc::new(AppState::new(config, repo));
    crate::memory::spawn_idle_trimmer(state.lifecycle.clone()).context("start the memory trim thread")?;
    {
        let snap = state.snapshot.load();
        check_upstreams(&state.upstreams, &snap.config, &snap.repo)?;
    }
    let reloader = Arc::new(Reloader::new(state.clone(), source));
    crate::reload::triggers::spawn(reloader.clone()).context("start the reload thread")?;
    let (stopped_tx, stopped_rx) = std::sync::mpsc::channel();
    let server_state = state.clone();
    std::thread::Builder::new()
        .name("sy-server".into())
        .spawn(move || {
            serve_until_stopped(server_state, reloader, stopped_tx.clone());
            let _ = stopped_tx.send(Stopped::ServerExited);
        })
        .context("start the server thread")?;
    // Every sender gone (the server thread died) also ends the wait.
    let why = stopped_rx.recv().unwrap_or(Stopped::ServerExited);
    tracing::info!(?why, "server stopped");
    state.cache.flush_on_shutdown(L2_FLUSH_DEADLINE);
    crate::telemetry::shutdown();
    Ok(())
}

/// Builds the Pingora server (V2 listener, admin listener, cache
/// service) and runs it until it shuts down.
fn serve_until_stopped(state: Arc<AppState>, reloader: Arc<Reloader>, stopped: Sender<Stopped>) {
    let server_config = state.snapshot.load().config.server.clone();
    let server_conf = ServerConf {
        threads: server_config.threads,
        grace_period_seconds: Some(server_config.shutdown_grace.as_secs()),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let (listen, admin_listen) = (server_config.listen, server_config.admin_listen);
    let mut server = Server::new_with_opt_and_conf(None, server_conf);
    server.bootstrap();
    let mut service = http_proxy_service(&server.configuration, GatewayApp::new(state.clone()));
    service.add_tcp(&listen.to_string());
    server.add_service(service);
    let mut admin = http_proxy_service(&server.configuration, AdminApp::new(state.clone(), reloader));
    admin.add_tcp(&admin_listen.to_string());
    server.add_service(admin);
    // L2 connection and writer run inside Pingora's runtimes.
    server.add_service(background_service("cache", CacheService::new(state.cache.clone())));
    server.add_service(background_service("upstream health", HealthService::new(state.upstreams.clone())));
    tracing::info!(%listen, %admin_listen, "switchyard serving");
    server.run(RunArgs { shutdown_signal: Box::new(SignalWatch::new(state, stopped)) });
}
