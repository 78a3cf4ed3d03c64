use crate::test_util::*;
use crate::{choose_pool, Device, EstimateBasis, LatencyModel, PoolFit};

#[test]
fn idle_fleet_uses_the_cheapest_pool() {
    let m = model("m", 1, 1.0, vec![cpu(6), gpu(2)]);
    let choice = choose_pool(&m, ms(20), &estimator()).unwrap();
    assert_eq!(&*choice.placement.pool, "gpu");
    assert_eq!(choice.placement.device, Device::Cuda);
    assert_eq!(choice.placement.predicted, ms(2));
    assert_eq!(choice.fit, PoolFit::Fits);
    assert_eq!(names(&choice.alternatives), ["m/cpu"]);
}

#[test]
fn saturated_gpu_spills_over_to_cpu() {
    let mut m = model("m", 1, 1.0, vec![gpu(4), cpu(6)]);
    m.pools[0].queue_depth = 40; // 5 rounds of 8 at 4 ms = 20 ms wait
    let choice = choose_pool(&m, ms(15), &estimator()).unwrap();
    assert_eq!(&*choice.placement.pool, "cpu");
    assert_eq!(choice.fit, PoolFit::SpillOver);
    assert_eq!(names(&choice.alternatives), ["m/gpu"]);
    // With a larger budget the GPU queue fits again.
    let relaxed = choose_pool(&m, ms(30), &estimator()).unwrap();
    assert_eq!((relaxed.placement.pool.as_ref(), relaxed.fit), ("gpu", PoolFit::Fits));
}

#[test]
fn full_queue_is_never_chosen_and_counts_as_spill_over() {
    let mut m = model("m", 1, 1.0, vec![gpu(2), cpu(6)]);
    m.pools[0].queue_capacity = Some(4);
    m.pools[0].queue_depth = 4;
    let choice = choose_pool(&m, ms(20), &estimator()).unwrap();
    assert_eq!((choice.placement.pool.as_ref(), choice.fit), ("cpu", PoolFit::SpillOver));
    assert!(choice.alternatives.is_empty());
    // Full and nothing else: the model is not usable.
    m.pools.truncate(1);
    assert!(choose_pool(&m, ms(20), &estimator()).is_none());
}

#[test]
fn unavailable_preferred_pool_is_skipped_as_a_fallback() {
    let mut m = model("m", 1, 1.0, vec![gpu(2), cpu(6)]);
    m.pools[0].available = false;
    let choice = choose_pool(&m, ms(20), &estimator()).unwrap();
    assert_eq!((choice.placement.pool.as_ref(), choice.fit), ("cpu", PoolFit::Fallback));
    // An unavailable pool that would not be preferred anyway changes nothing.
    let mut m = model("m", 1, 1.0, vec![gpu(2), cpu(6)]);
    m.pools[1].available = false;
    let choice = choose_pool(&m, ms(20), &estimator()).unwrap();
    assert_eq!((choice.placement.pool.as_ref(), choice.fit), ("gpu", PoolFit::Fits));
}

#[test]
fn costlier_pool_that_fits_when_the_cheap_one_is_too_slow_idle_is_not_spill_over() {
    let m = model("m", 1, 1.0, vec![pool("cpu", Device::Cpu, 1.0, 30), pool("gpu", Device::Cuda, 3.0, 5)]);
    let choice = choose_pool(&m, ms(20), &estimator()).unwrap();
    assert_eq!((choice.placement.pool.as_ref(), choice.fit), ("gpu", PoolFit::Fits));
}

#[test]
fn nothing_fits_gives_the_fastest_pool_late() {
    let mut m = model("m", 1, 1.0, vec![gpu(4), cpu(12)]);
    m.pools[0].queue_depth = 80;
    let choice = choose_pool(&m, ms(5), &estimator()).unwrap();
    assert_eq!((choice.placement.pool.as_ref(), choice.fit), ("cpu", PoolFit::Late));
    assert!(!choice.fits());
}

#[test]
fn ties_go_to_the_pool_configured_first() {
    let m = model("m", 1, 1.0, vec![pool("b", Device::Cpu, 1.0, 5), pool("a", Device::Cpu, 1.0, 5)]);
    assert_eq!(&*choose_pool(&m, ms(20), &estimator()).unwrap().placement.pool, "b");
    assert_eq!(&*choose_pool(&m, ms(1), &estimator()).unwrap().placement.pool, "b");
}

#[test]
fn unusable_models_give_none() {
    let empty = model("m", 1, 1.0, vec![]);
    assert!(choose_pool(&empty, ms(20), &estimator()).is_none());
    let mut down = model("m", 1, 1.0, vec![gpu(2)]);
    down.available = false;
    assert!(choose_pool(&down, ms(20), &estimator()).is_none());
    let mut pools_down = model("m", 1, 1.0, vec![gpu(2), cpu(6)]);
    pools_down.pools.iter_mut().for_each(|p| p.available = false);
    assert!(choose_pool(&pools_down, ms(20), &estimator()).is_none());
}

#[test]
fn fresh_pool_without_statistics_is_tried() {
    let mut m = model("m", 1, 1.0, vec![gpu(4), cpu(6)]);
    m.pools[0].queue_depth = 40; // GPU busy: 24 ms
    m.pools[1].latency = LatencyModel::default(); // CPU fresh: prior 2 ms
    let choice = choose_pool(&m, ms(10), &estimator()).unwrap();
    assert_eq!(&*choice.placement.pool, "cpu");
    assert_eq!(choice.placement.basis, EstimateBasis::Prior);
}

#[test]
fn stale_statistics_are_conservative() {
    let mut m = model("m", 1, 1.0, vec![gpu(4), cpu(5)]);
    m.pools[0].latency.stats_age = std::time::Duration::from_secs(600); // GPU now 8 ms
    let choice = choose_pool(&m, ms(6), &estimator()).unwrap();
    assert_eq!((choice.placement.pool.as_ref(), choice.fit), ("cpu", PoolFit::Fits));
    // With room for the penalty, the cheaper stale GPU is still used.
    let roomy = choose_pool(&m, ms(10), &estimator()).unwrap();
    assert_eq!((roomy.placement.pool.as_ref(), roomy.placement.basis), ("gpu", EstimateBasis::Stale));
}
