use crate::test_util::*;
use crate::{Budget, CascadePolicy, CascadeStep, Plan, Reason, MIN_RETRY_AFTER};

fn policy() -> CascadePolicy {
    CascadePolicy { confidence_output: "probabilities".into(), threshold: 0.8, cheap: None, heavy: None }
}

#[test]
fn plans_cheap_then_heavy() {
    let plan = policy().decide(budget_ms(50), &two_models(), &estimator());
    let Plan::Cascade { cheap, heavy, threshold, fallbacks, reason } = &plan else { panic!("{plan:?}") };
    assert_eq!((cheap.model.as_ref(), cheap.pool.as_ref()), ("cheap", "gpu"));
    assert_eq!((heavy.model.as_ref(), heavy.pool.as_ref(), heavy.predicted), ("heavy", "gpu", ms(10)));
    assert_eq!((*threshold, *reason), (0.8, Reason::Cascade));
    assert_eq!(names(fallbacks), ["cheap/cpu", "heavy/gpu", "heavy/cpu"]);
    assert_eq!(plan.primary(), Some(cheap));
}

#[test]
fn default_models_are_the_cheapest_and_the_most_accurate() {
    let f = fleet(vec![
        model("mid", 2, 2.0, vec![gpu(5)]),
        model("best", 3, 9.0, vec![gpu(20)]),
        model("tiny", 1, 0.5, vec![gpu(1)]),
    ]);
    let Plan::Cascade { cheap, heavy, .. } = policy().decide(budget_ms(50), &f, &estimator()) else {
        panic!()
    };
    assert_eq!((cheap.model.as_ref(), heavy.model.as_ref()), ("tiny", "best"));
    let named = CascadePolicy { cheap: Some("mid".into()), heavy: Some("best".into()), ..policy() };
    let plan = named.decide(budget_ms(50), &f, &estimator());
    let Plan::Cascade { cheap, heavy, fallbacks, .. } = &plan else { panic!() };
    assert_eq!((cheap.model.as_ref(), heavy.model.as_ref()), ("mid", "best"));
    assert_eq!(names(fallbacks), ["best/gpu", "tiny/gpu"]);
}

#[test]
fn ties_between_models_go_to_route_order() {
    let f = fleet(vec![
        model("a", 1, 1.0, vec![gpu(1)]),
        model("b", 1, 1.0, vec![gpu(1)]),
        model("c", 1, 1.0, vec![gpu(1)]),
    ]);
    let Plan::Cascade { cheap, heavy, .. } = policy().decide(budget_ms(50), &f, &estimator()) else {
        panic!()
    };
    assert_eq!((cheap.model.as_ref(), heavy.model.as_ref()), ("a", "b"));
}

#[test]
fn one_side_unavailable_runs_the_other_alone() {
    let mut f = two_models();
    model_mut(&mut f, "heavy").available = false;
    let plan = policy().decide(budget_ms(50), &f, &estimator());
    assert!(matches!(plan, Plan::Single { .. }));
    assert_eq!((plan.primary().unwrap().model.as_ref(), plan.reason()), ("cheap", Reason::Fallback));

    let mut f = two_models();
    f.candidates[0].pools.clear();
    let plan = policy().decide(budget_ms(50), &f, &estimator());
    assert_eq!((plan.primary().unwrap().model.as_ref(), plan.reason()), ("heavy", Reason::Fallback));
    assert_eq!(names(plan.fallbacks()), ["heavy/cpu"]);

    f.candidates[1].available = false;
    let plan = policy().decide(budget_ms(50), &f, &estimator());
    assert_eq!(plan, Plan::Shed { retry_after: MIN_RETRY_AFTER, reason: Reason::Unavailable });
}

#[test]
fn confident_cheap_answer_is_accepted() {
    let f = two_models();
    for confidence in [0.8, 0.95, 1.0] {
        let step = policy().after_cheap(confidence, budget_ms(50), &f, &estimator());
        assert_eq!(step, CascadeStep::Accept(Reason::CascadeConfident));
    }
}

#[test]
fn unconfident_answer_escalates_when_the_heavy_model_fits() {
    let budget = budget_ms(50).spend(ms(5));
    let step = policy().after_cheap(0.5, budget, &two_models(), &estimator());
    let CascadeStep::Escalate(placement, reason) = &step else { panic!("{step:?}") };
    assert_eq!(
        (placement.model.as_ref(), placement.pool.as_ref(), *reason),
        ("heavy", "gpu", Reason::CascadeEscalate)
    );
    assert_eq!(step.reason(), Reason::CascadeEscalate);
    // NaN is never confident.
    let nan = policy().after_cheap(f32::NAN, budget, &two_models(), &estimator());
    assert_eq!(nan.reason(), Reason::CascadeEscalate);
}

#[test]
fn escalation_uses_the_spill_over_pool_when_the_gpu_is_busy() {
    let mut f = two_models();
    pool_mut(&mut f, "heavy", "gpu").queue_depth = 64;
    let step = policy().after_cheap(0.1, budget_ms(45), &f, &estimator());
    let CascadeStep::Escalate(placement, _) = step else { panic!() };
    assert_eq!(&*placement.pool, "cpu");
}

#[test]
fn no_budget_left_accepts_the_unconfident_answer() {
    let tight = Budget::new(ms(20)).with_spent(ms(12)); // heavy needs 10 ms
    let step = policy().after_cheap(0.1, tight, &two_models(), &estimator());
    assert_eq!(step, CascadeStep::AcceptUnconfident(Reason::CascadeNoBudget));
    let spent = Budget::new(ms(20)).with_spent(ms(40));
    let step = policy().after_cheap(0.1, spent, &two_models(), &estimator());
    assert_eq!(step.reason(), Reason::CascadeNoBudget);
}

#[test]
fn heavy_model_unavailable_accepts_the_unconfident_answer() {
    let mut f = two_models();
    model_mut(&mut f, "heavy").available = false;
    let step = policy().after_cheap(0.1, budget_ms(50), &f, &estimator());
    assert_eq!(step, CascadeStep::AcceptUnconfident(Reason::CascadeUnavailable));
}
