//! Running a request on the caller's thread when its pool is idle.
//!
//! Why: handing a request to a worker thread and back (queue it, wake the
//! worker, wake the caller with the answer) costs several microseconds and
//! two thread switches; for a model that runs in a few microseconds that is
//! more than the model. When nothing would batch with the request anyway,
//! the caller runs it on the worker's session itself.
//!
//! A request runs inline when all of these hold; else it is queued as
//! usual:
//! 1. its pool is known without a routing choice (a named pool, or the
//!    model's only pool), runs on the CPU and is not paused;
//! 2. `inline_max` (a batching setting) is not zero, `idle_dispatch` is on
//!    (with it off the operator asked every batch to wait for company) and
//!    the pool's latency table predicts the request's batch runs within
//!    `inline_max` (no prediction before the pool's first batch: that one
//!    is queued);
//! 3. the pool is idle (nothing queued, nothing executing) and calm: the
//!    requests that arrived lately found it nearly empty (its `company`
//!    average below one half), so a batch is not worth waiting for;
//! 4. one of its workers' sessions is free (`try_lock`);
//! 5. it is not the probe: after 255 inline runs in a row the next request
//!    is queued. A caller busy running requests inline does not read new
//!    ones meanwhile, so on a one-thread server a rising load would only
//!    show as arrivals into an empty pool; a queued request lets the
//!    thread read on, the arrivals behind it find it queued, the average
//!    rises and batching takes over. The interval weighs how soon rising
//!    load is seen (within 256 runs of at most `inline_max` each: about
//!    2.5 ms for a 10 µs model, 13 ms at the 50 µs default limit) against
//!    what the probe costs a lone caller (one worker round trip, ~4 runs'
//!    worth, per interval: ~1.5% of its throughput; every 64th request
//!    cost ~5%, every 16th ~10%; benchmarks/NOTES.md).
//!
//! An inline run is recorded like a worker's batch of one (requests,
//! executions, latency, histograms) and counted in `inline_runs`.

use std::sync::atomic::Ordering;

use crate::device::DeviceKind;
use crate::error::RuntimeError;
use crate::model::{LoadedModel, Model};
use crate::pool::PoolRuntime;
use crate::pool_shared::PoolShared;
use crate::request::InferenceResponse;
use crate::spec::BatchingSpec;
use crate::stats::add;
use crate::validate::Validated;
use crate::worker::run_alone;

/// Inline runs in a row after which one request is queued (step 5).
const PROBE_EVERY: u32 = 256;

/// The outcome of [`try_run`].
pub enum Inline {
    /// The request ran on the caller's thread; its answer.
    Ran(Result<InferenceResponse, RuntimeError>),
    /// It must be queued (handed back unchanged).
    Queue(Validated),
}

/// Runs `v` on the caller's thread when the module docs' conditions hold.
pub fn try_run(m: &Model, loaded: &LoadedModel, pool: Option<usize>, v: Validated) -> Inline {
    let index = match pool {
        Some(i) => i,
        None if loaded.pools.len() == 1 => 0,
        None => return Inline::Queue(v),
    };
    let (Some(Some(runtime)), Some(shared)) = (loaded.pools.get(index), m.pools.get(index)) else {
        return Inline::Queue(v);
    };
    if !worth_running_inline(shared, m.spec.pool_batching(&shared.spec), v.rows) {
        return Inline::Queue(v);
    }
    if shared.inline_streak.fetch_add(1, Ordering::Relaxed) + 1 >= PROBE_EVERY {
        shared.inline_streak.store(0, Ordering::Relaxed);
        return Inline::Queue(v);
    }
    run_on_free_session(runtime, shared, v)
}

