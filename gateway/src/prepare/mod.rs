//! Every check on a parsed config that needs more than the config itself,
//! shared by `serve` (before it starts), `check-config` (so the two never
//! disagree) and hot reload ([`crate::reload`], before a swap): the admin
//! listener's exposure, the models and their route signatures, and the
//! upstream models' signatures; the model store's models ([`store`]).

pub mod store;
pub mod store_gate;
pub mod store_runtime;

use crate::config::{AdminConfig, Config, ConfigIssue};
use crate::upstream::Upstreams;
use anyhow::Context;
use std::net::SocketAddr;
use std::sync::Arc;
use switchyard_runtime::{init_onnxruntime, ModelRepository, ModelSignature};

/// Refuses an admin listener reachable from other hosts without a token.
pub fn check_exposure(admin_listen: SocketAddr, admin: &AdminConfig) -> Result<(), String> {
    if admin.token.is_none() && !admin_listen.ip().is_loopback() {
        return Err(format!(
            "server.admin_listen {admin_listen} is not a loopback address, and no admin token is configured: \
             set [admin] token or ${}, or listen on 127.0.0.1",
            crate::config::control_section::ADMIN_TOKEN_ENV
        ));
    }
    Ok(())
}

/// Checks that each route's local models (and local candidate) share one
/// signature (same input and output names, datatypes and shapes), so any
/// of them can answer. Upstream members and candidates are checked by
/// [`check_upstreams`].
pub fn check_routes(config: &Config, repo: &ModelRepository) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    for (i, route) in config.routes.iter().enumerate() {
        let mut reference: Option<(&String, Arc<ModelSignature>)> = None;
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
        let local_candidate =
            route.candidate.as_ref().filter(|c| config.proxy.upstream_model(&c.model).is_none());
        if let Some(candidate) = local_candidate {
            let path = format!("routes[{i}].candidate.model");
            match (repo.signature(&candidate.model), &reference) {
                (Err(e), _) => issues.push(ConfigIssue { path, message: e.to_string() }),
                (Ok(_), None) => {}
                (Ok(sig), Some((_, expected))) if sig == *expected => {}
                (Ok(_), Some((first, _))) => issues.push(ConfigIssue {
                    path,
                    message: format!(
                        "{:?} has a different input/output signature than {first:?}",
                        candidate.model
                    ),
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

/// Every check `serve` makes on a parsed config before it starts serving,
/// and `check-config` with it, so that the two never disagree:
/// 0. the model store (`[repository] uri`) is listed and its models made
///    local and added to `config.models` ([`store::resolve`]);
/// 1. the admin listener is on a loopback address or has a token
///    ([`check_exposure`], named `server.admin_listen`);
/// 2. ONNX Runtime loads, every model loads, and each route's models share
///    one signature ([`open_repository`]);
/// 3. upstream models match their routes ([`check_upstreams`]; this reads
///    their metadata into `upstreams`, which serving then uses).
///
/// What it cannot check is the machine `serve` will run on: whether the
/// listeners can be bound, and the trace exporter, which is built when
/// logging starts (`check-config` builds it too).
pub fn prepare(config: &mut Config, upstreams: &Upstreams) -> anyhow::Result<Arc<ModelRepository>> {
    // The message starts with the field path (`server.admin_listen ...`).
    check_exposure(config.server.admin_listen, &config.admin)
        .map_err(|message| anyhow::anyhow!("invalid config:\n  {message}"))?;
    store::resolve(config, None, &|_| None).map_err(|issues| {
        let lines: Vec<String> = issues.iter().map(ToString::to_string).collect();
        anyhow::anyhow!("invalid config:\n  {}", lines.join("\n  "))
    })?;
    let repo = open_repository(config)?;
    check_upstreams(upstreams, config, &repo)?;
    Ok(repo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::secret::SecretDigest;
    use crate::config::TokenSource;

    #[test]
    fn exposure_needs_a_token_off_loopback() {
        let open = AdminConfig { token: None, token_source: TokenSource::None };
        assert!(check_exposure("127.0.0.1:9000".parse().unwrap(), &open).is_ok());
        assert!(check_exposure("[::1]:9000".parse().unwrap(), &open).is_ok());
        let err = check_exposure("0.0.0.0:9000".parse().unwrap(), &open).unwrap_err();
        assert!(err.contains("SWITCHYARD_ADMIN_TOKEN"), "{err}");
        let closed = AdminConfig { token: Some(SecretDigest::of(b"x")), token_source: TokenSource::Env };
        assert!(check_exposure("0.0.0.0:9000".parse().unwrap(), &closed).is_ok());
    }
}
