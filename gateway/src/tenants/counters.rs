//! Per-tenant counters for `/metrics` and `/admin/stats`: requests
//! admitted, refused by each limit, rows computed. Kept by metric label
//! ([`super::table::TenantTable::label`]), so only tenants the config
//! names get their own series.

use super::LimitKind;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// One tenant label's counters.
#[derive(Debug, Default)]
pub struct TenantCounters {
    admitted: AtomicU64,
    limited: [AtomicU64; LimitKind::ALL.len()],
    rows: AtomicU64,
}

/// A copy of one label's counters.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CountersView {
    /// Requests admitted (hits included).
    pub admitted: u64,
    /// Requests refused, by limit (`requests`, `rows`, ...).
    pub limited: BTreeMap<&'static str, u64>,
    /// Rows the models computed for the tenant.
    pub rows: u64,
}

impl TenantCounters {
    /// One request admitted.
    pub fn admitted(&self) {
        self.admitted.fetch_add(1, Ordering::Relaxed);
    }

    /// One request refused by `kind`.
    pub fn limited(&self, kind: LimitKind) {
        if let Some(i) = LimitKind::ALL.iter().position(|k| *k == kind) {
            self.limited[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `rows` rows computed.
    pub fn rows(&self, rows: usize) {
        self.rows.fetch_add(u64::try_from(rows).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// The counters now.
    pub fn view(&self) -> CountersView {
        CountersView {
            admitted: self.admitted.load(Ordering::Relaxed),
            limited: LimitKind::ALL
                .iter()
                .zip(&self.limited)
                .map(|(k, c)| (k.as_str(), c.load(Ordering::Relaxed)))
                .collect(),
            rows: self.rows.load(Ordering::Relaxed),
        }
    }
}
