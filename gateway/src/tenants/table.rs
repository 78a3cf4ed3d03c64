//! [`TenantTable`]: a config generation's tenant limits, by tenant and by
//! route x tenant, and the tenants that get their own metric label. Built
//! once per snapshot ([`crate::snapshot::Snapshot`]).

use crate::config::tenant_section::TenantLimits;
use crate::config::Config;
use std::collections::HashMap;
use std::sync::Arc;

/// The label of every tenant the config does not name in `[[tenants]]` or
/// a route's `auth.tenants`.
pub const OTHER_LABEL: &str = "_other";

/// Tenant limits of one config generation.
#[derive(Debug, Default, Clone)]
pub struct TenantTable {
    tenants: HashMap<Arc<str>, TenantLimits>,
    routes: HashMap<String, HashMap<Arc<str>, TenantLimits>>,
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
        TenantTable { tenants, routes }
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
