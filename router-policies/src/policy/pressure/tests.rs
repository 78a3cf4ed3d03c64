//! Degraded answers ([`PolicyConfig::is_degraded`]): which answers differ in
//! what was answered from the policy's answer without pressure.

use crate::test_util::{cpu, fleet, gpu, model};
use crate::{
    CascadePolicy, FixedPolicy, FleetView, LatencyBudgetPolicy, ModelWeight, PolicyConfig, Reason,
    WeightedPolicy,
};

fn two_models() -> FleetView {
    fleet(vec![model("cheap", 0, 1.0, vec![cpu(1)]), model("heavy", 1, 2.0, vec![gpu(1), cpu(5)])])
}

#[test]
fn fixed_degrades_only_when_another_model_answers() {
    let policy = PolicyConfig::Fixed(FixedPolicy { model: "heavy".into() });
    let f = two_models();
    assert!(!policy.is_degraded(&f, "heavy", Reason::Fixed));
    assert!(!policy.is_degraded(&f, "heavy", Reason::SpillOver), "another pool, same model");
    assert!(!policy.is_degraded(&f, "heavy", Reason::Fallback), "e.g. CUDA missing, CPU answers");
    assert!(policy.is_degraded(&f, "cheap", Reason::Fallback));
}

#[test]
fn latency_budget_degrades_below_the_most_accurate_model() {
    let policy = PolicyConfig::LatencyBudget(LatencyBudgetPolicy::default());
    let f = two_models();
    for reason in [Reason::BudgetFit, Reason::SpillOver, Reason::BudgetFastest, Reason::Fallback] {
        assert!(!policy.is_degraded(&f, "heavy", reason), "{reason}");
        assert!(policy.is_degraded(&f, "cheap", reason), "{reason}");
    }
    // Equally accurate: the cheaper one is the answer without pressure.
    let tied = fleet(vec![model("a", 1, 1.0, vec![cpu(1)]), model("b", 1, 3.0, vec![cpu(1)])]);
    assert!(!policy.is_degraded(&tied, "a", Reason::BudgetFit));
    assert!(policy.is_degraded(&tied, "b", Reason::SpillOver));
    assert!(policy.is_degraded(&tied, "unknown", Reason::BudgetFit));
}

#[test]
fn cascade_degrades_unconfident_cheap_answers() {
    let policy = PolicyConfig::Cascade(CascadePolicy {
        confidence_output: "probabilities".into(),
        threshold: 0.8,
        cheap: None,
        heavy: None,
    });
    let f = two_models();
    assert!(!policy.is_degraded(&f, "cheap", Reason::CascadeConfident));
    assert!(!policy.is_degraded(&f, "heavy", Reason::CascadeEscalate));
    assert!(!policy.is_degraded(&f, "heavy", Reason::Fallback), "the heavy model on another pool");
    assert!(policy.is_degraded(&f, "cheap", Reason::CascadeNoBudget));
    assert!(policy.is_degraded(&f, "cheap", Reason::CascadeUnavailable));
    assert!(policy.is_degraded(&f, "cheap", Reason::Fallback), "confidence never checked");
}

#[test]
fn weighted_degrades_outside_the_weighted_models() {
    let policy = PolicyConfig::Weighted(WeightedPolicy {
        weights: vec![ModelWeight { model: "cheap".into(), weight: 3.0 }],
    });
    let f = two_models();
    assert!(!policy.is_degraded(&f, "cheap", Reason::Weighted));
    assert!(!policy.is_degraded(&f, "cheap", Reason::SpillOver));
    assert!(policy.is_degraded(&f, "heavy", Reason::Fallback));
}

#[test]
fn reasons_parse_from_their_labels() {
    for reason in Reason::ALL {
        assert_eq!(Reason::from_label(reason.as_str()), Some(reason));
    }
    assert_eq!(Reason::from_label("nope"), None);
}

#[test]
fn policies_that_do_not_judge_by_the_fleet_answer_the_same_without_it() {
    let full = two_models();
    let empty = FleetView::default();
    let fixed = PolicyConfig::Fixed(FixedPolicy { model: "heavy".into() });
    let weighted = PolicyConfig::Weighted(WeightedPolicy {
        weights: vec![ModelWeight { model: "cheap".into(), weight: 1.0 }],
    });
    for policy in [&fixed, &weighted] {
        assert!(!policy.judges_by_fleet());
        for model in ["cheap", "heavy", "unknown"] {
            for reason in [Reason::Fixed, Reason::Weighted, Reason::SpillOver, Reason::Fallback] {
                assert_eq!(
                    policy.is_degraded(&empty, model, reason),
                    policy.is_degraded(&full, model, reason),
                    "{model} {reason}"
                );
            }
        }
    }
    let budget = PolicyConfig::LatencyBudget(LatencyBudgetPolicy::default());
    assert!(budget.judges_by_fleet());
    assert_ne!(
        budget.is_degraded(&empty, "heavy", Reason::BudgetFit),
        budget.is_degraded(&full, "heavy", Reason::BudgetFit)
    );
}
