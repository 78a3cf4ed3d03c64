use crate::test_util::*;
use crate::{Device, EstimateBasis, Estimator, LatencyBucket, LatencyModel};
use std::time::Duration;

fn buckets() -> LatencyModel {
    LatencyModel {
        buckets: vec![
            LatencyBucket { max_batch: 16, latency: ms(8), samples: 50 },
            LatencyBucket { max_batch: 1, latency: ms(1), samples: 50 },
            LatencyBucket { max_batch: 4, latency: ms(3), samples: 50 },
        ],
        stats_age: ms(10),
    }
}

#[test]
fn idle_pool_predicts_one_batch_of_one() {
    let mut p = gpu(5);
    p.latency = buckets();
    let prediction = estimator().predict(&p);
    assert_eq!(prediction.queue_wait, Duration::ZERO);
    assert_eq!(prediction.execution, ms(1));
    assert_eq!(prediction.completion(), ms(1));
    assert_eq!(prediction.basis, EstimateBasis::Measured);
}

#[test]
fn short_queue_is_one_round_of_small_batches() {
    let mut p = gpu(5);
    p.latency = buckets();
    p.max_batch_size = 16;
    p.queue_depth = 3;
    // ahead 3, one worker: batch 3 -> bucket "up to 4" = 3 ms; one round.
    let prediction = estimator().predict(&p);
    assert_eq!(prediction.queue_wait, ms(3));
    assert_eq!(prediction.execution, ms(3));
}

#[test]
fn long_queue_is_rounds_of_full_batches_across_workers() {
    let mut p = gpu(5);
    p.latency = buckets();
    p.max_batch_size = 8;
    p.workers = 2;
    p.queue_depth = 20;
    p.in_flight = 4;
    // ahead 24, 2 workers, batch 8 -> ceil(24 / 16) = 2 rounds of t(8) = 8 ms.
    let prediction = estimator().predict(&p);
    assert_eq!(prediction.queue_wait, ms(16));
    assert_eq!(prediction.completion(), ms(24));
}

#[test]
fn in_flight_alone_counts_as_a_full_round() {
    let mut p = gpu(5);
    p.in_flight = 1;
    assert_eq!(estimator().predict(&p).completion(), ms(10));
}

#[test]
fn batches_past_the_largest_bucket_scale_linearly() {
    let mut p = gpu(5);
    p.latency = buckets();
    p.max_batch_size = 64;
    p.queue_depth = 32;
    // batch 32 > 16: 8 ms * 32 / 16 = 16 ms per batch.
    let prediction = estimator().predict(&p);
    assert_eq!(prediction.execution, ms(16));
    assert_eq!(prediction.queue_wait, ms(16));
}

#[test]
fn buckets_below_min_samples_are_ignored() {
    let mut p = gpu(5);
    p.latency.buckets.insert(0, LatencyBucket { max_batch: 1, latency: ms(1), samples: 2 });
    let strict = Estimator { min_samples: 3, ..Estimator::default() };
    assert_eq!(strict.predict(&p).execution, ms(5));
    assert_eq!(estimator().predict(&p).execution, ms(1));
}

#[test]
fn no_statistics_uses_the_prior_and_still_counts_the_queue() {
    let mut p = pool("fresh", Device::Cpu, 1.0, 0);
    p.latency = LatencyModel::default();
    p.max_batch_size = 1;
    let prediction = estimator().predict(&p);
    assert_eq!(prediction.basis, EstimateBasis::Prior);
    assert_eq!(prediction.completion(), ms(2));
    p.queue_depth = 3;
    assert_eq!(estimator().predict(&p).completion(), ms(8));
    // Buckets with zero samples are "no statistics" too.
    p.latency.buckets.push(LatencyBucket { max_batch: 1, latency: ms(50), samples: 0 });
    assert_eq!(estimator().predict(&p).basis, EstimateBasis::Prior);
}

#[test]
fn stale_statistics_are_inflated_and_flagged() {
    let mut p = gpu(4);
    p.latency.stats_age = Duration::from_secs(31);
    let prediction = estimator().predict(&p);
    assert_eq!(prediction.basis, EstimateBasis::Stale);
    assert_eq!(prediction.execution, ms(8));
    p.latency.stats_age = Duration::from_secs(30);
    assert_eq!(estimator().predict(&p).basis, EstimateBasis::Measured);
}

#[test]
fn degenerate_pools_do_not_panic() {
    let mut p = gpu(5);
    p.workers = 0;
    p.max_batch_size = 0;
    p.queue_depth = 2;
    assert_eq!(estimator().predict(&p).completion(), ms(15));
    p.queue_depth = usize::MAX;
    p.in_flight = usize::MAX;
    p.latency.buckets[0].latency = Duration::MAX;
    assert_eq!(estimator().predict(&p).completion(), Duration::MAX);
    let weird = Estimator { stale_penalty: f64::NAN, stale_after_ms: 0, ..Estimator::default() };
    let mut q = gpu(5);
    q.latency.stats_age = ms(1);
    assert_eq!(weird.predict(&q).execution, ms(5));
}

#[test]
fn estimator_settings_have_defaults_and_are_validated() {
    let parsed: Estimator = toml::from_str("stale_after_ms = 1000").unwrap();
    assert_eq!(parsed, Estimator { stale_after_ms: 1000, ..Estimator::default() });
    assert!(toml::from_str::<Estimator>("stale_after = 1").is_err());
    assert!(Estimator::default().validate().is_ok());
    let bad = Estimator { prior_batch_us: 0, stale_penalty: 0.5, ..Estimator::default() };
    let issues = bad.validate().unwrap_err();
    let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(paths, ["prior_batch_us", "stale_penalty"]);
}
