//! Resolving a request's budget from the route's settings and what the client
//! asked for.
//!
//! Use [`RouteBudget`] as the route's `budget_ms = { default = 20, max = 200 }`
//! config table, validate it at start-up, and call [`RouteBudget::resolve`]
//! once per request with the `x-latency-budget-ms` header and the V2
//! `parameters.timeout` value. Invalid client values are a [`BudgetError`]
//! (HTTP 400), never a silent default.

use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;

use crate::budget::Budget;
use crate::policy_issue::PolicyIssue;

/// Request header carrying a budget in whole milliseconds.
pub const BUDGET_HEADER: &str = "x-latency-budget-ms";

/// Longest client value echoed back in an error message.
const MAX_ECHO: usize = 64;

/// A route's budget settings, in milliseconds (`budget_ms` in the config).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteBudget {
    /// Budget of a request that asks for none, in ms. At least 1.
    pub default: u64,
    /// Largest budget a request may ask for, in ms; larger asks are clamped.
    /// At least `default`.
    pub max: u64,
}

/// Where a resolved budget came from, for traces and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetSource {
    /// The client asked for nothing (or for Triton's "no timeout", 0).
    RouteDefault,
    /// The `x-latency-budget-ms` header.
    Header,
    /// The V2 `parameters.timeout` value (microseconds).
    TimeoutParameter,
}

/// The outcome of [`RouteBudget::resolve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedBudget {
    /// The budget to decide with; nothing spent yet.
    pub budget: Budget,
    /// Which input won.
    pub source: BudgetSource,
    /// True when the client asked for more than the route maximum.
    pub clamped: bool,
}

/// A client-supplied budget that cannot be understood. The gateway answers
/// 400 with the message.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum BudgetError {
    /// The header is not a positive whole number of milliseconds.
    #[error("header {BUDGET_HEADER} must be a positive whole number of milliseconds, got {value:?}")]
    InvalidHeader {
        /// The offending value (truncated).
        value: String,
    },
    /// `parameters.timeout` is not a non-negative number of microseconds.
    #[error("parameter \"timeout\" must be a non-negative number of microseconds, got {value}")]
    InvalidTimeout {
        /// The offending value as JSON (truncated).
        value: String,
    },
}

impl BudgetError {
    /// The HTTP status the gateway answers with: always 400.
    pub const fn http_status(&self) -> u16 {
        400
    }

    /// Low-cardinality label for the error metric.
    pub const fn label(&self) -> &'static str {
        match self {
            BudgetError::InvalidHeader { .. } => "invalid_budget_header",
            BudgetError::InvalidTimeout { .. } => "invalid_timeout_parameter",
        }
    }

    /// Never retryable: the same request fails the same way.
    pub const fn retryable(&self) -> bool {
        false
    }
}

impl RouteBudget {
    /// Checks `default >= 1` and `max >= default`; paths are `budget_ms.*`.
    pub fn validate(&self) -> Result<(), Vec<PolicyIssue>> {
        let mut issues = Vec::new();
        if self.default == 0 {
            issues.push(PolicyIssue::new("budget_ms.default", "must be at least 1 ms"));
        }
        if self.max < self.default {
            issues.push(PolicyIssue::new(
                "budget_ms.max",
                format!("must be at least budget_ms.default ({} ms), got {} ms", self.default, self.max),
            ));
        }
        crate::policy_issue::into_result(issues)
    }

    /// Resolves one request's budget.
    ///
    /// 1. Parse the header, if present: ASCII digits only, a whole number of
    ///    milliseconds >= 1 (surrounding whitespace allowed). Else
    ///    [`BudgetError::InvalidHeader`].
    /// 2. Parse `timeout`, if present: a JSON number >= 0 of microseconds
    ///    (fractions truncated, anything under 1 µs rounds up to 1 µs). `0`
    ///    means "no timeout", as in Triton, and is treated as absent. Any other
    ///    JSON value is [`BudgetError::InvalidTimeout`].
    /// 3. Clamp each ask to `max`.
    /// 4. When both are given, the tighter one wins (both are the client's
    ///    demands). When neither is, the route default applies.
    pub fn resolve(
        &self,
        header: Option<&str>,
        timeout: Option<&serde_json::Value>,
    ) -> Result<ResolvedBudget, BudgetError> {
        let from_header = header.map(parse_header).transpose()?;
        let from_param = timeout.map(parse_timeout).transpose()?.flatten();
        let asks = [(from_header, BudgetSource::Header), (from_param, BudgetSource::TimeoutParameter)];
        let tightest =
            asks.iter().filter_map(|(ask, source)| ask.map(|d| (d, *source))).min_by_key(|(d, _)| *d);
        let max = Duration::from_millis(self.max);
        Ok(match tightest {
            None => ResolvedBudget {
                budget: Budget::new(Duration::from_millis(self.default).min(max)),
                source: BudgetSource::RouteDefault,
                clamped: false,
            },
            Some((asked, source)) => {
                ResolvedBudget { budget: Budget::new(asked.min(max)), source, clamped: asked > max }
            }
        })
    }
}

/// Step 1 of [`RouteBudget::resolve`].
fn parse_header(raw: &str) -> Result<Duration, BudgetError> {
    let trimmed = raw.trim();
    let invalid = || BudgetError::InvalidHeader { value: truncate(raw) };
    if trimmed.is_empty() || !trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    match trimmed.parse::<u64>() {
        Ok(0) | Err(_) => Err(invalid()),
        Ok(ms) => Ok(Duration::from_millis(ms)),
    }
}

/// Step 2 of [`RouteBudget::resolve`]; `Ok(None)` for Triton's "no timeout".
fn parse_timeout(value: &serde_json::Value) -> Result<Option<Duration>, BudgetError> {
    let invalid = || BudgetError::InvalidTimeout { value: truncate(&value.to_string()) };
    let serde_json::Value::Number(number) = value else {
        return Err(invalid());
    };
    if let Some(micros) = number.as_u64() {
        return Ok((micros > 0).then(|| Duration::from_micros(micros)));
    }
    match number.as_f64() {
        Some(micros) if micros.is_finite() && micros == 0.0 => Ok(None),
        Some(micros) if micros.is_finite() && micros > 0.0 => {
            // Truncate to whole microseconds; never below 1 µs; saturate.
            let whole = micros.trunc().max(1.0);
            let duration = Duration::try_from_secs_f64(whole / 1e6).unwrap_or(Duration::MAX);
            Ok(Some(duration))
        }
        _ => Err(invalid()),
    }
}

/// A client value shortened for an error message.
fn truncate(raw: &str) -> String {
    raw.chars().take(MAX_ECHO).collect()
}

#[cfg(test)]
mod tests;
