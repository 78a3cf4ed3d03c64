//! A request's latency budget: the route's `budget_ms = { default, max }`
//! resolved against the `x-latency-budget-ms` header and the V2
//! `parameters.timeout` (microseconds) by [`RouteBudget::resolve`].
//! Invalid client values answer 400; asks above the route maximum are
//! clamped. The budget counts from when the gateway received the request.

use crate::config::RouteConfig;
use crate::error::GatewayError;
use http::HeaderMap;
use router_policies::{BudgetError, ResolvedBudget, RouteBudget, BUDGET_HEADER};
use std::time::Duration;

/// Budget of a model addressed directly (not through a route), in ms.
pub const DIRECT_DEFAULT_MS: u64 = 1000;
/// Largest budget a request to a directly addressed model may ask for.
pub const DIRECT_MAX_MS: u64 = 10_000;

/// The route's budget settings; models addressed directly get
/// [`DIRECT_DEFAULT_MS`] / [`DIRECT_MAX_MS`].
pub fn route_budget(route: Option<&RouteConfig>) -> RouteBudget {
    match route {
        Some(r) => RouteBudget { default: millis(r.default_budget), max: millis(r.max_budget) },
        None => RouteBudget { default: DIRECT_DEFAULT_MS, max: DIRECT_MAX_MS },
    }
}

/// Checks the `x-latency-budget-ms` header alone, before the body is
/// decoded (the exact-repeat cache answers from the raw bytes, which do not
/// include the headers).
pub fn check_header(route: RouteBudget, headers: &HeaderMap) -> Result<(), GatewayError> {
    resolve(route, headers, &serde_json::Map::new()).map(|_| ())
}

/// Resolves one request's budget from its header and parameters. The
/// handler calls it before the cache or any identical in-flight request
/// is consulted, so that an invalid budget is always the request's own
/// 400 and never reaches another request.
pub fn resolve(
    route: RouteBudget,
    headers: &HeaderMap,
    parameters: &serde_json::Map<String, serde_json::Value>,
) -> Result<ResolvedBudget, GatewayError> {
    let header = match headers.get(BUDGET_HEADER) {
        None => None,
        Some(value) => Some(value.to_str().map_err(|_| {
            GatewayError::Budget(BudgetError::InvalidHeader {
                value: String::from_utf8_lossy(value.as_bytes()).chars().take(64).collect(),
            })
        })?),
    };
    Ok(route.resolve(header, parameters.get("timeout"))?)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn params(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn header_is_clamped_and_invalid_is_400() {
        let rb = RouteBudget { default: 50, max: 200 };
        let mut h = HeaderMap::new();
        assert_eq!(resolve(rb, &h, &params(serde_json::json!({}))).unwrap().budget.total.as_millis(), 50);
        h.insert(BUDGET_HEADER, HeaderValue::from_static("5000"));
        let r = resolve(rb, &h, &params(serde_json::json!({}))).unwrap();
        assert_eq!(r.budget.total.as_millis(), 200);
        assert!(r.clamped);
        h.insert(BUDGET_HEADER, HeaderValue::from_static("-3"));
        let e = resolve(rb, &h, &params(serde_json::json!({}))).unwrap_err();
        assert_eq!(e.status(), 400);
        assert!(e.to_string().contains("x-latency-budget-ms"), "{e}");
    }

    #[test]
    fn timeout_parameter_is_microseconds() {
        let rb = RouteBudget { default: 50, max: 200 };
        let r = resolve(rb, &HeaderMap::new(), &params(serde_json::json!({"timeout": 30_000}))).unwrap();
        assert_eq!(r.budget.total, Duration::from_millis(30));
        let e = resolve(rb, &HeaderMap::new(), &params(serde_json::json!({"timeout": "x"}))).unwrap_err();
        assert_eq!(e.status(), 400);
    }

    #[test]
    fn direct_models_get_the_documented_defaults() {
        assert_eq!(route_budget(None), RouteBudget { default: DIRECT_DEFAULT_MS, max: DIRECT_MAX_MS });
    }
}
