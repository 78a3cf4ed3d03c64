//! What the runtime is asked to serve: models, their device pools and
//! batching settings. The gateway builds these from its config file; the
//! runtime reads no files besides the models themselves.
//!
//! [`ModelSpec::validate`] is called by [`crate::ModelRepository::new`], so
//! an inconsistent spec is an error at start-up rather than at first use.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::device::DeviceKind;
use crate::error::RuntimeError;
use crate::limits::{RequestLimits, DEFAULT_BATCHES_PER_REQUEST, MIN_DEFAULT_MAX_ROWS};
use crate::rank::QueueOrder;

/// One device pool of a model: `workers` threads, each owning its own
/// ONNX Runtime session on `device`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// Unique within the model (`cpu`, `gpu0`); shown in responses and stats.
    pub name: String,
    /// The execution provider.
    pub device: DeviceKind,
    /// Worker threads (= sessions); at least 1.
    pub workers: usize,
    /// ONNX Runtime intra-op threads per session; 0 lets ONNX Runtime pick
    /// (one per core, which oversubscribes when there are several workers).
    pub intra_op_threads: usize,
    /// This pool's own batching, overriding the model's: e.g. a GPU pool
    /// that batches 64 rows beside a CPU pool that batches 8. `None` uses
    /// the model's [`ModelSpec::batching`].
    #[serde(default)]
    pub batching: Option<BatchingSpec>,
}

/// Dynamic batching settings of a model (or of one pool, when the pool
/// overrides them).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchingSpec {
    /// Most rows per executed batch; 0 or 1 disables batching (each request
    /// runs alone). A single request with more rows still runs, alone.
    pub max_batch_size: usize,
    /// How long a worker waits, after the first queued request of a batch
    /// arrived, for more requests to fill the batch.
    pub max_queue_delay: Duration,
    /// Requests each pool may hold waiting; beyond that, `Overloaded`.
    pub queue_capacity: usize,
    /// Dispatch a batch at once, without waiting out `max_queue_delay`,
    /// when nothing is queued behind it and it already holds as many
    /// requests as usually share the pool (a moving average of the queued
    /// and executing requests each new one found): nobody else is likely to
    /// come, so the wait would only add latency (one caller at a time would
    /// wait the full delay on every request). Under many clients the average
    /// is high and batches fill as they would without the option.
    /// `false` always waits up to `max_queue_delay` for company (Triton's
    /// dynamic batcher), for a device whose cost per batch is so high that
    /// a fuller batch is worth the latency even at low load. Default `true`.
    #[serde(default = "idle_dispatch_default")]
    pub idle_dispatch: bool,
    /// A request that arrives into an idle, calm CPU pool and whose batch
    /// is predicted to run within this time runs on the caller's thread
    /// instead of being handed to a worker thread and back (see
    /// `crate::inline`): for a microsecond model the hand-off costs more
    /// than the model. Zero turns it off. Default
    /// [`BatchingSpec::DEFAULT_INLINE_MAX`].
    #[serde(default = "inline_max_default")]
    pub inline_max: Duration,
    /// How the queue orders requests of one priority class: earliest
    /// deadline first (default) or by arrival alone (see [`crate::rank`]).
    #[serde(default)]
    pub queue_order: QueueOrder,
    /// On a CPU pool whose sessions are all busy, a request of a strictly
    /// higher class than every request of a running batch stops that
    /// batch and runs next; the stopped batch's requests go back into the
    /// queue at their place and run again (see [`crate::preempt`]). The
    /// pool's batches then hold one class each, and a request that was
    /// stopped runs again alone. Costs the stopped batch's
    /// work; nothing changes for a pool whose requests are all of one
    /// class. CUDA pools never preempt. Default
    /// [`BatchingSpec::DEFAULT_PREEMPT`].
    #[serde(default = "preempt_default")]
    pub preempt: bool,
    /// A CPU pool keeps one more session, beside its `workers`, that runs
    /// only requests of the first class (`x-priority: 1`, by the class
    /// they asked for, not by aging), and runs its other workers at the
    /// lowest OS scheduling priority: a first-class request never waits
    /// for a lower class's batch, and while both run, the OS gives the
    /// reserved session the CPU (see [`crate::reserve`]). Costs one
    /// session's memory; the other workers yield to every thread of
    /// normal priority (the HTTP front, other models' workers). CUDA
    /// pools never reserve. Default [`BatchingSpec::DEFAULT_RESERVE_TOP_CLASS`].
    #[serde(default = "reserve_top_class_default")]
    pub reserve_top_class: bool,
    /// For a text model: most padded tokens per batch. A batch of one
    /// length bucket holds at most `max_batch_tokens / bucket` rows (at
    /// least one request, never more than `max_batch_size` rows), so short
    /// texts batch wider than long ones: a CPU runs a transformer fastest
    /// per token while a batch's activations stay in its caches, and a
    /// fixed row count is either too few rows for short texts or too many
    /// for long ones (see [`crate::row_limit`]). `None`: rows alone limit
    /// a batch. Models without a tokenizer have no tokens and ignore it.
    #[serde(default)]
    pub max_batch_tokens: Option<usize>,
}

