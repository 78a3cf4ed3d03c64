//! [`Tenants`]: the limiter state of every scope and the counters of
//! every tenant label, for the life of the process (across hot reloads),
//! and the two steps a request takes through them ([`Tenants::admit`],
//! [`Admitted::compute`]; order in [`super`]).

use super::counters::{CountersView, TenantCounters};
use super::fair::FairGroup;
use super::refusal::{policy_items, standing_items, Refusal, Standing};
use super::scope::{unix_now, InFlight, Limited, ScopeState};
use super::table::FairRoute;
use super::table::TenantTable;
use super::LimitKind;
use crate::config::tenant_section::TenantLimits;
use crate::error::GatewayError;
use crate::header_names as names;
use http::HeaderName;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// A scope: a tenant on one route (`Some(route)`) or across routes.
type ScopeKey = (Option<String>, Arc<str>);

/// Limiter state and counters, shared by all requests.
#[derive(Default)]
pub struct Tenants {
    scopes: Mutex<HashMap<ScopeKey, Arc<ScopeState>>>,
    counters: Mutex<HashMap<Arc<str>, Arc<TenantCounters>>>,
    groups: Mutex<HashMap<String, Arc<Mutex<FairGroup>>>>,
}

/// The fair share a request computes under: its route's group and settings.
struct FairTicket {
    route: String,
    group: Arc<Mutex<FairGroup>>,
    settings: Arc<FairRoute>,
}

/// A place in a route's fair share; dropping it gives it back.
struct FairPlace {
    group: Arc<Mutex<FairGroup>>,
    tenant: Arc<str>,
}

impl Drop for FairPlace {
    fn drop(&mut self) {
        self.group.lock().release(&self.tenant);
    }
}

/// One limited scope a request was admitted in.
struct Held {
    state: Arc<ScopeState>,
    limits: TenantLimits,
    route: Option<String>,
    standing: Standing,
}

/// A request admitted past its tenant's request limits; [`Admitted::compute`]
/// takes its compute limits when a model runs for it.
#[derive(Default)]
pub struct Admitted {
    tenant: Option<Arc<str>>,
    scopes: Vec<Held>,
    counters: Option<Arc<TenantCounters>>,
    fair: Option<FairTicket>,
    now: u64,
}

/// A request computing under its tenant's limits; dropping it gives its
/// `concurrent` places and its fair-share place back.
pub struct Computing {
    _places: Vec<InFlight>,
    _fair: Option<FairPlace>,
}

impl Tenants {
    /// Admits a request of `tenant` (none: an open route, nothing to
    /// limit) to `route` (none: a model addressed directly): each limited
    /// scope's daily quota and request rate, the route's first.
    pub fn admit(
        &self,
        table: &TenantTable,
        route: Option<&str>,
        tenant: Option<&str>,
    ) -> Result<Admitted, GatewayError> {
        let Some(tenant) = tenant else { return Ok(Admitted::default()) };
        let counters = self.counters_of(table.label(tenant));
        let tenant: Arc<str> = Arc::from(tenant);
        let mut scopes = Vec::new();
        if let Some((route, limits)) = route.and_then(|r| Some((r, table.route(r, &tenant)?))) {
            let state = self.scope((Some(route.to_string()), tenant.clone()));
            let route = Some(route.to_string());
            scopes.push(Held { state, limits: *limits, route, standing: Standing::default() });
        }
        if let Some(limits) = table.tenant(&tenant) {
            let state = self.scope((None, tenant.clone()));
            scopes.push(Held { state, limits: *limits, route: None, standing: Standing::default() });
        }
        let now = unix_now();
        if let Err((held, limited)) = take_requests(&mut scopes, now) {
            counters.limited(limited.kind);
            return Err(refused(&tenant, held, limited, 0));
        }
        counters.admitted();
        let fair = route.and_then(|route| {
            let settings = table.fair(route)?.clone();
            let group = self.groups.lock().entry(route.to_string()).or_default().clone();
            Some(FairTicket { route: route.to_string(), group, settings })
        });
        Ok(Admitted { tenant: Some(tenant), scopes, counters: Some(counters), fair, now })
    }

    fn scope(&self, key: ScopeKey) -> Arc<ScopeState> {
        self.scopes.lock().entry(key).or_default().clone()
    }

