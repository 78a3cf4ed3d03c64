//! Tenant limits: requests and rows per second, requests computing at
//! once and requests per UTC day, per tenant (`[[tenants]]`) and per
//! tenant on one route (`routes[].auth.tenants`), enforced in one place
//! for every front end ([`crate::inference::run`], which V2 REST, gRPC
//! and `/v1/embeddings` share).
//!
//! Order, for a request whose API key names a tenant:
//! 1. Admission ([`Tenants::admit`]), before the cache: the route scope,
//!    then the tenant scope, each its daily quota, then its request rate.
//!    Every admitted request counts, cache hits included (REST's
//!    exact-repeat hits too: the REST front end admits each one): a hit
//!    spends a request and a day's request, nothing else. A request
//!    refused before (bad input, bad budget) spends nothing.
//! 2. Compute ([`Admitted::compute`]), only when a model runs (a cache
//!    miss; for a batch cached row by row, each batch of missing rows):
//!    a place under `concurrent`, then the rows from the row rate, then
//!    the tenant's fair share of the route when it is overloaded
//!    ([`fair`]; `auth.fair_share = false` turns it off). A
//!    cache hit and a request answered by another's identical computation
//!    (coalesced) spend neither.
//!
//! A refusal is 429 with `Retry-After`, `RateLimit-Policy` and `RateLimit`
//! ([`refusal`]); a batch with more rows than the row burst can never
//! pass and is 413. Limits are local to the process unless `[fleet_limits]`
//! holds the request rates and daily quotas in Redis ([`fleet`]). State is
//! kept across hot reloads ([`scope`]).

pub mod counters;
pub mod fair;
pub mod families;
pub mod fleet;
pub mod refusal;
pub mod registry;
pub mod scope;
pub mod table;

pub use registry::{Admitted, Computing, Fleet, Tenants};
pub use table::TenantTable;

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// `requests_per_s` / `burst`.
    Requests,
    /// `rows_per_s` / `rows_burst`.
    Rows,
    /// A batch larger than `rows_burst` (413).
    RowsOverBurst,
    /// `concurrent`.
    Concurrent,
    /// `requests_per_day`.
    Daily,
    /// The tenant's fair share of an overloaded route ([`fair`]).
    FairShare,
    /// The fleet's limits could not be asked of Redis and
    /// `[fleet_limits] fail = "closed"` (503).
    FleetUnavailable,
}

impl LimitKind {
    /// Every kind, in the order metrics list them.
    pub const ALL: [LimitKind; 7] = [
        LimitKind::Requests,
        LimitKind::Rows,
        LimitKind::RowsOverBurst,
        LimitKind::Concurrent,
        LimitKind::Daily,
        LimitKind::FairShare,
        LimitKind::FleetUnavailable,
    ];

    /// The metric label and error label suffix.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Requests => "requests",
            LimitKind::Rows => "rows",
            LimitKind::RowsOverBurst => "rows_burst",
            LimitKind::Concurrent => "concurrent",
            LimitKind::Daily => "daily",
            LimitKind::FairShare => "fair_share",
            LimitKind::FleetUnavailable => "fleet_unavailable",
        }
    }

    /// The error label (`tenant_requests`, ...).
    pub fn label(self) -> &'static str {
        match self {
            LimitKind::Requests => "tenant_requests",
            LimitKind::Rows => "tenant_rows",
            LimitKind::RowsOverBurst => "tenant_rows_burst",
            LimitKind::Concurrent => "tenant_concurrent",
            LimitKind::Daily => "tenant_daily",
            LimitKind::FairShare => "tenant_fair_share",
            LimitKind::FleetUnavailable => "tenant_fleet_unavailable",
        }
    }

    /// The policy's name in `RateLimit-Policy`.
    fn policy(self) -> &'static str {
        match self {
            LimitKind::RowsOverBurst => "rows",
            LimitKind::FleetUnavailable => "requests",
            other => other.as_str(),
        }
    }
}
