//! A small discrete-event simulation: one model with a fast GPU pool and a
//! slower CPU pool, requests arriving faster than the GPU alone can serve.
//! Each decision sees the queues left by the previous ones, and the pools
//! execute batches as the runtime's batcher would (FIFO, greedy batches, no
//! queue delay). It checks that the estimator is conservative against that
//! execution and that spill-over keeps completions inside the budget.

use crate::test_util::*;
use crate::{Budget, Draw, FixedPolicy, LatencyBudgetPolicy, PolicyConfig, Reason};
use std::collections::VecDeque;

const BUDGET_MS: u64 = 30;
const DURATION_MS: u64 = 600;

struct SimPool {
    name: &'static str,
    batch_ms: u64,
    max_batch: usize,
    /// Per worker: the running batch's end time and request ids.
    workers: Vec<Option<(u64, Vec<usize>)>>,
    queue: VecDeque<usize>,
}

impl SimPool {
    fn new(name: &'static str, batch_ms: u64, max_batch: usize, workers: usize) -> Self {
        SimPool { name, batch_ms, max_batch, workers: vec![None; workers], queue: VecDeque::new() }
    }

    fn in_flight(&self) -> usize {
        self.workers.iter().flatten().map(|(_, ids)| ids.len()).sum()
    }

    fn finish(&mut self, now: u64, done: &mut [Option<u64>]) {
        for slot in &mut self.workers {
            if slot.as_ref().is_some_and(|(end, _)| *end <= now) {
                let (end, ids) = slot.take().unwrap();
                ids.into_iter().for_each(|id| done[id] = Some(end));
            }
        }
    }

    fn start(&mut self, now: u64) {
        for slot in self.workers.iter_mut().filter(|s| s.is_none()) {
            let take = self.queue.len().min(self.max_batch);
            if take == 0 {
                return;
            }
            *slot = Some((now + self.batch_ms, self.queue.drain(..take).collect()));
        }
    }
}

struct Outcome {
    served: usize,
    shed: usize,
    spilled: usize,
    per_pool: [usize; 2],
    over_budget: usize,
    max_latency: u64,
}

/// Runs arrivals of 1, 1, 2 requests per millisecond (1.33/ms; the GPU
/// alone serves 1/ms, GPU and CPU together 1.4/ms) through `policy`.
fn simulate(policy: &PolicyConfig, cpu_available: bool) -> Outcome {
    let mut pools = [SimPool::new("gpu", 4, 4, 1), SimPool::new("cpu", 10, 1, 4)];
    let mut arrivals: Vec<(u64, u64)> = Vec::new(); // (arrival, predicted completion) per request
    let mut done: Vec<Option<u64>> = Vec::new();
    let mut outcome =
        Outcome { served: 0, shed: 0, spilled: 0, per_pool: [0, 0], over_budget: 0, max_latency: 0 };
    for now in 0..DURATION_MS {
        for pool in &mut pools {
            pool.finish(now, &mut done);
            pool.start(now);
        }
        for _ in 0..[1, 1, 2][(now % 3) as usize] {
            let mut view = fleet(vec![model("m", 1, 1.0, vec![gpu(4), cpu(10)])]);
            for (sim, pool) in pools.iter().zip(&mut view.candidates[0].pools) {
                pool.max_batch_size = sim.max_batch;
                pool.workers = sim.workers.len();
                pool.queue_depth = sim.queue.len();
                pool.in_flight = sim.in_flight();
                pool.queue_capacity = None;
            }
            view.candidates[0].pools[1].available = cpu_available;
            let plan = policy.decide(Budget::new(ms(BUDGET_MS)), &view, &estimator(), Draw::new(0.0));
            let Some(placement) = plan.primary() else {
                outcome.shed += 1;
                continue;
            };
            if matches!(plan.reason(), Reason::BudgetFit | Reason::SpillOver) {
                assert!(placement.predicted <= ms(BUDGET_MS), "{plan:?}");
            }
            outcome.spilled += usize::from(plan.reason() == Reason::SpillOver);
            let index = pools.iter().position(|p| *p.name == *placement.pool).unwrap();
            outcome.per_pool[index] += 1;
            let id = done.len();
            done.push(None);
            arrivals.push((now, placement.predicted.as_millis() as u64));
            pools[index].queue.push_back(id);
            pools[index].start(now);
        }
    }
    for (id, (arrival, predicted)) in arrivals.iter().enumerate() {
        let Some(end) = done[id] else { continue }; // still running at the end
        let actual = end - arrival;
        assert!(actual <= *predicted, "request {id}: took {actual} ms, predicted {predicted} ms");
        outcome.served += 1;
        outcome.over_budget += usize::from(actual > BUDGET_MS);
        outcome.max_latency = outcome.max_latency.max(actual);
    }
    outcome
}

#[test]
fn spill_over_keeps_completions_inside_the_budget() {
    for policy in [
        PolicyConfig::LatencyBudget(LatencyBudgetPolicy::default()),
        PolicyConfig::Fixed(FixedPolicy { model: "m".into() }),
    ] {
        let outcome = simulate(&policy, true);
        assert!(outcome.served > 700, "{}", outcome.served);
        assert_eq!(outcome.over_budget, 0, "{}", policy.kind());
        assert!(outcome.max_latency <= BUDGET_MS);
        assert!(outcome.spilled > 50, "{}", outcome.spilled);
        assert!(outcome.per_pool[0] > outcome.per_pool[1], "{:?}", outcome.per_pool);
        assert!(outcome.shed < 20, "{}", outcome.shed);
    }
}

#[test]
fn without_the_cpu_pool_the_gpu_queue_misses_or_sheds() {
    // Fixed never sheds: the GPU queue grows and completions miss the budget.
    let fixed = simulate(&PolicyConfig::Fixed(FixedPolicy { model: "m".into() }), false);
    assert!(fixed.over_budget > 100, "{}", fixed.over_budget);
    assert!(fixed.max_latency > 3 * BUDGET_MS, "{}", fixed.max_latency);
    // Latency budget sheds the excess instead; what it serves is at worst
    // inside the shed margin (150% of the budget).
    let budgeted = simulate(&PolicyConfig::LatencyBudget(LatencyBudgetPolicy::default()), false);
    assert!(budgeted.shed > 100, "{}", budgeted.shed);
    assert!(budgeted.max_latency <= BUDGET_MS * 3 / 2, "{}", budgeted.max_latency);
}
