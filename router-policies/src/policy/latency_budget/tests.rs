use crate::test_util::*;
use crate::{
    Budget, EstimateBasis, LatencyBudgetPolicy, LatencyModel, Plan, Reason, MAX_RETRY_AFTER, MIN_RETRY_AFTER,
};
use std::time::Duration;

fn policy() -> LatencyBudgetPolicy {
    LatencyBudgetPolicy::default()
}

fn chosen(plan: &Plan) -> String {
    let placement = plan.primary().expect("a placement");
    format!("{}/{}", placement.model, placement.pool)
}

#[test]
fn picks_the_most_accurate_model_that_fits() {
    let plan = policy().decide(budget_ms(50), &two_models(), &estimator());
    assert_eq!((chosen(&plan), plan.reason()), ("heavy/gpu".into(), Reason::BudgetFit));
    assert_eq!(names(plan.fallbacks()), ["heavy/cpu", "cheap/gpu", "cheap/cpu"]);
}

#[test]
fn a_tight_budget_drops_to_the_cheap_model() {
    let plan = policy().decide(budget_ms(8), &two_models(), &estimator());
    assert_eq!((chosen(&plan), plan.reason()), ("cheap/gpu".into(), Reason::BudgetFit));
    assert_eq!(names(plan.fallbacks()), ["cheap/cpu", "heavy/gpu", "heavy/cpu"]);
}

#[test]
fn saturated_gpu_spills_the_heavy_model_to_cpu() {
    let mut f = two_models();
    pool_mut(&mut f, "heavy", "gpu").queue_depth = 24; // 3 rounds * 10 ms + 10 ms = 40 ms
    pool_mut(&mut f, "heavy", "gpu").in_flight = 8;
    let plan = policy().decide(budget_ms(45), &f, &estimator());
    assert_eq!((chosen(&plan), plan.reason()), ("heavy/cpu".into(), Reason::SpillOver));
    assert_eq!(plan.primary().unwrap().predicted, ms(40));
}

#[test]
fn nothing_fits_runs_the_fastest_within_the_shed_margin() {
    let budget = Budget::new(Duration::from_micros(1500)); // allowed 2.25 ms
    let plan = policy().decide(budget, &two_models(), &estimator());
    assert_eq!((chosen(&plan), plan.reason()), ("cheap/gpu".into(), Reason::BudgetFastest));
    assert_eq!(names(plan.fallbacks()), ["cheap/cpu", "heavy/gpu", "heavy/cpu"]);
}

#[test]
fn sheds_when_the_fastest_misses_by_more_than_the_margin() {
    let plan = policy().decide(budget_ms(1), &two_models(), &estimator());
    assert_eq!(plan, Plan::Shed { retry_after: MIN_RETRY_AFTER, reason: Reason::Shed });
    let lenient = LatencyBudgetPolicy { shed_margin: 1.0 };
    assert_eq!(lenient.decide(budget_ms(1), &two_models(), &estimator()).reason(), Reason::BudgetFastest);
    let never = LatencyBudgetPolicy { shed_margin: f64::INFINITY };
    assert_eq!(never.decide(budget_ms(1), &two_models(), &estimator()).reason(), Reason::BudgetFastest);
}

#[test]
fn retry_after_is_the_backlog_drain_time() {
    let mut f = fleet(vec![model("only", 1, 1.0, vec![gpu(2)])]);
    pool_mut(&mut f, "only", "gpu").queue_capacity = None;
    pool_mut(&mut f, "only", "gpu").queue_depth = 8 * 1500; // 1500 rounds * 2 ms
    let plan = policy().decide(budget_ms(20), &f, &estimator());
    assert_eq!(plan, Plan::Shed { retry_after: Duration::from_secs(3), reason: Reason::Shed });
    pool_mut(&mut f, "only", "gpu").queue_depth = 8 * 1_000_000;
    let plan = policy().decide(budget_ms(20), &f, &estimator());
    assert_eq!(plan, Plan::Shed { retry_after: MAX_RETRY_AFTER, reason: Reason::Shed });
}

