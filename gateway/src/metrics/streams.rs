//! Counters of streamed (SSE) infer calls, shown under `"streams"` in
//! `GET /admin/stats`. They tell operators how often drafts were final,
//! how often clients hung up, and how often load turned parallel runs
//! sequential; tests read them to know when a disconnect was noticed.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters; shared by all requests.
#[derive(Debug, Default)]
pub struct StreamCounters {
    started: AtomicU64,
    drafts: AtomicU64,
    finals: AtomicU64,
    finals_from_draft: AtomicU64,
    finals_cached: AtomicU64,
    errors: AtomicU64,
    client_gone: AtomicU64,
    parallel: AtomicU64,
    sequential: AtomicU64,
    sequential_under_load: AtomicU64,
    single: AtomicU64,
}

/// What one counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamCount {
    /// A stream was accepted (its request decoded).
    Started,
    /// A `draft` event was sent.
    Draft,
    /// A `final` event was sent.
    Final,
    /// ... and it repeated the draft.
    FinalFromDraft,
    /// ... and it came from the cache.
    FinalCached,
    /// The stream ended with an error (event or status).
    Error,
    /// The client went away before the stream ended.
    ClientGone,
    /// The pair ran in parallel.
    Parallel,
    /// The pair ran sequentially, as configured.
    Sequential,
    /// The pair ran sequentially because the heavy pool was loaded.
    SequentialUnderLoad,
    /// One target answered (no pair, or only one model usable).
    Single,
}

/// A copy of the counters, for JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StreamSnapshot {
    /// Streams accepted.
    pub started: u64,
    /// `draft` events sent.
    pub drafts: u64,
    /// `final` events sent.
    pub finals: u64,
    /// Finals that repeated the draft.
    pub finals_from_draft: u64,
    /// Finals served from the cache.
    pub finals_cached: u64,
    /// Streams that ended with an error.
    pub errors: u64,
    /// Streams whose client went away first.
    pub client_gone: u64,
    /// Finals of pairs run in parallel.
    pub parallel: u64,
    /// Finals of pairs run sequentially as configured.
    pub sequential: u64,
    /// Finals of pairs run sequentially because the heavy pool was loaded.
    pub sequential_under_load: u64,
    /// Finals of streams answered by one target (no draft).
    pub single: u64,
}

impl StreamCounters {
    /// Adds one to `which`.
    pub fn bump(&self, which: StreamCount) {
        let counter = match which {
            StreamCount::Started => &self.started,
            StreamCount::Draft => &self.drafts,
            StreamCount::Final => &self.finals,
            StreamCount::FinalFromDraft => &self.finals_from_draft,
            StreamCount::FinalCached => &self.finals_cached,
            StreamCount::Error => &self.errors,
            StreamCount::ClientGone => &self.client_gone,
            StreamCount::Parallel => &self.parallel,
            StreamCount::Sequential => &self.sequential,
            StreamCount::SequentialUnderLoad => &self.sequential_under_load,
            StreamCount::Single => &self.single,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The current values.
    pub fn snapshot(&self) -> StreamSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StreamSnapshot {
            started: get(&self.started),
            drafts: get(&self.drafts),
            finals: get(&self.finals),
            finals_from_draft: get(&self.finals_from_draft),
            finals_cached: get(&self.finals_cached),
            errors: get(&self.errors),
            client_gone: get(&self.client_gone),
            parallel: get(&self.parallel),
            sequential: get(&self.sequential),
            sequential_under_load: get(&self.sequential_under_load),
            single: get(&self.single),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bumps_reach_the_snapshot() {
        let c = StreamCounters::default();
        c.bump(StreamCount::Draft);
        c.bump(StreamCount::Draft);
        c.bump(StreamCount::ClientGone);
        let s = c.snapshot();
        assert_eq!((s.drafts, s.client_gone, s.finals), (2, 1, 0));
    }
}
