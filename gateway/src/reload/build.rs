//! Builds the next snapshot from a freshly parsed config and the snapshot
//! in force: restart-only settings carried over ([`super::restart`]), the
//! admin exposure rule checked, models rebuilt (unchanged ones shared,
//! changed ones loaded before the swap: `ModelRepository::rebuild`) and
//! route signatures checked. Any problem rejects the whole config, with
//! field paths; nothing of the running snapshot is touched.

use super::restart::carry_over;
use crate::config::{Config, ConfigIssue};
use crate::routing::rollout::Rollouts;
use crate::snapshot::Snapshot;
use switchyard_runtime::{ModelRepository, RebuildError, RebuildReport};

/// A snapshot ready to be swapped in, and how its models were obtained.
pub struct Built {
    /// The next generation.
    pub snapshot: Snapshot,
    /// Which models were reused, loaded, removed.
    pub report: RebuildReport,
}

/// The snapshot after `current` for `config`, or the config's problems
/// (no rollouts: [`next_snapshot_with`] with an empty registry).
pub fn next_snapshot(config: Config, current: &Snapshot) -> Result<Built, Vec<ConfigIssue>> {
    next_snapshot_with(config, current, &Rollouts::default())
}

/// The snapshot after `current` for `config` with what `rollouts` want in
/// force: the model store is resolved first (its gated versions ask
/// `rollouts` how their rollout stands), then the rollouts are laid over
/// the routes ([`Rollouts::overlay`]), then the models are built and the
/// routes checked (a candidate's signature included).
pub fn next_snapshot_with(
    config: Config,
    current: &Snapshot,
    rollouts: &Rollouts,
) -> Result<Built, Vec<ConfigIssue>> {
    let (mut config, restart_pending) = carry_over(config, &current.config);
    crate::prepare::check_exposure(config.server.admin_listen, &config.admin)
        .map_err(|message| vec![ConfigIssue { path: "admin.token".into(), message }])?;
    crate::prepare::store::resolve(&mut config, current.config.store.as_ref(), &|c| rollouts.status_of(c))?;
    rollouts.overlay(&mut config);
    let (repo, report) = ModelRepository::rebuild(config.models.clone(), &current.repo)
        .map_err(|e| vec![model_issue(&config, &e)])?;
    let issues = crate::prepare::check_routes(&config, &repo);
    if !issues.is_empty() {
        return Err(issues);
    }
    let mut snapshot = Snapshot::new(current.generation + 1, config, repo);
    snapshot.restart_pending = restart_pending;
    Ok(Built { snapshot, report })
}

/// A rebuild error as a config issue at the model's path (`models[2]`).
fn model_issue(config: &Config, err: &RebuildError) -> ConfigIssue {
    let index = err.model.as_ref().and_then(|name| config.models.iter().position(|m| &m.name == name));
    let path = index.map_or_else(|| "models".to_string(), |i| format!("models[{i}]"));
    ConfigIssue { path, message: err.error.to_string() }
}