    fn counters_of(&self, label: Arc<str>) -> Arc<TenantCounters> {
        self.counters.lock().entry(label).or_default().clone()
    }

    /// Every tenant label's counters.
    pub fn counters(&self) -> BTreeMap<String, CountersView> {
        self.counters.lock().iter().map(|(label, c)| (label.to_string(), c.view())).collect()
    }

    /// Requests left today under each daily quota of `table`: (tenant,
    /// route or `None`, left).
    pub fn quotas_left(&self, table: &TenantTable) -> Vec<(String, Option<String>, u64)> {
        let now = unix_now();
        let scopes = self.scopes.lock();
        table
            .quotas()
            .into_iter()
            .map(|(tenant, route, quota)| {
                let key = (route.map(String::from), tenant.clone());
                let left = scopes.get(&key).map_or(quota, |s| s.quota_left(quota, now));
                (tenant.to_string(), route.map(String::from), left)
            })
            .collect()
    }
}

impl Admitted {
    /// `RateLimit-Policy` and `RateLimit` for the answer of an admitted
    /// request: its scopes' limits, and what it left of their request
    /// rate and daily quota; none when no limit applies.
    pub fn headers(&self) -> Vec<(HeaderName, String)> {
        let policy: Vec<String> =
            self.scopes.iter().flat_map(|h| policy_items(h.route.as_deref(), &h.limits)).collect();
        let standing: Vec<String> = self
            .scopes
            .iter()
            .flat_map(|h| standing_items(h.route.as_deref(), &h.limits, h.standing, self.now))
            .collect();
        [(names::RATELIMIT_POLICY, policy), (names::RATELIMIT, standing)]
            .into_iter()
            .filter(|(_, items)| !items.is_empty())
            .map(|(name, items)| (name, items.join(", ")))
            .collect()
    }

    /// Takes the compute limits for `rows` rows about to run: each limited
    /// scope's `concurrent` place, then its rows.
    pub fn compute(&self, rows: usize) -> Result<Computing, GatewayError> {
        let mut places = Vec::with_capacity(self.scopes.len());
        for held in &self.scopes {
            match held.state.take_compute(&held.limits, rows) {
                Ok(place) => places.push(place),
                Err(limited) => {
                    if let Some(c) = &self.counters {
                        c.limited(limited.kind);
                    }
                    let tenant = self.tenant.as_deref().unwrap_or_default();
                    return Err(refused(tenant, held, limited, rows));
                }
            }
        }
        let fair = match (&self.fair, &self.tenant) {
            (Some(ticket), Some(tenant)) => Some(self.fair_place(ticket, tenant)?),
            _ => None,
        };
        if let Some(c) = &self.counters {
            c.rows(rows);
        }
        Ok(Computing { _places: places, _fair: fair })
    }

    /// A place in the route's fair share ([`super::fair`]).
    fn fair_place(&self, ticket: &FairTicket, tenant: &Arc<str>) -> Result<FairPlace, GatewayError> {
        let FairTicket { route, group, settings } = ticket;
        let admitted = group.lock().try_admit(tenant, settings.capacity, |t| settings.weight(t));
        match admitted {
            Ok(()) => Ok(FairPlace { group: group.clone(), tenant: tenant.clone() }),
            Err(over) => {
                if let Some(c) = &self.counters {
                    c.limited(LimitKind::FairShare);
                }
                Err(GatewayError::TenantLimited(Box::new(Refusal {
                    tenant: tenant.to_string(),
                    route: Some(route.clone()),
                    kind: LimitKind::FairShare,
                    retry_after: Duration::from_secs(1),
                    limits: TenantLimits::default(),
                    rows: 0,
                    share: over.share,
                })))
            }
        }
    }
}

