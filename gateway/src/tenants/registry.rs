//! [`Tenants`]: the limiter state of every scope and the counters of
//! every tenant label, for the life of the process (across hot reloads),
//! and the two steps a request takes through them ([`Tenants::admit`],
//! [`Admitted::compute`]; order in [`super`]).

use super::counters::{CountersView, TenantCounters};
use super::fair::FairGroup;
use super::fleet::{self, FleetStore, Verdict};
use super::refusal::{policy_items, standing_items, Refusal, Standing};
use super::scope::{unix_now, InFlight, Limited, ScopeState};
use super::table::FairRoute;
use super::table::TenantTable;
use super::LimitKind;
use crate::config::fleet_limits_section::{FailMode, FleetLimits};
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

/// The fleet's Redis, for `[fleet_limits]` ([`super::fleet`]): the
/// cache's L2 (with its timeouts and breaker), `None` when this process
/// has no L2 (then the local share applies, as while Redis is down).
#[derive(Clone, Copy)]
pub struct Fleet<'a> {
    /// `[fleet_limits]`.
    pub settings: FleetLimits,
    /// The cache's Redis.
    pub store: Option<&'a dyn FleetStore>,
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
    /// scope's daily quota and request rate, the route's first. With
    /// `fleet` (`[fleet_limits]`), the quotas and rates are asked of
    /// Redis ([`super::fleet`]); while it is unreachable, the local share
    /// is enforced here, or the request refused (`fail = "closed"`).
    pub async fn admit(
        &self,
        table: &TenantTable,
        route: Option<&str>,
        tenant: Option<&str>,
        fleet: Option<Fleet<'_>>,
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
        let fleet = fleet.filter(|_| scopes.iter().any(|h| fleet::held_by_fleet(&h.limits)));
        let taken = match fleet {
            None => take_requests(&mut scopes, now).map_err(|(held, limited)| (held.clone_limits(), limited)),
            Some(fleet) => take_in_fleet(fleet, &tenant, &mut scopes, now).await,
        };
        if let Err((held, limited)) = taken {
            counters.limited(limited.kind);
            return Err(refused(&tenant, &held, limited, 0));
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
                    return Err(refused(tenant, &held.clone_limits(), limited, rows));
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
                Err(Refusal {
                    tenant: tenant.to_string(),
                    route: Some(route.clone()),
                    kind: LimitKind::FairShare,
                    retry_after: Duration::from_secs(1),
                    limits: TenantLimits::default(),
                    rows: 0,
                    share: over.share,
                }
                .into())
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

/// The scope a refusal names: its route and its limits.
struct RefusingScope {
    route: Option<String>,
    limits: TenantLimits,
}

impl Held {
    fn clone_limits(&self) -> RefusingScope {
        RefusingScope { route: self.route.clone(), limits: self.limits }
    }
}

/// Each scope's daily quota and request rate, asked of the fleet's Redis;
/// while it is unreachable, the local share of each (`fail = "open"`) or
/// a refusal (`"closed"`).
async fn take_in_fleet(
    fleet: Fleet<'_>,
    tenant: &str,
    scopes: &mut [Held],
    now: u64,
) -> Result<(), (RefusingScope, Limited)> {
    match ask_fleet(fleet, tenant, scopes).await {
        Some(Verdict::Admitted(standings)) => {
            for (held, standing) in scopes.iter_mut().zip(standings) {
                if let Some(left) = standing.day_left {
                    held.state.note_fleet_day(left, now);
                }
                held.standing = standing;
            }
            Ok(())
        }
        Some(Verdict::Refused { scope, kind, retry_after }) => {
            if let (LimitKind::Daily, Some(held)) = (kind, scopes.get(scope)) {
                held.state.note_fleet_day(0, now);
            }
            let held = scopes.get(scope).map(Held::clone_limits);
            let held = held.unwrap_or(RefusingScope { route: None, limits: TenantLimits::default() });
            Err((held, Limited { kind, retry_after }))
        }
        None if fleet.settings.fail == FailMode::Closed => {
            let held = scopes.iter().find(|h| fleet::held_by_fleet(&h.limits)).map(Held::clone_limits);
            let held = held.unwrap_or(RefusingScope { route: None, limits: TenantLimits::default() });
            Err((held, Limited { kind: LimitKind::FleetUnavailable, retry_after: Duration::from_secs(1) }))
        }
        None => {
            for held in scopes.iter_mut() {
                held.limits = fleet::local_share(&held.limits, fleet.settings.replicas);
            }
            take_requests(scopes, now).map_err(|(held, limited)| (held.clone_limits(), limited))
        }
    }
}

/// The script's verdict for `scopes`; `None` when Redis is unreachable
/// (no L2, its breaker open, the command failed or timed out) or answered
/// something else.
async fn ask_fleet(fleet: Fleet<'_>, tenant: &str, scopes: &[Held]) -> Option<Verdict> {
    let store = fleet.store?;
    let asked: Vec<(Option<&str>, TenantLimits)> =
        scopes.iter().map(|h| (h.route.as_deref(), h.limits)).collect();
    let value = store.eval(fleet::command(store.namespace(), tenant, &asked)).await?;
    let verdict = fleet::verdict(&value, scopes.len());
    if verdict.is_none() {
        tracing::warn!(answer = ?value, "the fleet limits script answered something unexpected; using the local share");
    }
    verdict
}

fn refused(tenant: &str, held: &RefusingScope, limited: Limited, rows: usize) -> GatewayError {
    Refusal {
        tenant: tenant.to_string(),
        route: held.route.clone(),
        kind: limited.kind,
        retry_after: limited.retry_after,
        limits: held.limits,
        rows,
        share: 0,
    }
    .into()
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

    /// `admit` without a fleet, run to completion.
    fn admit(
        tenants: &Tenants,
        table: &TenantTable,
        route: Option<&str>,
        tenant: Option<&str>,
    ) -> Result<Admitted, GatewayError> {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(tenants.admit(table, route, tenant, None))
    }

    /// `admit` with `[fleet_limits]` but no Redis to ask (as while it is
    /// unreachable: no L2, or its breaker open).
    fn admit_without_redis(
        tenants: &Tenants,
        table: &TenantTable,
        tenant: &str,
        fail: FailMode,
    ) -> Result<Admitted, GatewayError> {
        let fleet = Fleet { settings: FleetLimits { replicas: 2, fail }, store: None };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(tenants.admit(table, Some("r"), Some(tenant), Some(fleet)))
    }

    #[test]
    fn without_redis_the_fleet_falls_back_to_the_local_share_or_refuses() {
        let (tenants, table) = (Tenants::default(), table());
        // a: 2 a day across the fleet of 2 -> 1 here; b: 1 on route r -> 1 (never 0).
        assert!(admit_without_redis(&tenants, &table, "a", FailMode::Open).is_ok());
        let refused = admit_without_redis(&tenants, &table, "a", FailMode::Open).err().unwrap();
        match &refused {
            GatewayError::TenantLimited(r) => assert!(r.policy_header.contains("q=1;"), "the share: {r:?}"),
            other => panic!("{other:?}"),
        }
        assert!(admit_without_redis(&tenants, &table, "b", FailMode::Open).is_ok());
        assert_eq!(
            kind(admit_without_redis(&tenants, &table, "b", FailMode::Open).err().unwrap()),
            Some(super::super::LimitKind::Daily.label())
        );
        let closed = admit_without_redis(&tenants, &table, "a", FailMode::Closed).err().unwrap();
        assert_eq!(closed.status(), 503);
        assert_eq!(kind(closed), Some(super::super::LimitKind::FleetUnavailable.label()));
        for _ in 0..3 {
            let open = admit_without_redis(&tenants, &table, "c", FailMode::Closed);
            assert!(open.is_ok(), "a tenant without fleet limits needs no Redis, closed or not");
        }
        assert_eq!(tenants.counters()["a"].limited["fleet_unavailable"], 1);
    }

    fn kind(e: GatewayError) -> Option<&'static str> {
        match e {
            GatewayError::TenantLimited(r) => Some(r.label),
            _ => None,
        }
    }

    #[test]
    fn scopes_limit_their_own_tenant_and_route() {
        let (tenants, table) = (Tenants::default(), table());
        assert!(admit(&tenants, &table, Some("r"), Some("b")).is_ok());
        assert_eq!(
            kind(admit(&tenants, &table, Some("r"), Some("b")).err().unwrap()),
            Some(super::super::LimitKind::Daily.label())
        );
        assert!(admit(&tenants, &table, None, Some("b")).is_ok(), "b's quota is on route r only");
        for _ in 0..5 {
            assert!(admit(&tenants, &table, Some("r"), Some("c")).is_ok(), "c has no limits");
            assert!(admit(&tenants, &table, Some("r"), None).is_ok(), "an open call has none");
        }
        let a = admit(&tenants, &table, Some("r"), Some("a")).unwrap();
        let computing = a.compute(3).unwrap();
        assert_eq!(kind(a.compute(1).err().unwrap()), Some(super::super::LimitKind::Concurrent.label()));
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
            assert!(admit(&tenants, &table, Some("r"), Some("a")).is_ok());
        }
        for _ in 0..3 {
            let refused = admit(&tenants, &table, Some("r"), Some("a")).err().unwrap();
            assert_eq!(kind(refused), Some(super::super::LimitKind::Daily.label()), "a's own quota of 2");
        }
        let mut left = tenants.quotas_left(&table);
        left.sort();
        assert_eq!(left[..2], [("a".into(), None, 0), ("a".into(), Some("r".into()), 3)]);
    }
}
