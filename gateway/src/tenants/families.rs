//! The tenants' metric families, read at scrape time from [`super::Tenants`]
//! (`GET /metrics`), and the same figures for `GET /admin/stats`
//! (`"tenants"`). The `tenant` label is a tenant the config lists
//! (`[[tenants]]` or a route's `auth.tenants`); every other tenant counts
//! under `_other`, so the label's values are bounded by the config.

use super::counters::CountersView;
use super::{TenantTable, Tenants};
use crate::metrics::family::Family;
use prometheus::proto::MetricFamily;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The `route` label of a daily quota that holds across routes.
pub const EVERY_ROUTE: &str = "*";

/// Admitted requests, refusals by limit, rows computed, and what is left
/// of each daily quota.
pub fn tenant_families(tenants: &Tenants, table: &TenantTable) -> Vec<MetricFamily> {
    let mut admitted = Family::counter(
        "switchyard_tenant_admitted_total",
        "Requests admitted past the tenant's request limits (cache hits included).",
        &["tenant"],
    );
    let mut limited = Family::counter(
        "switchyard_tenant_limited_total",
        "Requests refused by one of the tenant's limits or its fair share (requests, rows, rows_burst, concurrent, daily, fair_share, fleet_unavailable).",
        &["tenant", "limit"],
    );
    let mut rows = Family::counter(
        "switchyard_tenant_rows_total",
        "Rows the models computed for the tenant (cache hits not included).",
        &["tenant"],
    );
    let mut left = Family::gauge(
        "switchyard_tenant_quota_left",
        "Requests left today (UTC) under the tenant's requests_per_day, per route (`*`: across routes).",
        &["tenant", "route"],
    );
    for (tenant, view) in tenants.counters() {
        admitted.sample(&[&tenant], view.admitted as f64);
        for (limit, n) in &view.limited {
            limited.sample(&[&tenant, limit], *n as f64);
        }
        rows.sample(&[&tenant], view.rows as f64);
    }
    for (tenant, route, n) in tenants.quotas_left(table) {
        left.sample(&[&tenant, route.as_deref().unwrap_or(EVERY_ROUTE)], n as f64);
    }
    [admitted, limited, rows, left].into_iter().filter_map(Family::finish).collect()
}

/// `"tenants"` of `/admin/stats`: per tenant label its counters and the
/// daily quotas left (`{"*": n, "<route>": n}`).
pub fn stats_json(tenants: &Tenants, table: &TenantTable) -> Value {
    let mut out: BTreeMap<String, Value> = tenants
        .counters()
        .into_iter()
        .map(|(tenant, view)| (tenant, serde_json::to_value(view).unwrap_or_default()))
        .collect();
    for (tenant, route, n) in tenants.quotas_left(table) {
        let entry = out
            .entry(tenant)
            .or_insert_with(|| serde_json::to_value(CountersView::default()).unwrap_or_default());
        entry["quota_left"][route.as_deref().unwrap_or(EVERY_ROUTE)] = json!(n);
    }
    json!(out)
}