/// Each scope's daily quota, then each scope's request rate; on a
/// refusal every day's request counted is given back (a rate cell a scope
/// gave before another scope's rate refused stays spent: GCRA takes no
/// refund).
fn take_requests(scopes: &mut [Held], now: u64) -> Result<(), (&Held, Limited)> {
    let refund = |scopes: &[Held], upto: usize| scopes[..upto].iter().for_each(|h| h.state.refund_day(now));
    for i in 0..scopes.len() {
        match scopes[i].state.reserve_day(&scopes[i].limits, now) {
            Ok(left) => scopes[i].standing.day_left = left,
            Err(limited) => {
                refund(scopes, i);
                return Err((&scopes[i], limited));
            }
        }
    }
    for i in 0..scopes.len() {
        match scopes[i].state.take_rate(&scopes[i].limits) {
            Ok(left) => scopes[i].standing.requests_left = left,
            Err(limited) => {
                refund(scopes, scopes.len());
                return Err((&scopes[i], limited));
            }
        }
    }
    Ok(())
}

fn refused(tenant: &str, held: &Held, limited: Limited, rows: usize) -> GatewayError {
    GatewayError::TenantLimited(Box::new(Refusal {
        tenant: tenant.to_string(),
        route: held.route.clone(),
        kind: limited.kind,
        retry_after: limited.retry_after,
        limits: held.limits,
        rows,
        share: 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::path::Path;

    const CONFIG: &str = r#"
[[models]]
name = "m"
path = "m.onnx"
[[routes]]
name = "r"
models = ["m"]
auth = { keys = [{ key = "key-of-team-a-0001", tenant = "a" }, { key = "key-of-team-b-0002", tenant = "b" }, { key = "key-of-team-c-0003", tenant = "c" }], tenants = [{ name = "b", limits = { requests_per_day = 1 } }] }
[[tenants]]
name = "a"
limits = { requests_per_day = 2, concurrent = 1 }
"#;

    fn table() -> TenantTable {
        TenantTable::build(&parse(CONFIG, Path::new("/")).unwrap())
    }

    fn kind(e: GatewayError) -> Option<super::super::LimitKind> {
        match e {
            GatewayError::TenantLimited(r) => Some(r.kind),
            _ => None,
        }
    }

    #[test]
    fn scopes_limit_their_own_tenant_and_route() {
        let (tenants, table) = (Tenants::default(), table());
        assert!(tenants.admit(&table, Some("r"), Some("b")).is_ok());
        assert_eq!(
            kind(tenants.admit(&table, Some("r"), Some("b")).err().unwrap()),
            Some(super::super::LimitKind::Daily)
        );
        assert!(tenants.admit(&table, None, Some("b")).is_ok(), "b's quota is on route r only");
        for _ in 0..5 {
            assert!(tenants.admit(&table, Some("r"), Some("c")).is_ok(), "c has no limits");
            assert!(tenants.admit(&table, Some("r"), None).is_ok(), "an open call has none");
        }
        let a = tenants.admit(&table, Some("r"), Some("a")).unwrap();
        let computing = a.compute(3).unwrap();
        assert_eq!(kind(a.compute(1).err().unwrap()), Some(super::super::LimitKind::Concurrent));
        drop(computing);
        assert!(a.compute(1).is_ok());
        let counters = tenants.counters();
        assert_eq!(counters["a"].rows, 4);
        assert_eq!(counters["a"].limited["concurrent"], 1);
        assert_eq!(counters["b"].limited["daily"], 1);
        assert_eq!(counters["_other"].admitted, 5, "c is not named by the limits: {counters:?}");
        let mut left = tenants.quotas_left(&table);
        left.sort();
        assert_eq!(left, [("a".into(), None, 1), ("b".into(), Some("r".into()), 0)]);
    }

    #[test]
    fn a_refusal_in_one_scope_spends_no_quota_of_the_other() {
        let config = CONFIG.replace(
            "tenants = [{ name = \"b\"",
            "tenants = [{ name = \"a\", limits = { requests_per_day = 5 } }, { name = \"b\"",
        );
        let table = TenantTable::build(&parse(&config, Path::new("/")).unwrap());
        let tenants = Tenants::default();
        for _ in 0..2 {
            assert!(tenants.admit(&table, Some("r"), Some("a")).is_ok());
        }
        for _ in 0..3 {
            let refused = tenants.admit(&table, Some("r"), Some("a")).err().unwrap();
            assert_eq!(kind(refused), Some(super::super::LimitKind::Daily), "a's own quota of 2");
        }
        let mut left = tenants.quotas_left(&table);
        left.sort();
        assert_eq!(left[..2], [("a".into(), None, 0), ("a".into(), Some("r".into()), 3)]);
    }
}