fn idle_dispatch_default() -> bool {
    true
}

fn preempt_default() -> bool {
    BatchingSpec::DEFAULT_PREEMPT
}

fn reserve_top_class_default() -> bool {
    BatchingSpec::DEFAULT_RESERVE_TOP_CLASS
}

fn inline_max_default() -> Duration {
    BatchingSpec::DEFAULT_INLINE_MAX
}

impl Default for BatchingSpec {
    fn default() -> Self {
        BatchingSpec {
            max_batch_size: 1,
            max_queue_delay: Duration::ZERO,
            queue_capacity: 1024,
            idle_dispatch: true,
            inline_max: BatchingSpec::DEFAULT_INLINE_MAX,
            queue_order: QueueOrder::Deadline,
            preempt: BatchingSpec::DEFAULT_PREEMPT,
            reserve_top_class: BatchingSpec::DEFAULT_RESERVE_TOP_CLASS,
            max_batch_tokens: None,
        }
    }
}

impl BatchingSpec {
    /// The default [`BatchingSpec::inline_max`]: 50 µs, long enough for
    /// the models whose run is shorter than a hand-off to a worker thread
    /// and back, short enough that the caller's event loop is held no
    /// longer than a large request's JSON decoding holds it.
    pub const DEFAULT_INLINE_MAX: Duration = Duration::from_micros(50);

    /// The default [`BatchingSpec::preempt`].
    pub const DEFAULT_PREEMPT: bool = false;

    /// The default [`BatchingSpec::reserve_top_class`].
    pub const DEFAULT_RESERVE_TOP_CLASS: bool = false;

    /// True when requests may be merged into one execution.
    pub fn enabled(&self) -> bool {
        self.max_batch_size > 1
    }
}

/// A model to serve.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Unique model name (`digits-heavy`).
    pub name: String,
    /// Version reported in responses; informational.
    pub version: u64,
    /// The `.onnx` file.
    pub path: PathBuf,
    /// Device pools, in order of preference when their predicted waits tie.
    pub pools: Vec<PoolSpec>,
    /// Dynamic batching.
    pub batching: BatchingSpec,
    /// Unload the sessions after this long without requests (requires
    /// [`crate::ModelRepository::start_idle_reaper`]); `None` keeps them.
    pub idle_unload: Option<Duration>,
    /// Load the sessions (and run one zero-filled request per worker when
    /// the input shapes allow) at registration instead of on first use.
    pub warmup: bool,
    /// A text model's tokenizer stage: clients send a `BYTES` input of
    /// strings, the runtime feeds the graph token tensors (see
    /// [`crate::text`]). `None` for models that take tensors directly.
    #[serde(default)]
    pub text: Option<crate::text_spec::TextSpec>,
    /// Per-request limits (rows, tokens); defaults follow the batching
    /// (see [`crate::limits`]).
    #[serde(default)]
    pub limits: RequestLimits,
    /// Where the file comes from when a model store delivers it (`None`:
    /// a file on disk). With a source the model registers before its file
    /// exists and fetches it on first load (see [`crate::source`]).
    #[serde(skip)]
    pub source: Option<crate::source::ModelSource>,
}

