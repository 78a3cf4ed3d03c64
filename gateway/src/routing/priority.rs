//! A request's priority class: the V2 `priority` parameter (REST
//! `parameters`, gRPC `parameters`), else the `x-priority` header (gRPC:
//! metadata), else its tenant's default, bounded by the highest class its
//! tenant may ask. Classes follow Triton's convention: 1 is the highest,
//! larger numbers are lower, 0 asks for the default.
//!
//! 1. The ask: the parameter when present and not 0, else the header when
//!    present and not 0. Anything but a whole number >= 0 answers 400.
//! 2. No ask: the tenant's `priority`, else
//!    [`switchyard_runtime::DEFAULT_CLASS`].
//! 3. Asks beyond [`switchyard_runtime::PRIORITY_LEVELS`] are the lowest
//!    class; asks above the tenant's `max_priority` get `max_priority`.
//!    A caller without a `[[tenants]]` entry may ask any class.
//!
//! The class decides the request's place in its pool's queue (with its
//! deadline, see `switchyard_runtime::rank`), never its cache key.

use crate::config::tenant_section::TenantConfig;
use crate::error::GatewayError;
use http::HeaderMap;
use serde_json::Value;
use switchyard_runtime::{DEFAULT_CLASS, PRIORITY_LEVELS};

/// The header a client (or a proxy in front) asks a class with.
pub const PRIORITY_HEADER: &str = "x-priority";

/// The request's class (module docs); `tenant` is the caller's
/// `[[tenants]]` entry, if it has one.
pub fn resolve(
    headers: &HeaderMap,
    parameters: &serde_json::Map<String, Value>,
    tenant: Option<&TenantConfig>,
) -> Result<u8, GatewayError> {
    let from_parameter = match parameters.get("priority") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| bad(format!("parameter priority must be a whole number >= 0, got {v}")))?,
    };
    let from_header = match headers.get(PRIORITY_HEADER) {
        None => 0,
        Some(v) => v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()).ok_or_else(|| {
            let shown: String = String::from_utf8_lossy(v.as_bytes()).chars().take(32).collect();
            bad(format!("header {PRIORITY_HEADER} must be a whole number >= 0, got {shown:?}"))
        })?,
    };
    let ask = if from_parameter != 0 { from_parameter } else { from_header };
    let class = match ask {
        0 => tenant.and_then(|t| t.priority).unwrap_or(DEFAULT_CLASS),
        n => u8::try_from(n).unwrap_or(u8::MAX).min(PRIORITY_LEVELS),
    };
    let highest = tenant.and_then(|t| t.max_priority).unwrap_or(1);
    Ok(class.max(highest).min(PRIORITY_LEVELS))
}

fn bad(message: String) -> GatewayError {
    GatewayError::BadPriority(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn params(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn header(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(PRIORITY_HEADER, v.parse().unwrap());
        h
    }

    fn tenant(priority: Option<u8>, max_priority: Option<u8>) -> TenantConfig {
        TenantConfig {
            name: Arc::from("t"),
            limits: Default::default(),
            weight: None,
            priority,
            max_priority,
        }
    }

    #[test]
    fn the_parameter_then_the_header_then_the_default() {
        let none = HeaderMap::new();
        assert_eq!(resolve(&none, &params(serde_json::json!({})), None).unwrap(), DEFAULT_CLASS);
        assert_eq!(resolve(&none, &params(serde_json::json!({"priority": 0})), None).unwrap(), DEFAULT_CLASS);
        assert_eq!(resolve(&header("3"), &params(serde_json::json!({"priority": 1})), None).unwrap(), 1);
        assert_eq!(resolve(&header("3"), &params(serde_json::json!({"priority": 0})), None).unwrap(), 3);
        assert_eq!(
            resolve(&none, &params(serde_json::json!({"priority": 99})), None).unwrap(),
            PRIORITY_LEVELS
        );
    }

    #[test]
    fn a_tenant_sets_the_default_and_bounds_the_ask() {
        let none = HeaderMap::new();
        let t = tenant(Some(3), Some(2));
        assert_eq!(resolve(&none, &params(serde_json::json!({})), Some(&t)).unwrap(), 3);
        assert_eq!(resolve(&none, &params(serde_json::json!({"priority": 1})), Some(&t)).unwrap(), 2);
        assert_eq!(resolve(&header("4"), &params(serde_json::json!({})), Some(&t)).unwrap(), 4);
    }

    #[test]
    fn bad_asks_are_400() {
        let none = HeaderMap::new();
        for bad in [serde_json::json!({"priority": -1}), serde_json::json!({"priority": "high"})] {
            let e = resolve(&none, &params(bad), None).unwrap_err();
            assert_eq!(e.status(), 400, "{e}");
        }
        let e = resolve(&header("urgent"), &params(serde_json::json!({})), None).unwrap_err();
        assert_eq!(e.status(), 400);
        assert!(e.to_string().contains(PRIORITY_HEADER), "{e}");
    }
}
