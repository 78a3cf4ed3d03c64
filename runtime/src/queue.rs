//! A pool's request queue and the batch collector its workers run.
//!
//! The queue is a bounded crossbeam channel shared by the pool's workers.
//! A worker blocks for a first entry, then gathers more until the batch
//! holds `max_batch_size` rows or `max_queue_delay` has passed since the
//! first entry was queued; with `idle_dispatch`, it stops gathering as soon
//! as the queue is empty and no other worker of the pool is executing (an
//! idle pool has nobody to wait for: the wait would only add latency).
//! Entries whose caller has gone away (the oneshot receiver was dropped)
//! are counted as cancelled and never executed.
//! Entries whose non-batch dimensions differ from the batch's are set aside
//! for a later batch rather than failed; an entry is never split.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

use crate::error::RuntimeError;
use crate::histogram::PoolHistograms;
use crate::request::InferenceResponse;
use crate::spec::{BatchingSpec, PoolSpec};
use crate::stats::{add, get, LatencyTable, PoolCounters, PoolStats};
use crate::tensor::Tensor;

/// One queued request, validated against the model's signature.
#[derive(Debug)]
pub struct QueueEntry {
    /// Inputs in graph order.
    pub inputs: Vec<Tensor>,
    /// Rows along the batch dimension.
    pub rows: usize,
    /// Indices of the outputs to return.
    pub outputs: Vec<usize>,
    /// Non-batch dimensions; only equal groups share a batch.
    pub group: Vec<Vec<usize>>,
    /// When it was queued.
    pub enqueued: Instant,
    /// Where the result goes; closed when the caller gave up.
    pub reply: oneshot::Sender<Result<InferenceResponse, RuntimeError>>,
}

/// Holds a pool's workers between batches while closed; a test and
/// maintenance hook (see [`crate::ModelRepository::set_paused`]). Workers
/// block on it; callers waiting for a queued request watch it
/// asynchronously ([`Self::watch`]), so a request can give up at its
/// deadline while the pool is paused.
#[derive(Debug)]
pub struct PauseGate {
    paused: Mutex<bool>,
    changed: Condvar,
    watch: tokio::sync::watch::Sender<bool>,
}

