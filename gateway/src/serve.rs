//! Starts the gateway: ONNX Runtime, the model repository, then the
//! Pingora server with the V2 listener.

use crate::admin::AdminApp;
use crate::app::GatewayApp;
use crate::cache::service::CacheService;
use crate::config::{Config, ConfigIssue};
use crate::state::AppState;
use anyhow::Context;
use pingora::prelude::{http_proxy_service, Server};
use pingora::server::configuration::ServerConf;
use pingora::server::RunArgs;
use pingora::services::background::background_service;
use std::sync::Arc;
use switchyard_runtime::{init_onnxruntime, ModelRepository};

/// Checks that each route's models share one signature (same input and
/// output names, datatypes and shapes), so any of them can answer.
pub fn check_routes(config: &Config, repo: &ModelRepository) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    for (i, route) in config.routes.iter().enumerate() {
        let Some(first) = route.models.first() else { continue };
        let Ok(reference) = repo.signature(first) else { continue };
        for (j, model) in route.models.iter().enumerate().skip(1) {
            match repo.signature(model) {
                Ok(sig) if sig == reference => {}
                Ok(_) => issues.push(ConfigIssue {
                    path: format!("routes[{i}].models[{j}]"),
                    message: format!("{model:?} has a different input/output signature than {first:?}"),
                }),
                Err(e) => issues
                    .push(ConfigIssue { path: format!("routes[{i}].models[{j}]"), message: e.to_string() }),
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

/// How long pending L2 cache writes may take to flush at shutdown.
const L2_FLUSH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs the server until SIGTERM/SIGINT, then flushes pending L2 writes.
pub fn run(config: Config) -> anyhow::Result<()> {
    let repo = open_repository(&config)?;
    repo.start_idle_reaper().context("start the idle-unload thread")?;
    let server_conf = ServerConf {
        threads: config.server.threads,
        grace_period_seconds: Some(config.server.shutdown_grace.as_secs()),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let listen = config.server.listen;
    let config_admin = config.server.admin_listen;
    let mut server = Server::new_with_opt_and_conf(None, server_conf);
    server.bootstrap();
    let state = Arc::new(AppState::new(config, repo));
    let admin_listen = config_admin;
    let mut service = http_proxy_service(&server.configuration, GatewayApp::new(state.clone()));
    service.add_tcp(&listen.to_string());
    server.add_service(service);
    let mut admin = http_proxy_service(&server.configuration, AdminApp::new(state.clone()));
    admin.add_tcp(&admin_listen.to_string());
    server.add_service(admin);
    // L2 connection and writer run inside Pingora's runtimes.
    server.add_service(background_service("cache", CacheService::new(state.cache.clone())));
    tracing::info!(%listen, %admin_listen, "switchyard serving");
    server.run(RunArgs::default());
    state.cache.flush_on_shutdown(L2_FLUSH_DEADLINE);
    crate::telemetry::shutdown();
    Ok(())
}
