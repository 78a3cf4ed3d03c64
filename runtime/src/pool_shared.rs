//! The parts of a pool that outlive its sessions ([`PoolShared`]): made
//! when the model registers, kept across unloads and reloads, read by the
//! queue's collectors, the workers, dispatch and statistics.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::device::DeviceKind;
use crate::histogram::PoolHistograms;
use crate::pause::PauseGate;
use crate::rank::ClassCounts;
use crate::spec::{BatchingSpec, PoolSpec};
use crate::stats::{get, LatencyTable, PoolCounters, PoolStats};

/// The parts of a pool that outlive its sessions (kept across unloads):
/// spec, counters, latency estimates, pause gate, availability.
#[derive(Debug)]
pub struct PoolShared {
    /// The pool's spec.
    pub spec: PoolSpec,
    /// `spec.name`, shared with every statistics snapshot (see
    /// [`crate::Model::name`]).
    pub name: Arc<str>,
    /// Counters.
    pub counters: PoolCounters,
    /// Latency by batch size.
    pub latency: LatencyTable,
    /// Distributions of batch size, execution time and queue wait.
    pub histograms: PoolHistograms,
    /// Pause hook.
    pub gate: PauseGate,
    /// How many requests of each priority class wait in the queue (the
    /// queue keeps it; statistics read the lowest class queued).
    pub queued_classes: Arc<ClassCounts>,
    /// Why the pool cannot serve, as of its last load; `None` = available.
    pub unavailable: Mutex<Option<String>>,
    /// Moving average of [`crate::queue::QueueEntry::ahead`] over the
    /// pool's arrivals (an `f64`'s bits): how many requests usually share
    /// the pool with a new one. The collectors read it for
    /// `idle_dispatch`, callers for running inline (`crate::inline`).
    company: AtomicU64,
    /// Requests run inline since the last one that was queued (see
    /// `crate::inline`'s probe).
    pub inline_streak: AtomicU32,
}

impl PoolShared {
    /// Fresh state for a pool.
    pub fn new(spec: PoolSpec) -> Self {
        PoolShared {
            name: spec.name.as_str().into(),
            spec,
            counters: PoolCounters::default(),
            latency: LatencyTable::default(),
            histograms: PoolHistograms::default(),
            gate: PauseGate::default(),
            queued_classes: Arc::default(),
            unavailable: Mutex::new(None),
            company: AtomicU64::new(0f64.to_bits()),
            inline_streak: AtomicU32::new(0),
        }
    }

    /// How many requests usually share the pool with a new one: a moving
    /// average over about the last sixteen arrivals of how many requests
    /// were queued or executing when each arrived.
    pub fn company(&self) -> f64 {
        f64::from_bits(self.company.load(Ordering::Relaxed))
    }

    /// Takes note of an arrival that found `ahead` requests queued or
    /// executing. Concurrent updates may lose one another's sample; the
    /// average is a hint, not a count.
    pub fn observe_arrival(&self, ahead: usize) {
        let company = self.company();
        let next = company + (ahead as f64 - company) * COMPANY_WEIGHT;
        self.company.store(next.to_bits(), Ordering::Relaxed);
    }

    /// Whether a request for this pool may be queued without waking a
    /// worker, its caller then running the batch ([`crate::caller_batch`],
    /// step 1): the pool runs on the CPU, is not paused, `inline_max` is
    /// not zero, `idle_dispatch` is on (with it off the operator asked
    /// every batch to wait for company, which only a worker does) and the
    /// latency table predicts a one-row batch within `inline_max` (no
    /// prediction before the pool's first batch). A worker of such a pool
    /// never waits for company ([`crate::queue`]).
    pub fn callers_run_batches(&self, batching: &BatchingSpec) -> bool {
        self.spec.device == DeviceKind::Cpu
            && !batching.inline_max.is_zero()
            && batching.idle_dispatch
            && !self.gate.is_paused()
            && self.latency.predict_exec(1).is_some_and(|t| t <= batching.inline_max)
    }

    /// A snapshot of the pool's statistics.
    pub fn stats(&self, batching: &BatchingSpec) -> PoolStats {
        PoolStats { histograms: self.histograms.snapshot(), ..self.load(batching) }
    }

    /// The pool's statistics without its distributions (`histograms` left
    /// empty): what a routing decision reads on every request, without the
    /// allocations of copying the histograms, which only metrics read.
    pub fn load(&self, batching: &BatchingSpec) -> PoolStats {
        let c = &self.counters;
        let unavailable = self.unavailable.lock().clone();
        PoolStats {
            name: Arc::clone(&self.name),
            device: self.spec.device,
            available: unavailable.is_none(),
            unavailable_reason: unavailable,
            paused: self.gate.is_paused(),
            workers: self.spec.workers,
            queue_depth: c.queue_depth.load(Ordering::Relaxed),
            queue_capacity: batching.queue_capacity,
            lowest_queued_class: self.queued_classes.lowest(),
            max_batch_size: batching.max_batch_size.max(1),
            in_flight: c.in_flight.load(Ordering::Relaxed),
            requests: get(&c.requests),
            executions: get(&c.executions),
            executed_rows: get(&c.executed_rows),
            cancelled: get(&c.cancelled),
            rejected: get(&c.rejected),
            errors: get(&c.errors),
            inline_runs: get(&c.inline_runs),
            caller_batches: get(&c.caller_batches),
            preemptions: get(&c.preemptions),
            reserved_batches: get(&c.reserved_batches),
            isolated_batches: get(&c.isolated_batches),
            latency: self.latency.snapshot(batching.max_batch_size),
            histograms: Default::default(),
        }
    }
}

/// Weight of the newest arrival in [`PoolShared::company`]: about the last
/// sixteen arrivals count.
const COMPANY_WEIGHT: f64 = 1.0 / 16.0;