impl Default for PauseGate {
    fn default() -> Self {
        PauseGate {
            paused: Mutex::new(false),
            changed: Condvar::new(),
            watch: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl PauseGate {
    /// Closes (`true`) or opens the gate.
    pub fn set(&self, paused: bool) {
        *self.paused.lock() = paused;
        self.changed.notify_all();
        self.watch.send_replace(paused);
    }

    /// True while the gate is closed.
    pub fn is_paused(&self) -> bool {
        *self.paused.lock()
    }

    /// A receiver that sees every change of the gate.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<bool> {
        self.watch.subscribe()
    }

    /// Blocks while the gate is closed.
    pub fn wait_open(&self) {
        let mut paused = self.paused.lock();
        while *paused {
            self.changed.wait(&mut paused);
        }
    }
}

/// The parts of a pool that outlive its sessions (kept across unloads):
/// spec, counters, latency estimates, pause gate, availability.
#[derive(Debug)]
pub struct PoolShared {
    /// The pool's spec.
    pub spec: PoolSpec,
    /// Counters.
    pub counters: PoolCounters,
    /// Latency by batch size.
    pub latency: LatencyTable,
    /// Distributions of batch size, execution time and queue wait.
    pub histograms: PoolHistograms,
    /// Pause hook.
    pub gate: PauseGate,
    /// Why the pool cannot serve, as of its last load; `None` = available.
    pub unavailable: Mutex<Option<String>>,
}

impl PoolShared {
    /// Fresh state for a pool.
    pub fn new(spec: PoolSpec) -> Self {
        PoolShared {
            spec,
            counters: PoolCounters::default(),
            latency: LatencyTable::default(),
            histograms: PoolHistograms::default(),
            gate: PauseGate::default(),
            unavailable: Mutex::new(None),
        }
    }

    /// A snapshot of the pool's statistics.
    pub fn stats(&self, batching: &BatchingSpec) -> PoolStats {
        let c = &self.counters;
        let unavailable = self.unavailable.lock().clone();
        PoolStats {
            name: self.spec.name.clone(),
            device: self.spec.device,
            available: unavailable.is_none(),
            unavailable_reason: unavailable,
            paused: self.gate.is_paused(),
            workers: self.spec.workers,
            queue_depth: c.queue_depth.load(Ordering::Relaxed),
            queue_capacity: batching.queue_capacity,
            max_batch_size: batching.max_batch_size.max(1),
            in_flight: c.in_flight.load(Ordering::Relaxed),
            requests: get(&c.requests),
            executions: get(&c.executions),
            executed_rows: get(&c.executed_rows),
            cancelled: get(&c.cancelled),
            rejected: get(&c.rejected),
            errors: get(&c.errors),
            latency: self.latency.snapshot(batching.max_batch_size),
            histograms: self.histograms.snapshot(),
        }
    }

    /// If the entry's caller is gone, counts it as cancelled, takes it off
    /// the queue depth and returns true.
    pub fn drop_if_cancelled(&self, entry: &QueueEntry) -> bool {
        if entry.reply.is_closed() {
            add(&self.counters.cancelled, 1);
            self.counters.queue_depth.fetch_sub(1, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

/// A worker's view of the queue: gathers the next batch.
pub struct Collector {
    rx: Receiver<QueueEntry>,
    pending: VecDeque<QueueEntry>,
    shared: Arc<PoolShared>,
    max_rows: usize,
    delay: Duration,
    idle_dispatch: bool,
}

impl Collector {
    /// A collector for one worker; `max_rows <= 1` means every entry runs
    /// alone. Takes the delay and `idle_dispatch` from `batching`.
    pub fn new(
        rx: Receiver<QueueEntry>,
        shared: Arc<PoolShared>,
        max_rows: usize,
        batching: &BatchingSpec,
    ) -> Self {
        Collector {
            rx,
            pending: VecDeque::new(),
            shared,
            max_rows,
            delay: batching.max_queue_delay,
            idle_dispatch: batching.idle_dispatch,
        }
    }

    /// The next entry for the batch being gathered: one already queued,
    /// else (unless the pool is idle and `idle_dispatch` is on) the first
    /// to arrive before `deadline`.
    fn next_arrival(&self, deadline: Instant) -> Option<QueueEntry> {
        if !self.idle_dispatch {
            return self.rx.recv_deadline(deadline).ok();
        }
        if let Ok(entry) = self.rx.try_recv() {
            return Some(entry);
        }
        if self.shared.counters.in_flight.load(Ordering::Relaxed) == 0 {
            return None; // the pool is idle: nobody is there to join the batch
        }
        self.rx.recv_deadline(deadline).ok()
    }

    /// Blocks until a batch is ready; `None` once the queue is closed (the
    /// model was unloaded) and drained.
    pub fn next_batch(&mut self) -> Option<Vec<QueueEntry>> {
        loop {
            let first = match self.pending.pop_front() {
                Some(entry) => entry,
                None => self.rx.recv().ok()?,
            };
            self.shared.gate.wait_open();
            if self.shared.drop_if_cancelled(&first) {
                continue;
            }
            let mut batch = vec![first];
            if self.max_rows > 1 {
                self.fill(&mut batch);
            }
            let shared = &self.shared;
            batch.retain(|e| !shared.drop_if_cancelled(e));
            if !batch.is_empty() {
                return Some(batch);
            }
        }
    }

    fn fill(&mut self, batch: &mut Vec<QueueEntry>) {
        let group = batch[0].group.clone();
        let deadline = batch[0].enqueued + self.delay;
        let mut rows = batch[0].rows;
        let mut i = 0;
        while i < self.pending.len() && rows < self.max_rows {
            let fits = self.pending[i].group == group && rows + self.pending[i].rows <= self.max_rows;
            match self.pending.remove(i) {
                Some(entry) if fits => {
                    if !self.shared.drop_if_cancelled(&entry) {
                        rows += entry.rows;
                        batch.push(entry);
                    }
                }
                Some(entry) => {
                    self.pending.insert(i, entry);
                    i += 1;
                }
                None => break,
            }
        }
        while rows < self.max_rows {
            let Some(entry) = self.next_arrival(deadline) else { break };
            if self.shared.drop_if_cancelled(&entry) {
                continue;
            }
            let same_group = entry.group == group;
            if same_group && rows + entry.rows <= self.max_rows {
                rows += entry.rows;
                batch.push(entry);
            } else {
                self.pending.push_back(entry);
                if same_group {
                    break;
                }
            }
        }
    }
}
