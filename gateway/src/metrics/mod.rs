//! Prometheus metrics recorded on the request path, and the family
//! builder every metric uses. The page itself (`GET /metrics` on the admin
//! listener) is assembled in [`crate::admin::metrics_page`].
//!
//! Two sources, one page:
//! - [`requests`]: counted on the request path into a process-wide
//!   registry: requests by route, endpoint and status, request durations,
//!   upstream attempts. [`record_request`] runs once per request in the
//!   app's `logging` phase; [`upstream_attempt`] once per attempt on an
//!   upstream address (V2 calls and proxied requests), from
//!   [`crate::upstream::observe::attempt_finished`].
//! - [`crate::admin::scrape`] and [`connections`]: read when `/metrics` is
//!   scraped from counters other modules already keep (runtime pools and
//!   models, cache tiers, routing decisions, admission, connections), so
//!   nothing is counted twice and the request path pays nothing for them.
//! - [`tls`]: the expiry of each TLS listener's certificate, read from
//!   the config snapshot at scrape time.
//! - [`streams`]: counters of streamed (SSE) calls, shown in
//!   `GET /admin/stats` under `"streams"`.
//! - [`classes`]: requests per priority class and how they ended, counted
//!   by routing, shown in `/metrics` and `GET /admin/stats` (`"priority"`).
//!
//! Labels are low-cardinality by construction: routes, models, pools and
//! upstreams come from the config; devices, endpoints, statuses, reasons,
//! tiers and states from closed sets. Never request ids; tenants only as
//! the config lists them, every other under `_other`
//! ([`crate::tenants::families`]). Every
//! metric is listed on the book's Metrics page (`docs/src/reference/metrics.md`).

pub mod classes;
pub mod connections;
pub mod family;
pub mod requests;
pub mod streams;
pub mod tls;

pub use requests::{record_request, upstream_attempt, RequestLabels};
