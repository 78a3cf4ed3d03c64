//! Per-request limits of a model: how many rows one request may carry and,
//! for a text model, how many tokens. They bound the work (and memory) one
//! request can cause before any per-row state is allocated; a request over
//! a limit fails with [`RuntimeError::TooLarge`] (413).
//!
//! Defaults follow the model's batching: [`DEFAULT_BATCHES_PER_REQUEST`]
//! full batches of its largest pool batch (at least
//! [`MIN_DEFAULT_MAX_ROWS`] rows), and for a text model that many rows at
//! `max_length` tokens. Accepted requests larger than one batch run in
//! batch-sized chunks (see `chunk`), so the limit bounds a request's total
//! work, not the size of one execution.

use serde::Deserialize;

use crate::error::RuntimeError;
use crate::request::InferenceRequest;
use crate::spec::ModelSpec;

/// Full batches one request may hold by default.
pub const DEFAULT_BATCHES_PER_REQUEST: usize = 8;

/// The smallest default row limit (for models that batch little or not
/// at all).
pub const MIN_DEFAULT_MAX_ROWS: usize = 64;

/// Limits of one request to a model; `None` takes the default derived
/// from the model's batching (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
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

impl ModelSpec {
    /// The most rows one request may carry: `limits.max_rows`, else
    /// [`DEFAULT_BATCHES_PER_REQUEST`] times the largest `max_batch_size`
    /// of its pools, at least [`MIN_DEFAULT_MAX_ROWS`].
    pub fn max_rows(&self) -> usize {
        self.limits.max_rows.unwrap_or_else(|| {
            let largest = self.pools.iter().map(|p| self.pool_batching(p).max_batch_size).max().unwrap_or(1);
            largest.max(1).saturating_mul(DEFAULT_BATCHES_PER_REQUEST).max(MIN_DEFAULT_MAX_ROWS)
        })
    }

    /// For a text model, the most tokens one request may carry:
    /// `limits.max_tokens`, else [`Self::max_rows`] texts of `max_length`
    /// tokens. `None` for other models.
    pub fn max_tokens(&self) -> Option<usize> {
        let text = self.text.as_ref()?;
        Some(self.limits.max_tokens.unwrap_or_else(|| self.max_rows().saturating_mul(text.max_length)))
    }

    /// `TooLarge` when `rows` exceeds [`Self::max_rows`].
    pub fn check_rows(&self, rows: usize) -> Result<(), RuntimeError> {
        let limit = self.max_rows();
        if rows <= limit {
            return Ok(());
        }
        Err(RuntimeError::TooLarge {
            model: self.name.clone(),
            reason: format!("the request has {rows} rows, more than the {limit} rows one request may carry"),
            setting: "max_rows",
        })
    }
}

/// The rows a request declares: the largest leading dimension of its
/// inputs (0 for scalars), read before anything else is done with it.
pub fn request_rows(req: &InferenceRequest) -> usize {
    req.inputs.iter().filter_map(|(_, t)| t.shape().first().copied()).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{BatchingSpec, DeviceKind, PoolSpec};
    use crate::text::TextSpec;

    fn spec(max_batch: usize, pool_batch: Option<usize>) -> ModelSpec {
        let batching = |n| BatchingSpec { max_batch_size: n, ..BatchingSpec::default() };
        ModelSpec {
            name: "m".into(),
            version: 1,
            path: "m.onnx".into(),
            pools: vec![PoolSpec {
                name: "cpu".into(),
                device: DeviceKind::Cpu,
                workers: 1,
                intra_op_threads: 1,
                batching: pool_batch.map(batching),
            }],
            batching: batching(max_batch),
            idle_unload: None,
            warmup: false,
            text: None,
            limits: RequestLimits::default(),
            source: None,
        }
    }

    #[test]
    fn defaults_follow_batching() {
        assert_eq!(spec(32, None).max_rows(), 256);
        assert_eq!(spec(32, Some(128)).max_rows(), 1024, "the largest pool batch");
        assert_eq!(spec(1, None).max_rows(), MIN_DEFAULT_MAX_ROWS);
        assert_eq!(spec(0, None).max_rows(), MIN_DEFAULT_MAX_ROWS);
        assert_eq!(spec(32, None).max_tokens(), None, "not a text model");
        let mut text = spec(16, None);
        text.text = Some(TextSpec {
            tokenizer: "t.json".into(),
            max_length: 128,
            buckets: vec![128],
            input: "text".into(),
        });
        assert_eq!(text.max_tokens(), Some(128 * 128));
        text.limits = RequestLimits { max_rows: Some(10), max_tokens: Some(500) };
        assert_eq!((text.max_rows(), text.max_tokens()), (10, Some(500)));
    }

    #[test]
    fn rows_over_the_limit_are_too_large() {
        let s = spec(16, None);
        assert!(s.check_rows(128).is_ok());
        let e = s.check_rows(129).unwrap_err();
        assert_eq!(e.label(), "too_large");
        assert!(e.to_string().contains("129 rows") && e.to_string().contains("max_rows"), "{e}");
        assert!(RequestLimits { max_rows: Some(0), max_tokens: None }.validate().is_err());
    }
}
