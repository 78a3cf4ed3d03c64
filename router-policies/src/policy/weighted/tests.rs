use crate::test_util::*;
use crate::{Draw, ModelWeight, Plan, Reason, WeightedPolicy, MIN_RETRY_AFTER};

fn weights(entries: &[(&str, f64)]) -> WeightedPolicy {
    WeightedPolicy {
        weights: entries.iter().map(|(m, w)| ModelWeight { model: m.to_string(), weight: *w }).collect(),
    }
}

fn pick(policy: &WeightedPolicy, fleet: &crate::FleetView, draw: f64) -> (String, Reason) {
    let plan = policy.decide(budget_ms(50), fleet, &estimator(), Draw::new(draw));
    (plan.primary().expect("placement").model.to_string(), plan.reason())
}

#[test]
fn draw_selects_by_cumulative_weight() {
    let policy = weights(&[("cheap", 90.0), ("heavy", 10.0)]);
    let f = two_models();
    assert_eq!(pick(&policy, &f, 0.0), ("cheap".into(), Reason::Weighted));
    assert_eq!(pick(&policy, &f, 0.899), ("cheap".into(), Reason::Weighted));
    assert_eq!(pick(&policy, &f, 0.9), ("heavy".into(), Reason::Weighted));
    assert_eq!(pick(&policy, &f, 0.999_999), ("heavy".into(), Reason::Weighted));
    // Out-of-range draws are clamped.
    assert_eq!(pick(&policy, &f, 7.0).0, "heavy");
    assert_eq!(pick(&policy, &f, f64::NAN).0, "cheap");
}

#[test]
fn distribution_over_10k_draws_matches_the_weights() {
    let policy = weights(&[("cheap", 3.0), ("mid", 1.0), ("heavy", 1.0)]);
    let f = fleet(vec![
        model("cheap", 1, 1.0, vec![gpu(2)]),
        model("mid", 2, 2.0, vec![gpu(2)]),
        model("heavy", 3, 3.0, vec![gpu(2)]),
    ]);
    let mut rng = SplitMix(42);
    let mut counts = [0usize; 3];
    for _ in 0..10_000 {
        let plan = policy.decide(budget_ms(50), &f, &estimator(), Draw::from_bits(rng.next()));
        let i = ["cheap", "mid", "heavy"].iter().position(|m| *m == &*plan.primary().unwrap().model).unwrap();
        counts[i] += 1;
    }
    for (count, expected) in counts.iter().zip([6000.0, 2000.0, 2000.0]) {
        assert!((*count as f64 - expected).abs() < 250.0, "{counts:?}");
    }
}

#[test]
fn unavailable_pick_is_redistributed_over_the_remaining_weights() {
    let policy = weights(&[("a", 50.0), ("b", 25.0), ("c", 25.0)]);
    let mut f = fleet(vec![
        model("a", 1, 1.0, vec![gpu(2)]),
        model("b", 1, 1.0, vec![gpu(2)]),
        model("c", 1, 1.0, vec![gpu(2)]),
    ]);
    model_mut(&mut f, "a").available = false;
    // Draws in a's share [0, 0.5) are spread over b and c half and half.
    assert_eq!(pick(&policy, &f, 0.1), ("b".into(), Reason::Fallback));
    assert_eq!(pick(&policy, &f, 0.3), ("c".into(), Reason::Fallback));
    assert_eq!(pick(&policy, &f, 0.6), ("b".into(), Reason::Weighted));
    let mut rng = SplitMix(7);
    let b = (0..10_000)
        .filter(|_| {
            let plan = policy.decide(budget_ms(50), &f, &estimator(), Draw::from_bits(rng.next()));
            &*plan.primary().unwrap().model == "b"
        })
        .count();
    assert!((b as f64 - 5000.0).abs() < 250.0, "{b}");
}

#[test]
fn no_usable_weighted_model_falls_back_to_route_order_then_sheds() {
    let policy = weights(&[("heavy", 1.0)]);
    let mut f = two_models();
    model_mut(&mut f, "heavy").available = false;
    assert_eq!(pick(&policy, &f, 0.5), ("cheap".into(), Reason::Fallback));
    model_mut(&mut f, "cheap").available = false;
    let plan = policy.decide(budget_ms(50), &f, &estimator(), Draw::new(0.5));
    assert_eq!(plan, Plan::Shed { retry_after: MIN_RETRY_AFTER, reason: Reason::Unavailable });
    // Weights that are all invalid behave like "no usable weighted model".
    let broken = weights(&[("heavy", 0.0), ("cheap", f64::NAN)]);
    assert_eq!(pick(&broken, &two_models(), 0.5), ("cheap".into(), Reason::Fallback));
}

#[test]
fn fallbacks_follow_weights_then_route_order() {
    let policy = weights(&[("a", 1.0), ("c", 5.0), ("b", 3.0)]);
    let f = fleet(vec![
        model("a", 1, 1.0, vec![gpu(2), cpu(4)]),
        model("b", 1, 1.0, vec![gpu(2)]),
        model("c", 1, 1.0, vec![gpu(2)]),
        model("d", 1, 1.0, vec![gpu(2)]),
    ]);
    let plan = policy.decide(budget_ms(50), &f, &estimator(), Draw::new(0.0));
    assert_eq!(&*plan.primary().unwrap().model, "a");
    assert_eq!(names(plan.fallbacks()), ["a/cpu", "c/gpu", "b/gpu", "d/gpu"]);
}

#[test]
fn spill_over_is_reported_for_the_drawn_model() {
    let policy = weights(&[("heavy", 1.0)]);
    let mut f = two_models();
    pool_mut(&mut f, "heavy", "gpu").queue_depth = 64;
    let plan = policy.decide(budget_ms(45), &f, &estimator(), Draw::new(0.3));
    assert_eq!((plan.primary().unwrap().pool.as_ref(), plan.reason()), ("cpu", Reason::SpillOver));
}

#[test]
fn draw_helpers_stay_in_range() {
    assert_eq!(Draw::from_bits(0).value(), 0.0);
    assert!(Draw::from_bits(u64::MAX).value() < 1.0);
    assert!(Draw::new(1.0).value() < 1.0);
    assert_eq!(Draw::new(-3.0).value(), 0.0);
}
