//! Per-request limits of a model: how many rows one request may carry and,
//! for a text model, how many tokens. They bound the work (and memory) one
//! request can cause before any per-row state is allocated; a request over
//! a limit fails with [`crate::RuntimeError::TooLarge`] (413).
//!
//! Defaults follow the model's batching: [`DEFAULT_BATCHES_PER_REQUEST`]
//! full batches of its largest pool batch (at least
//! [`MIN_DEFAULT_MAX_ROWS`] rows), and for a text model that many rows at
//! `max_length` tokens ([`crate::ModelSpec::max_rows`] and
//! [`crate::ModelSpec::max_tokens`] work them out). A leaf: the limits
//! name no other module, so the spec, the store and the gateway may all
//! use them. Accepted requests larger than one batch run in
//! batch-sized chunks (see `chunk`), so the limit bounds a request's total
//! work, not the size of one execution.

use serde::Deserialize;

/// Full batches one request may hold by default.
pub const DEFAULT_BATCHES_PER_REQUEST: usize = 8;

/// The smallest default row limit (for models that batch little or not
/// at all).
pub const MIN_DEFAULT_MAX_ROWS: usize = 64;

/// Limits of one request to a model; `None` takes the default derived
/// from the model's batching (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestLimits {
    /// Most rows (batch dimension) in one request.
    pub max_rows: Option<usize>,
    /// Most tokens in one request to a text model, summed over its texts
    /// after truncation to `max_length`.
    pub max_tokens: Option<usize>,
}

impl RequestLimits {
    /// Checks the values on their own: each given limit at least 1.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_rows == Some(0) {
            return Err("limits.max_rows must be at least 1".into());
        }
        if self.max_tokens == Some(0) {
            return Err("limits.max_tokens must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_limits_are_refused() {
        assert!(RequestLimits { max_rows: Some(0), max_tokens: None }.validate().is_err());
        assert!(RequestLimits { max_rows: None, max_tokens: Some(0) }.validate().is_err());
        assert!(RequestLimits { max_rows: Some(1), max_tokens: Some(1) }.validate().is_ok());
    }
}