/// Steps 1-3 of the module docs for a request of `rows` rows.
pub fn worth_running_inline(shared: &PoolShared, batching: &BatchingSpec, rows: usize) -> bool {
    let counters = &shared.counters;
    shared.spec.device == DeviceKind::Cpu
        && !batching.inline_max.is_zero()
        && batching.idle_dispatch
        && counters.queue_depth.load(Ordering::Relaxed) == 0
        && counters.in_flight.load(Ordering::Relaxed) == 0
        && shared.company() < 0.5
        && !shared.gate.is_paused()
        && shared.latency.predict_exec(rows).is_some_and(|t| t <= batching.inline_max)
}

/// Step 4, and the run itself: a batch of one on the first free session.
fn run_on_free_session(runtime: &PoolRuntime, shared: &PoolShared, v: Validated) -> Inline {
    let Some(session) = runtime.sessions.iter().find_map(|s| s.try_lock()) else {
        return Inline::Queue(v);
    };
    shared.observe_arrival(0);
    shared.counters.in_flight.fetch_add(1, Ordering::Relaxed);
    add(&shared.counters.requests, 1);
    add(&shared.counters.inline_runs, 1);
    Inline::Ran(run_alone(session, &runtime.ctx, v))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::spec::PoolSpec;

    fn pool(device: DeviceKind) -> PoolShared {
        PoolShared::new(PoolSpec {
            name: "p".into(),
            device,
            workers: 1,
            intra_op_threads: 1,
            batching: None,
        })
    }

    /// A CPU pool whose one-row batches took 5 µs.
    fn sampled_cpu_pool() -> PoolShared {
        let shared = pool(DeviceKind::Cpu);
        shared.latency.record(1, Duration::from_micros(5));
        shared
    }

    #[test]
    fn an_idle_calm_cpu_pool_of_a_microsecond_model_runs_inline() {
        let batching = BatchingSpec::default();
        assert!(worth_running_inline(&sampled_cpu_pool(), &batching, 1));
        assert!(!worth_running_inline(&sampled_cpu_pool(), &batching, 64), "64 rows predicted at 320 µs");
    }

    #[test]
    fn each_condition_on_its_own_sends_the_request_to_the_queue() {
        let batching = BatchingSpec::default();
        type Change = Box<dyn Fn(&PoolShared, &mut BatchingSpec)>;
        let cases: Vec<(&str, Change)> = vec![
            ("inline_max 0", Box::new(|_, b| b.inline_max = Duration::ZERO)),
            ("idle_dispatch off", Box::new(|_, b| b.idle_dispatch = false)),
            ("predicted beyond inline_max", Box::new(|_, b| b.inline_max = Duration::from_micros(4))),
            (
                "a request queued",
                Box::new(|s, _| {
                    s.counters.queue_depth.fetch_add(1, Ordering::Relaxed);
                }),
            ),
            (
                "a batch executing",
                Box::new(|s, _| {
                    s.counters.in_flight.fetch_add(1, Ordering::Relaxed);
                }),
            ),
            ("arrivals found company", Box::new(|s, _| (0..8).for_each(|_| s.observe_arrival(4)))),
            ("paused", Box::new(|s, _| s.gate.set(true))),
        ];
        for (what, change) in cases {
            let (shared, mut changed) = (sampled_cpu_pool(), batching.clone());
            change(&shared, &mut changed);
            assert!(!worth_running_inline(&shared, &changed, 1), "{what}");
        }
        assert!(!worth_running_inline(&pool(DeviceKind::Cpu), &batching, 1), "no batch has run yet");
        let gpu = pool(DeviceKind::Cuda);
        gpu.latency.record(1, Duration::from_micros(5));
        assert!(!worth_running_inline(&gpu, &batching, 1), "not a CPU pool");
    }

    #[test]
    fn the_average_falls_back_below_one_half_once_arrivals_find_the_pool_empty() {
        let shared = sampled_cpu_pool();
        (0..8).for_each(|_| shared.observe_arrival(4));
        assert!(!worth_running_inline(&shared, &BatchingSpec::default(), 1));
        (0..64).for_each(|_| shared.observe_arrival(0));
        assert!(worth_running_inline(&shared, &BatchingSpec::default(), 1), "{}", shared.company());
    }
}
