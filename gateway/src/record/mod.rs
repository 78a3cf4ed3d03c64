//! The traffic sample: a route with `record = { sample, path, ... }`
//! ([`crate::config::record_section`]) writes a share of its inference
//! calls to a file of JSON lines, for operators to replay a candidate
//! config against real traffic before applying it.
//!
//! Each line ([`line`]) holds what a replay needs and what it compares
//! with: the route, the arrival time, the protocol, the request `id`, the
//! tenant (hashed, never the key), the inputs (datatype, shape and data,
//! base64 of Triton's binary layout), the requested outputs and request
//! parameters, the budget, then how it was answered: the model, version,
//! pool, device and reason, the batch size, whether the answer was
//! degraded, the cache outcome, the cheap model's confidence when a
//! cascade judged one, the latency from arrival to answer; or the error
//! (status and label).
//!
//! Recording never delays a request: the request only clones its inputs
//! (reference-counted buffers, no copy) when it is sampled and hands the
//! record to a bounded queue; one writer thread per file encodes and
//! writes. The queue is bounded by count (1,024 records per file) and by
//! the bytes its records hold ([`held::QUEUE_BYTES`], all files
//! together; a queued record holds a copy of its inputs, not the request
//! body they came in); a record past either bound is dropped and counted
//! (`switchyard_record_dropped_total`).
//!
//! A line is never larger than the route's `max_line_bytes` (at most
//! `max_bytes`): a record whose inputs alone would pass it is dropped
//! before it is queued, and one whose encoded line passes it is not
//! written; both are counted (`oversized`,
//! `switchyard_record_oversized_total`). So the file rotated at
//! `max_bytes` (`path.1`, `path.2`, ... up to `files`) is never larger than
//! `max_bytes`, and the sample never takes more than `max_bytes * files`
//! of disk.
//!
//! Privacy: a recorded line holds the request's inputs as sent. Recording
//! is off unless a route asks for it; keep the files where only operators
//! can read them, and sample only what you may store.
//!
//! What is not recorded yet: streamed calls (SSE, `ModelStreamInfer`).
//! Exact repeats answered from the REST exact-repeat cache are recorded as the
//! cache hits they are: a sampled request skips that fast path.

pub mod held;
pub mod line;
pub mod writer;

use crate::config::record_section::RecordConfig;
use held::QueueBytes;
use parking_lot::Mutex;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use writer::{FileWriter, Submitted};

pub use line::TrafficRecord;

/// Counters of one route's sample.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RecordStats {
    /// Lines written.
    pub written: u64,
    /// Records dropped because the writer was behind (its queue full by
    /// count or by bytes).
    pub dropped: u64,
    /// Records not written because their line would pass the route's
    /// `max_line_bytes`.
    pub oversized: u64,
    /// Records lost to a write error (disk full, permissions).
    pub failed: u64,
    /// Rotations of the file.
    pub rotations: u64,
}

/// Every route's sample: the writers (one per file) and the counters.
#[derive(Default)]
pub struct Recorders {
    writers: Mutex<HashMap<PathBuf, FileWriter>>,
    stats: Arc<Mutex<HashMap<String, RecordStats>>>,
    queued: QueueBytes,
}

impl Recorders {
    /// Whether this request is sampled under `record` (a uniform draw).
    pub fn draw(&self, record: Option<&RecordConfig>) -> bool {
        record.is_some_and(|r| crate::random_draws::next_draw().value() < r.sample)
    }

    /// Queues `record` for its route's file; never blocks. A record whose
    /// line would pass `max_line_bytes` is dropped as oversized, one that
    /// does not fit the queue (by count or bytes) as dropped.
    pub fn submit(&self, config: &RecordConfig, record: TrafficRecord) {
        let route = record.route.clone();
        let line_floor = u64::try_from(record.line_floor()).unwrap_or(u64::MAX);
        let submitted = if line_floor > config.max_line_bytes.min(config.max_bytes) {
            None
        } else {
            match self.queued.take(record.held_bytes()) {
                Some(held) => {
                    // Copied only once it is sure to be queued.
                    let record = record.detach();
                    let mut writers = self.writers.lock();
                    let writer = writers
                        .entry(config.path.clone())
                        .or_insert_with(|| FileWriter::start(config.path.clone(), self.stats.clone()));
                    Some(writer.submit(config, record, held))
                }
                None => Some(Submitted::Dropped),
            }
        };
        match submitted {
            Some(Submitted::Queued) => {}
            Some(Submitted::Dropped) => self.stats.lock().entry(route).or_default().dropped += 1,
            None => self.stats.lock().entry(route).or_default().oversized += 1,
        }
    }

    /// Bytes the queued records hold now (all files).
    pub fn queued_bytes(&self) -> usize {
        self.queued.held()
    }

    /// Counters by route, for `/admin/stats` and `/metrics`.
    pub fn stats(&self) -> Vec<(String, RecordStats)> {
        let mut all: Vec<_> = self.stats.lock().iter().map(|(k, v)| (k.clone(), *v)).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::line::Ending;
    use super::*;
    use bytes::Bytes;
    use switchyard_runtime::tensor::{DataType, TensorData};
    use switchyard_runtime::Tensor;

    fn record(bytes: usize) -> TrafficRecord {
        let x =
            Tensor::new(DataType::U8, vec![bytes], TensorData::Fixed(Bytes::from(vec![1u8; bytes]))).unwrap();
        TrafficRecord {
            route: "r".into(),
            arrived_ms: 1,
            protocol: "rest",
            id: None,
            tenant: None,
            inputs: vec![("x".into(), x)],
            outputs: Vec::new(),
            parameters: serde_json::Map::new(),
            budget_ms: 1,
            latency_us: 1,
            ending: Ending::Failed { status: 400, label: "bad_request" },
        }
    }

    #[test]
    fn a_record_over_its_line_or_the_queue_bytes_is_counted_not_queued() {
        let dir = tempfile::tempdir().unwrap();
        let config = RecordConfig {
            sample: 1.0,
            path: dir.path().join("t.jsonl"),
            max_bytes: 1 << 20,
            files: 1,
            max_line_bytes: 4 << 10,
        };
        let recorders = Recorders { queued: QueueBytes::new(2 << 10), ..Recorders::default() };
        // 3 KiB of data is 4 KiB of base64: over the line.
        recorders.submit(&config, record(3 << 10));
        // 2.5 KiB fits a line but not the 2 KiB the queue may hold.
        recorders.submit(&config, record(5 << 9));
        let stats = recorders.stats();
        assert_eq!(
            stats,
            [("r".to_string(), RecordStats { oversized: 1, dropped: 1, ..RecordStats::default() })]
        );
        assert_eq!(recorders.queued_bytes(), 0);
        assert!(!config.path.exists(), "nothing was queued, so no writer started");
    }
}
