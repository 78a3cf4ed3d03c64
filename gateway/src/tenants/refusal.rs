//! A tenant's request refused by one of its limits: the 429 (413 for a
//! batch larger than the row burst) and the headers that tell the client
//! what it may send, after the IETF draft "RateLimit header fields for
//! HTTP" (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy` lists
//! the refusing scope's limits, `RateLimit` the one that refused, with
//! nothing left (`r=0`) and the seconds until a retry may pass (`t`). gRPC
//! carries the same values in the trailers (`ratelimit-policy`,
//! `ratelimit`, `retry-after`).

use super::LimitKind;
use crate::config::tenant_section::TenantLimits;
use crate::error::{GatewayError, LimitRefusal};
use std::time::Duration;

/// One refusal, with the scope it happened in.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The tenant refused.
    pub tenant: String,
    /// The route whose `auth.tenants` limit refused; `None` for the
    /// tenant's `[[tenants]]` limits.
    pub route: Option<String>,
    /// Which limit.
    pub kind: LimitKind,
    /// When a retry may pass.
    pub retry_after: Duration,
    /// The refusing scope's limits (for `RateLimit-Policy`).
    pub limits: TenantLimits,
    /// The request's rows, for [`LimitKind::RowsOverBurst`].
    pub rows: usize,
    /// The tenant's share of the route, for [`LimitKind::FairShare`].
    pub share: u32,
}

impl Refusal {
    /// 413 for a batch no wait can admit, 503 when the fleet's limits
    /// cannot be checked (`fail = "closed"`), else 429.
    pub fn status(&self) -> u16 {
        match self.kind {
            LimitKind::RowsOverBurst => 413,
            LimitKind::FleetUnavailable => 503,
            _ => 429,
        }
    }

    /// Whole seconds to wait, rounded up, at least 1 (`Retry-After`).
    pub fn retry_after_s(&self) -> u64 {
        let d = self.retry_after;
        (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
    }

    fn policy_name(&self, kind: LimitKind) -> String {
        policy_name(self.route.as_deref(), kind)
    }

    /// `RateLimit-Policy`: each limit of the refusing scope, e.g.
    /// `"requests";q=20;w=2, "daily";q=1000;w=86400`. `q` is the quota,
    /// `w` its window in seconds (for a rate: the burst and the seconds it
    /// takes to come back), `qu` the unit when it is not requests.
    pub fn policy_header(&self) -> String {
        if self.kind == LimitKind::FairShare {
            let name = self.policy_name(LimitKind::FairShare);
            return format!("\"{name}\";q={};qu=\"concurrent-requests\"", self.share);
        }
        policy_items(self.route.as_deref(), &self.limits).join(", ")
    }

    /// `RateLimit`: the refusing limit, nothing left, the seconds until a
    /// retry may pass: `"requests";r=0;t=2`.
    pub fn limit_header(&self) -> String {
        let kind = match self.kind {
            LimitKind::RowsOverBurst => LimitKind::Rows,
            other => other,
        };
        format!("\"{}\";r=0;t={}", self.policy_name(kind), self.retry_after_s())
    }

    /// The client's message: which limit, in which scope, how long to wait.
    pub fn message(&self) -> String {
        let scope = match &self.route {
            None => format!("tenant {:?}", self.tenant),
            Some(route) => format!("tenant {:?} on route {:?}", self.tenant, route),
        };
        match self.kind {
            LimitKind::RowsOverBurst => format!(
                "the request has {} rows, more than {scope} may compute at once (rows_burst {}); send smaller batches",
                self.rows,
                self.limits.rows.map_or(0, |r| r.burst)
            ),
            LimitKind::FairShare => format!(
                "route {:?} is overloaded and tenant {:?} holds its fair share ({} requests computing); retry in {} s",
                self.route.as_deref().unwrap_or_default(),
                self.tenant,
                self.share,
                self.retry_after_s()
            ),
            LimitKind::FleetUnavailable => format!(
                "the fleet-wide limits of {scope} cannot be checked (Redis unreachable, fleet_limits.fail = \"closed\"); retry in {} s",
                self.retry_after_s()
            ),
            kind => format!("{scope} is over its {} limit; retry in {} s", kind.as_str(), self.retry_after_s()),
        }
    }
}

/// The policy name of `kind` in a scope: `requests`, or `route/requests`
/// for a route's limit.
fn policy_name(route: Option<&str>, kind: LimitKind) -> String {
    match route {
        None => kind.policy().to_string(),
        Some(route) => format!("{}/{}", quoted_safe(route), kind.policy()),
    }
}

/// The `RateLimit-Policy` items of a scope's `limits` (`route`: a route's
/// scope): `q` the quota, `w` its window in seconds (for a rate: the burst
/// and the seconds it takes to come back), `qu` the unit when it is not
/// requests.
pub fn policy_items(route: Option<&str>, l: &TenantLimits) -> Vec<String> {
    let name = |kind| policy_name(route, kind);
    let mut items = Vec::new();
    if let Some(rate) = l.requests {
        items.push(format!(
            "\"{}\";q={};w={}",
            name(LimitKind::Requests),
            rate.burst,
            window(rate.burst, rate.per_s)
        ));
    }
    if let Some(rate) = l.rows {
        let w = window(rate.burst, rate.per_s);
        items.push(format!("\"{}\";q={};w={w};qu=\"rows\"", name(LimitKind::Rows), rate.burst));
    }
    if let Some(max) = l.concurrent {
        items.push(format!("\"{}\";q={max};qu=\"concurrent-requests\"", name(LimitKind::Concurrent)));
    }
    if let Some(quota) = l.requests_per_day {
        items.push(format!("\"{}\";q={quota};w={}", name(LimitKind::Daily), super::scope::DAY_S));
    }
    items
}

/// What an admitted request left of its scope's request limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Standing {
    /// Requests the rate lets through at once now.
    pub requests_left: Option<u32>,
    /// Requests left today.
    pub day_left: Option<u64>,
}

