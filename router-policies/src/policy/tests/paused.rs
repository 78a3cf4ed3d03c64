//! Paused pools ([`crate::PoolView::paused`]): every policy spills over to
//! pools and models that serve, and uses a paused pool only when nothing
//! else can take the request.

use crate::test_util::*;
use crate::{
    choose_pool, CascadePolicy, CascadeStep, FixedPolicy, LatencyBudgetPolicy, Plan, PoolFit, Reason,
    MIN_RETRY_AFTER,
};

fn pause(f: &mut crate::FleetView, model: &str, pool: &str) {
    pool_mut(f, model, pool).paused = true;
}

fn cascade() -> CascadePolicy {
    CascadePolicy { confidence_output: "probabilities".into(), threshold: 0.8, cheap: None, heavy: None }
}

#[test]
fn a_paused_pool_never_fits_and_ranks_last() {
    let mut f = two_models();
    pause(&mut f, "heavy", "gpu");
    let choice = choose_pool(&f.candidates[1], ms(1000), &estimator()).unwrap();
    assert_eq!(&*choice.placement.pool, "cpu", "the pool that serves, though costlier");
    assert!(choice.alternatives.is_empty(), "a paused pool is no fallback: {:?}", choice.alternatives);
    pause(&mut f, "heavy", "cpu");
    let choice = choose_pool(&f.candidates[1], ms(1000), &estimator()).unwrap();
    assert_eq!((choice.fit, choice.fits()), (PoolFit::Paused, false));
    assert_eq!(choice.prediction.completion(), std::time::Duration::MAX);
}

#[test]
fn fixed_spills_over_to_another_model_and_waits_only_when_alone() {
    let mut f = two_models();
    pause(&mut f, "heavy", "gpu");
    pause(&mut f, "heavy", "cpu");
    let fixed = FixedPolicy { model: "heavy".into() };
    let plan = fixed.decide(budget_ms(100), &f, &estimator());
    assert_eq!((plan.reason(), plan.primary().unwrap().model.as_ref()), (Reason::Fallback, "cheap"));
    let Plan::Single { fallbacks, .. } = &plan else { panic!("{plan:?}") };
    assert!(fallbacks.iter().all(|t| &*t.model == "cheap"), "{fallbacks:?}");
    pause(&mut f, "cheap", "gpu");
    pause(&mut f, "cheap", "cpu");
    let plan = fixed.decide(budget_ms(100), &f, &estimator());
    assert_eq!(&*plan.primary().unwrap().model, "heavy", "nowhere else: wait on the configured model");
}

#[test]
fn latency_budget_spills_over_or_sheds_at_once() {
    let mut f = two_models();
    pause(&mut f, "heavy", "gpu");
    pause(&mut f, "heavy", "cpu");
    let policy = LatencyBudgetPolicy::default();
    let plan = policy.decide(budget_ms(100), &f, &estimator());
    assert_eq!((plan.reason(), plan.primary().unwrap().model.as_ref()), (Reason::BudgetFit, "cheap"));
    pause(&mut f, "cheap", "gpu");
    pause(&mut f, "cheap", "cpu");
    let plan = policy.decide(budget_ms(100), &f, &estimator());
    assert_eq!(plan, Plan::Shed { retry_after: MIN_RETRY_AFTER, reason: Reason::Shed });
}

#[test]
fn cascade_with_a_paused_cheap_model_runs_the_heavy_one() {
    let mut f = two_models();
    pause(&mut f, "cheap", "gpu");
    pause(&mut f, "cheap", "cpu");
    let plan = cascade().decide(budget_ms(100), &f, &estimator());
    assert_eq!((plan.reason(), plan.primary().unwrap().model.as_ref()), (Reason::Fallback, "heavy"));
}

#[test]
fn cascade_with_a_paused_heavy_model_answers_cheap() {
    let mut f = two_models();
    pause(&mut f, "heavy", "gpu");
    pause(&mut f, "heavy", "cpu");
    let plan = cascade().decide(budget_ms(100), &f, &estimator());
    let Plan::Cascade { cheap, heavy, .. } = &plan else { panic!("{plan:?}") };
    assert_eq!((cheap.model.as_ref(), heavy.model.as_ref()), ("cheap", "heavy"));
    let step = cascade().after_cheap(0.1, budget_ms(100), &f, &estimator());
    assert_eq!(step, CascadeStep::AcceptUnconfident(Reason::CascadeNoBudget));
}
