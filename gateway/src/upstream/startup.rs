//! Start-up work for upstream models: read each one's signature from its
//! server, and check that it can stand in for its routes' other models.
//!
//! 1. Every upstream model's metadata is read, all at once, trying its
//!    addresses in order, each within the upstream's timeouts (at most
//!    [`STARTUP_FETCH_TIMEOUT`]).
//! 2. For each route, the reference signature is that of its first local
//!    model (else its first upstream model read in step 1); each upstream
//!    member, and an upstream candidate, is told to expect it.
//! 3. A member whose signature was read and does not match is a config
//!    problem (`routes[i].models[j]`), reported like a local mismatch.
//! 4. A member that could not be read is not a start-up failure: a gateway
//!    must start while an upstream is down. It is unavailable (its route
//!    falls back to other models) until the health loop reads it.

use super::client::HttpClient;
use super::metadata::{fetch_extensions, fetch_signature};
use super::registry::{SignatureState, Upstream, Upstreams};
use crate::config::{Config, ConfigIssue, UpstreamModelConfig};
use std::sync::Arc;
use std::time::Duration;
use switchyard_runtime::{ModelRepository, ModelSignature};

/// Longest wait for one model's metadata at start-up.
pub const STARTUP_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Steps 1-4; returns the mismatches found in step 3.
pub fn prepare(upstreams: &Upstreams, config: &Config, repo: &ModelRepository) -> Vec<ConfigIssue> {
    let models: Vec<(Arc<Upstream>, usize)> =
        upstreams.iter().flat_map(|u| (0..u.models.len()).map(move |j| (u.clone(), j))).collect();
    if models.is_empty() {
        return Vec::new();
    }
    match fetch_all(&models) {
        Ok(results) => {
            for ((upstream, j), result) in models.iter().zip(results) {
                upstream.models[*j].record_fetch(result);
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not read upstream model metadata at start-up"),
    }
    check_routes(upstreams, config, repo)
}

/// Step 1 on a short-lived runtime (Pingora's runtimes do not exist yet);
/// its own clients, so no pooled connection outlives that runtime.
fn fetch_all(models: &[(Arc<Upstream>, usize)]) -> std::io::Result<Vec<Result<ModelSignature, String>>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(runtime.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for (index, (upstream, j)) in models.iter().enumerate() {
            let model = upstream.models[*j].config.clone();
            let upstream = upstream.clone();
            tasks.spawn(async move { (index, fetch_any(&upstream, &model).await) });
        }
        let mut results: Vec<Result<ModelSignature, String>> =
            models.iter().map(|_| Err("metadata read did not finish".to_string())).collect();
        while let Some(joined) = tasks.join_next().await {
            if let Ok((index, result)) = joined {
                results[index] = result;
            }
        }
        results
    }))
}

/// Reads `model`'s signature from the first address of `upstream` that
/// answers; with `tensors = "auto"`, also the extensions that address's
/// server lists (whether it reads binary tensors).
pub async fn fetch_any(upstream: &Upstream, model: &UpstreamModelConfig) -> Result<ModelSignature, String> {
    let timeouts = upstream.config.timeouts;
    let client = HttpClient::new(timeouts.connect, 0, upstream.config.tls.as_ref());
    let timeout = timeouts.first_byte.min(STARTUP_FETCH_TIMEOUT);
    let mut errors = Vec::new();
    for address in &upstream.addresses {
        match fetch_signature(&client, address.addr, model, timeout).await {
            Ok(sig) => {
                if upstream.detects_tensor_encoding() {
                    // A server that cannot say gets JSON tensors, which every V2 server reads.
                    let extensions = fetch_extensions(&client, address.addr, timeout).await;
                    upstream.learn_extensions(&extensions.unwrap_or_default());
                }
                return Ok(sig);
            }
            Err(e) => errors.push(e),
        }
    }
    Err(errors.join("; "))
}

/// Steps 2 and 3.
fn check_routes(upstreams: &Upstreams, config: &Config, repo: &ModelRepository) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    for (i, route) in config.routes.iter().enumerate() {
        let local =
            route.models.iter().filter(|m| !upstreams.has_model(m)).find_map(|m| repo.signature(m).ok());
        let remote_known =
            || route.models.iter().filter_map(|m| upstreams.model(m)).find_map(|(_, r)| r.signature());
        let Some(reference) = local.or_else(remote_known) else { continue };
        let members =
            route.models.iter().enumerate().map(|(j, name)| (format!("routes[{i}].models[{j}]"), name));
        let candidate = route.candidate.iter().map(|c| (format!("routes[{i}].candidate.model"), &c.model));
        for (path, name) in members.chain(candidate) {
            let Some((_, remote)) = upstreams.model(name) else { continue };
            remote.expect(ModelSignature::clone(&reference));
            if let SignatureState::Incompatible(why) = remote.state() {
                issues.push(ConfigIssue {
                    path,
                    message: format!("upstream model {name:?} cannot stand in for the route's models: {why}"),
                });
            }
        }
    }
    issues
}