/// The `RateLimit` items of an admitted request in a scope: what is left
/// (`r`) and the seconds until it is whole again (`t`: the burst refilled,
/// 00:00 UTC for the day).
pub fn standing_items(route: Option<&str>, l: &TenantLimits, standing: Standing, now_s: u64) -> Vec<String> {
    let mut items = Vec::new();
    if let (Some(rate), Some(left)) = (l.requests, standing.requests_left) {
        let refill = window(rate.burst.saturating_sub(left), rate.per_s);
        let t = if left >= rate.burst { 0 } else { refill };
        items.push(format!("\"{}\";r={left};t={t}", policy_name(route, LimitKind::Requests)));
    }
    if let Some(left) = standing.day_left {
        let t = super::scope::DAY_S - now_s % super::scope::DAY_S;
        items.push(format!("\"{}\";r={left};t={t}", policy_name(route, LimitKind::Daily)));
    }
    items
}

/// Seconds a full burst takes to come back, at least 1.
fn window(burst: u32, per_s: f64) -> u64 {
    // The rate is at least 1e-6/s by the config check; `as` saturates.
    ((f64::from(burst) / per_s).ceil() as u64).max(1)
}

/// `text` safe inside a structured-field string: `"` and `\` dropped.
fn quoted_safe(text: &str) -> String {
    text.chars().filter(|c| *c != '"' && *c != '\\' && (' '..='~').contains(c)).collect()
}

impl From<Refusal> for GatewayError {
    /// The refusal in the plain words the edges write
    /// ([`GatewayError::TenantLimited`]).
    fn from(refusal: Refusal) -> GatewayError {
        let status = refusal.status();
        GatewayError::TenantLimited(Box::new(LimitRefusal {
            status,
            label: refusal.kind.label(),
            message: refusal.message(),
            retry_after_s: (status != 413).then(|| refusal.retry_after_s()),
            policy_header: refusal.policy_header(),
            limit_header: refusal.limit_header(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tenant_section::Rate;

    fn refusal(kind: LimitKind, route: Option<&str>) -> Refusal {
        Refusal {
            tenant: "team-a".into(),
            route: route.map(String::from),
            kind,
            retry_after: Duration::from_millis(1500),
            limits: TenantLimits {
                requests: Some(Rate { per_s: 10.0, burst: 20 }),
                rows: Some(Rate { per_s: 100.0, burst: 100 }),
                concurrent: Some(4),
                requests_per_day: Some(1000),
            },
            rows: 7,
            share: 0,
        }
    }

    #[test]
    fn headers_follow_the_draft() {
        let r = refusal(LimitKind::Requests, None);
        assert_eq!(
            r.policy_header(),
            "\"requests\";q=20;w=2, \"rows\";q=100;w=1;qu=\"rows\", \"concurrent\";q=4;qu=\"concurrent-requests\", \"daily\";q=1000;w=86400"
        );
        assert_eq!(r.limit_header(), "\"requests\";r=0;t=2");
        assert_eq!(r.retry_after_s(), 2);
        assert_eq!(r.status(), 429);
    }

    #[test]
    fn an_admitted_request_is_told_what_is_left() {
        let r = refusal(LimitKind::Requests, Some("digits"));
        let standing = Standing { requests_left: Some(15), day_left: Some(990) };
        let items = standing_items(Some("digits"), &r.limits, standing, 86_400 * 3 + 400);
        assert_eq!(items, ["\"digits/requests\";r=15;t=1", "\"digits/daily\";r=990;t=86000"]);
        let full = Standing { requests_left: Some(20), day_left: None };
        assert_eq!(standing_items(None, &r.limits, full, 0), ["\"requests\";r=20;t=0"]);
    }

    #[test]
    fn a_route_scope_names_its_route_and_a_huge_batch_is_413() {
        let r = refusal(LimitKind::Daily, Some("digits"));
        assert_eq!(r.limit_header(), "\"digits/daily\";r=0;t=2");
        assert!(r.policy_header().starts_with("\"digits/requests\";q=20"), "{}", r.policy_header());
        assert!(r.message().contains("on route \"digits\""), "{}", r.message());
        let big = refusal(LimitKind::RowsOverBurst, None);
        assert_eq!(big.status(), 413);
        assert!(big.message().contains("7 rows"), "{}", big.message());
        assert_eq!(big.limit_header(), "\"rows\";r=0;t=2");
        let fair = Refusal { share: 3, ..refusal(LimitKind::FairShare, Some("digits")) };
        assert_eq!(fair.policy_header(), "\"digits/fair_share\";q=3;qu=\"concurrent-requests\"");
        assert_eq!(fair.limit_header(), "\"digits/fair_share\";r=0;t=2");
    }
}