#[test]
fn a_spent_budget_is_shed_as_exhausted() {
    let spent = Budget::new(ms(20)).with_spent(ms(20));
    let plan = policy().decide(spent, &two_models(), &estimator());
    assert_eq!(plan, Plan::Shed { retry_after: MIN_RETRY_AFTER, reason: Reason::BudgetExhausted });
    let never = LatencyBudgetPolicy { shed_margin: f64::INFINITY };
    let plan = never.decide(spent, &two_models(), &estimator());
    assert_eq!((chosen(&plan), plan.reason()), ("cheap/gpu".into(), Reason::BudgetFastest));
}

#[test]
fn ties_prefer_the_cheaper_model_then_route_order() {
    let f = fleet(vec![
        model("a", 2, 3.0, vec![gpu(5)]),
        model("b", 2, 1.0, vec![gpu(5)]),
        model("c", 2, 1.0, vec![gpu(5)]),
    ]);
    let plan = policy().decide(budget_ms(50), &f, &estimator());
    assert_eq!(chosen(&plan), "b/gpu");
    assert_eq!(names(plan.fallbacks()), ["c/gpu", "a/gpu"]);
    // When nothing fits, equal predictions go to the more accurate, then the
    // cheaper, then the first.
    let f = fleet(vec![model("x", 1, 1.0, vec![gpu(5)]), model("y", 3, 9.0, vec![gpu(5)])]);
    assert_eq!(chosen(&policy().decide(budget_ms(4), &f, &estimator())), "y/gpu");
}

#[test]
fn unavailable_and_empty_models_are_skipped() {
    let mut f = two_models();
    pool_mut(&mut f, "heavy", "gpu").available = false;
    let plan = policy().decide(budget_ms(50), &f, &estimator());
    assert_eq!((chosen(&plan), plan.reason()), ("heavy/cpu".into(), Reason::Fallback));
    model_mut(&mut f, "heavy").pools.clear();
    let plan = policy().decide(budget_ms(50), &f, &estimator());
    assert_eq!(chosen(&plan), "cheap/gpu");
    assert_eq!(names(plan.fallbacks()), ["cheap/cpu"]);
}

#[test]
fn all_unavailable_sheds_as_unavailable() {
    let mut f = two_models();
    f.candidates.iter_mut().flat_map(|c| c.pools.iter_mut()).for_each(|p| p.available = false);
    let plan = policy().decide(budget_ms(50), &f, &estimator());
    assert_eq!(plan, Plan::Shed { retry_after: MIN_RETRY_AFTER, reason: Reason::Unavailable });
}

#[test]
fn a_model_without_statistics_is_tried_on_its_prior() {
    let mut f = two_models();
    for p in &mut model_mut(&mut f, "heavy").pools {
        p.latency = LatencyModel::default();
    }
    let plan = policy().decide(budget_ms(8), &f, &estimator());
    let placement = plan.primary().unwrap();
    assert_eq!((placement.model.as_ref(), placement.basis), ("heavy", EstimateBasis::Prior));
}

#[test]
fn stale_statistics_can_push_to_a_faster_option() {
    let mut f = two_models();
    pool_mut(&mut f, "heavy", "gpu").latency.stats_age = Duration::from_secs(3600); // 20 ms
    let plan = policy().decide(budget_ms(15), &f, &estimator());
    assert_eq!(chosen(&plan), "cheap/gpu");
    let plan = policy().decide(budget_ms(25), &f, &estimator());
    assert_eq!((chosen(&plan), plan.primary().unwrap().basis), ("heavy/gpu".into(), EstimateBasis::Stale));
}

#[test]
fn all_queues_full_sheds_as_overload_with_the_drain_time() {
    let mut f = two_models();
    for p in f.candidates.iter_mut().flat_map(|c| c.pools.iter_mut()) {
        p.queue_capacity = Some(80);
        p.queue_depth = 80;
    }
    // Shortest drain: cheap/gpu, 10 rounds of 8 at 2 ms = 20 ms -> 1 s minimum.
    let plan = policy().decide(budget_ms(50), &f, &estimator());
    assert_eq!(plan, Plan::Shed { retry_after: MIN_RETRY_AFTER, reason: Reason::Shed });
    for p in f.candidates.iter_mut().flat_map(|c| c.pools.iter_mut()) {
        p.queue_capacity = Some(8 * 2000);
        p.queue_depth = 8 * 2000; // cheap/gpu: 2000 rounds * 2 ms = 4 s
    }
    let plan = policy().decide(budget_ms(50), &f, &estimator());
    assert_eq!(plan, Plan::Shed { retry_after: Duration::from_secs(4), reason: Reason::Shed });
}