impl ModelSpec {
    /// The batching a pool runs with: its own override, else the model's.
    pub fn pool_batching<'a>(&'a self, pool: &'a PoolSpec) -> &'a BatchingSpec {
        pool.batching.as_ref().unwrap_or(&self.batching)
    }

    /// True when some pool of the model batches.
    pub fn any_batching(&self) -> bool {
        self.pools.iter().any(|p| self.pool_batching(p).enabled())
    }

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

    /// Checks the spec on its own: a name, at least one pool, unique pool
    /// names, at least one worker per pool, a non-empty queue, limits of
    /// at least 1.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let fail = |reason: String| Err(RuntimeError::InvalidSpec { model: self.name.clone(), reason });
        if self.name.is_empty() {
            return fail("name must not be empty".into());
        }
        if self.pools.is_empty() {
            return fail("at least one pool is needed".into());
        }
        for (i, pool) in self.pools.iter().enumerate() {
            if pool.name.is_empty() {
                return fail(format!("pools[{i}].name must not be empty"));
            }
            if self.pools[..i].iter().any(|p| p.name == pool.name) {
                return fail(format!("pools[{i}].name {:?} is used twice", pool.name));
            }
            if pool.workers == 0 {
                return fail(format!("pools[{i}].workers must be at least 1"));
            }
            if pool.batching.as_ref().is_some_and(|b| b.queue_capacity == 0) {
                return fail(format!("pools[{i}].batching.queue_capacity must be at least 1"));
            }
        }
        if self.batching.queue_capacity == 0 {
            return fail("batching.queue_capacity must be at least 1".into());
        }
        if self.idle_unload == Some(Duration::ZERO) {
            return fail("idle_unload must be positive (or absent)".into());
        }
        if let Some(text) = &self.text {
            text.validate().or_else(fail)?;
        }
        self.limits.validate().or_else(fail)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text_spec::TextSpec;

    fn spec() -> ModelSpec {
        ModelSpec {
            name: "m".into(),
            version: 1,
            path: "m.onnx".into(),
            pools: vec![PoolSpec {
                name: "cpu".into(),
                device: DeviceKind::Cpu,
                workers: 1,
                intra_op_threads: 1,
                batching: None,
            }],
            batching: BatchingSpec::default(),
            idle_unload: None,
            warmup: false,
            text: None,
            limits: Default::default(),
            source: None,
        }
    }

    #[test]
    fn validate_catches_mistakes() {
        assert!(spec().validate().is_ok());
        let mut s = spec();
        s.pools.push(s.pools[0].clone());
        assert!(matches!(s.validate(), Err(RuntimeError::InvalidSpec { .. })));
        let mut s = spec();
        s.pools[0].workers = 0;
        assert!(s.validate().is_err());
        let mut s = spec();
        s.pools.clear();
        assert!(s.validate().is_err());
        let mut s = spec();
        s.batching.queue_capacity = 0;
        assert!(s.validate().is_err());
    }

    /// [`spec`] batching `max_batch` rows, its pool `pool_batch` when set.
    fn batched(max_batch: usize, pool_batch: Option<usize>) -> ModelSpec {
        let batching = |n| BatchingSpec { max_batch_size: n, ..BatchingSpec::default() };
        let mut s = ModelSpec { batching: batching(max_batch), ..spec() };
        s.pools[0].batching = pool_batch.map(batching);
        s
    }

    #[test]
    fn default_limits_follow_batching() {
        assert_eq!(batched(32, None).max_rows(), 256);
        assert_eq!(batched(32, Some(128)).max_rows(), 1024, "the largest pool batch");
        assert_eq!(batched(1, None).max_rows(), MIN_DEFAULT_MAX_ROWS);
        assert_eq!(batched(0, None).max_rows(), MIN_DEFAULT_MAX_ROWS);
        assert_eq!(batched(32, None).max_tokens(), None, "not a text model");
        let mut text = batched(16, None);
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
        let s = batched(16, None);
        assert!(s.check_rows(128).is_ok());
        let e = s.check_rows(129).unwrap_err();
        assert_eq!(e.label(), "too_large");
        assert!(e.to_string().contains("129 rows") && e.to_string().contains("max_rows"), "{e}");
    }
}
