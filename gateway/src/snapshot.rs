//! One immutable generation of everything a request depends on: the
//! config, the model repository built for it, and the tables derived from
//! them (who may call what). Hot reload swaps the whole snapshot at once
//! ([`crate::state::AppState::snapshot`]); a request loads one snapshot
//! when it arrives and uses only it, so it never mixes two generations,
//! even when a reload happens half-way through it.

use crate::auth::AccessTable;
use crate::config::Config;
use crate::tenants::TenantTable;
use std::sync::Arc;
use std::time::SystemTime;
use switchyard_runtime::ModelRepository;

/// A config generation and its models.
pub struct Snapshot {
    /// 1 at start-up, +1 per successful reload.
    pub generation: u64,
    /// The config in force.
    pub config: Config,
    /// The models of `config`. Models unchanged by a reload are shared
    /// with the previous generation's repository.
    pub repo: Arc<ModelRepository>,
    /// API keys per route and per directly addressed model.
    pub access: AccessTable,
    /// Tenant limits by tenant and route ([`crate::tenants`]).
    pub tenants: TenantTable,
    /// When this generation started serving.
    pub created: SystemTime,
    /// Settings changed in the file that only a restart applies (their
    /// running values are kept in `config`; see `reload::restart`).
    pub restart_pending: Vec<String>,
}

impl Snapshot {
    /// Generation `generation` of `config` over `repo`. Each route's cache
    /// fingerprint gets the identity of the model files `repo` actually
    /// registered, so cache keys follow the files the answers come from
    /// even when a file was replaced between parsing and loading.
    pub fn new(generation: u64, mut config: Config, repo: Arc<ModelRepository>) -> Snapshot {
        bind_fingerprints(&mut config, &repo);
        let access = AccessTable::build(&config);
        let tenants = TenantTable::build(&config);
        Snapshot {
            generation,
            config,
            repo,
            access,
            tenants,
            created: SystemTime::now(),
            restart_pending: Vec::new(),
        }
    }
}

/// Appends each route model's registered file identity to the route's
/// fingerprint (see [`crate::config::RouteConfig::fingerprint`]).
fn bind_fingerprints(config: &mut Config, repo: &ModelRepository) {
    use std::fmt::Write;
    for route in &mut config.routes {
        for model in &route.models {
            let identity = repo.file_identity(model).ok().flatten();
            let _ = write!(route.fingerprint, "|registered:{model}:{identity:?}");
        }
    }
}
