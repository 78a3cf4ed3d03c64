//! [`TenantTable`]: a config generation's tenant limits, by tenant and by
//! route x tenant, and the tenants that get their own metric label. Built
//! once per snapshot ([`crate::snapshot::Snapshot`]).

use crate::config::tenant_section::TenantLimits;
use crate::config::{Config, RouteConfig};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The label of every tenant the config does not name in `[[tenants]]` or
/// a route's `auth.tenants`.
pub const OTHER_LABEL: &str = "_other";

/// The fair share of `route`: when its `auth.fair_share` is on, its keys
/// name two tenants or more, and it has local models.
fn fair_route(config: &Config, route: &RouteConfig) -> Option<FairRoute> {
    let auth = route.auth.as_ref().filter(|a| a.fair_share)?;
    let tenants: HashSet<&str> = auth.tenants_named().map(|t| &**t).collect();
    if tenants.len() < 2 {
        return None;
    }
    let per_model = route
        .models
        .iter()
        .filter_map(|name| config.models.iter().find(|m| &m.name == name))
        .map(|spec| spec.pools.iter().map(|pool| spec.pool_batching(pool).queue_capacity).sum::<usize>());
    let capacity = super::fair::capacity(per_model)?;
    let mut weights: HashMap<Arc<str>, u32> = HashMap::new();
    for tenant in &config.tenants {
        if let (Some(w), true) = (tenant.weight, tenants.contains(&*tenant.name)) {
            weights.insert(tenant.name.clone(), w);
        }
    }
    for tenant in &auth.tenants {
        if let Some(w) = tenant.weight {
            weights.insert(tenant.name.clone(), w);
        }
    }
    Some(FairRoute { capacity, weights })
}

/// Tenant limits of one config generation.
#[derive(Debug, Default, Clone)]
pub struct TenantTable {
    tenants: HashMap<Arc<str>, TenantLimits>,
    routes: HashMap<String, HashMap<Arc<str>, TenantLimits>>,
    fair: HashMap<String, Arc<FairRoute>>,
}

/// A route shared fairly between its tenants under overload
/// ([`super::fair`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairRoute {
    /// Requests computing at once before shares apply ([`super::fair::capacity`]).
    pub capacity: u32,
    /// Each tenant's weight on the route (absent: 1).
    pub weights: HashMap<Arc<str>, u32>,
}

impl FairRoute {
    /// `tenant`'s weight on the route.
    pub fn weight(&self, tenant: &str) -> u32 {
        self.weights.get(tenant).copied().unwrap_or(1)
    }
}

impl TenantTable {
    /// The table of `config`.
    pub fn build(config: &Config) -> TenantTable {
        let tenants = config.tenants.iter().map(|t| (t.name.clone(), t.limits)).collect();
        let routes = config
            .routes
            .iter()
            .filter_map(|r| Some((r.name.clone(), r.auth.as_ref()?)))
            .filter(|(_, auth)| !auth.tenants.is_empty())
            .map(|(name, auth)| (name, auth.tenants.iter().map(|t| (t.name.clone(), t.limits)).collect()))
            .collect();
        let fair = config
            .routes
            .iter()
            .filter_map(|r| Some((r.name.clone(), Arc::new(fair_route(config, r)?))))
            .collect();
        TenantTable { tenants, routes, fair }
    }

    /// The fair share of `route`, when it has one.
    pub fn fair(&self, route: &str) -> Option<&Arc<FairRoute>> {
        self.fair.get(route)
    }

    /// `tenant`'s limits across routes.
    pub fn tenant(&self, tenant: &str) -> Option<&TenantLimits> {
        self.tenants.get(tenant)
    }

    /// `tenant`'s limits on `route`.
    pub fn route(&self, route: &str, tenant: &str) -> Option<&TenantLimits> {
        self.routes.get(route)?.get(tenant)
    }

    /// The name `tenant` is counted under in the metrics: its own when the
    /// config lists it, else [`OTHER_LABEL`].
    pub fn label(&self, tenant: &str) -> Arc<str> {
        if let Some((name, _)) = self.tenants.get_key_value(tenant) {
            return name.clone();
        }
        for route in self.routes.values() {
            if let Some((name, _)) = route.get_key_value(tenant) {
                return name.clone();
            }
        }
        Arc::from(OTHER_LABEL)
    }

    /// Every daily quota: (tenant, route or `None`, quota).
    pub fn quotas(&self) -> Vec<(Arc<str>, Option<&str>, u64)> {
        let tenant = self.tenants.iter().filter_map(|(t, l)| Some((t.clone(), None, l.requests_per_day?)));
        let routes = self.routes.iter().flat_map(|(route, tenants)| {
            tenants
                .iter()
                .filter_map(move |(t, l)| Some((t.clone(), Some(route.as_str()), l.requests_per_day?)))
        });
        tenant.chain(routes).collect()
    }
}
