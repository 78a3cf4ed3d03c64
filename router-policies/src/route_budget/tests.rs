use crate::test_util::*;
use crate::{BudgetError, BudgetSource, RouteBudget};
use serde_json::json;
use std::time::Duration;

const ROUTE: RouteBudget = RouteBudget { default: 20, max: 200 };

#[test]
fn no_ask_uses_the_route_default() {
    let resolved = ROUTE.resolve(None, None).unwrap();
    assert_eq!(resolved.budget, budget_ms(20));
    assert_eq!(resolved.source, BudgetSource::RouteDefault);
    assert!(!resolved.clamped);
}

#[test]
fn header_in_ms_is_used_and_clamped() {
    let resolved = ROUTE.resolve(Some(" 50 "), None).unwrap();
    assert_eq!((resolved.budget.total, resolved.source), (ms(50), BudgetSource::Header));
    let clamped = ROUTE.resolve(Some("5000"), None).unwrap();
    assert_eq!(clamped.budget.total, ms(200));
    assert!(clamped.clamped);
}

#[test]
fn timeout_parameter_is_microseconds() {
    let resolved = ROUTE.resolve(None, Some(&json!(30_000))).unwrap();
    assert_eq!((resolved.budget.total, resolved.source), (ms(30), BudgetSource::TimeoutParameter));
    let float = ROUTE.resolve(None, Some(&json!(1500.7))).unwrap();
    assert_eq!(float.budget.total, Duration::from_micros(1500));
    let tiny = ROUTE.resolve(None, Some(&json!(0.25))).unwrap();
    assert_eq!(tiny.budget.total, Duration::from_micros(1));
    let huge = ROUTE.resolve(None, Some(&json!(1e300))).unwrap();
    assert_eq!(huge.budget.total, ms(200));
    assert!(huge.clamped);
}

#[test]
fn timeout_zero_means_no_timeout() {
    let resolved = ROUTE.resolve(None, Some(&json!(0))).unwrap();
    assert_eq!((resolved.budget.total, resolved.source), (ms(20), BudgetSource::RouteDefault));
    let with_header = ROUTE.resolve(Some("70"), Some(&json!(0.0))).unwrap();
    assert_eq!(with_header.budget.total, ms(70));
}

#[test]
fn the_tighter_ask_wins() {
    let header_wins = ROUTE.resolve(Some("10"), Some(&json!(50_000))).unwrap();
    assert_eq!((header_wins.budget.total, header_wins.source), (ms(10), BudgetSource::Header));
    let param_wins = ROUTE.resolve(Some("100"), Some(&json!(50_000))).unwrap();
    assert_eq!(param_wins.source, BudgetSource::TimeoutParameter);
    let tie = ROUTE.resolve(Some("50"), Some(&json!(50_000))).unwrap();
    assert_eq!(tie.source, BudgetSource::Header);
}

#[test]
fn invalid_header_is_a_400() {
    for bad in ["", "abc", "-5", "+5", "1.5", "0", "99999999999999999999999", "10ms"] {
        let err = ROUTE.resolve(Some(bad), None).unwrap_err();
        assert!(matches!(err, BudgetError::InvalidHeader { .. }), "{bad:?}");
        assert_eq!(err.http_status(), 400);
        assert_eq!(err.label(), "invalid_budget_header");
        assert!(!err.retryable());
    }
    let long = "x".repeat(1000);
    let message = ROUTE.resolve(Some(&long), None).unwrap_err().to_string();
    assert!(message.len() < 200, "{message}");
}

#[test]
fn invalid_timeout_is_a_400() {
    for bad in [json!(-1), json!(-0.5), json!("100"), json!(null), json!([1]), json!(true)] {
        let err = ROUTE.resolve(None, Some(&bad)).unwrap_err();
        assert!(matches!(err, BudgetError::InvalidTimeout { .. }), "{bad}");
        assert_eq!(err.label(), "invalid_timeout_parameter");
    }
    // A bad header is reported even when the parameter is fine.
    assert!(ROUTE.resolve(Some("x"), Some(&json!(10))).is_err());
}

#[test]
fn route_budget_config_is_validated() {
    let parsed: RouteBudget = toml::from_str("default = 20\nmax = 200").unwrap();
    assert_eq!(parsed, ROUTE);
    assert!(toml::from_str::<RouteBudget>("default = 20\nmax = 200\nmin = 1").is_err());
    assert!(ROUTE.validate().is_ok());
    let issues = RouteBudget { default: 0, max: 0 }.validate().unwrap_err();
    assert_eq!(issues[0].path, "budget_ms.default");
    let issues = RouteBudget { default: 50, max: 10 }.validate().unwrap_err();
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].path, "budget_ms.max");
    assert_eq!(issues[0].to_string(), "budget_ms.max: must be at least budget_ms.default (50 ms), got 10 ms");
}
