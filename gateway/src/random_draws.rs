//! The process's generator of random draws (router_policies' [`Draw`]
//! values) for the weighted policy, upstream selection and sampling: a
//! SplitMix64 sequence over an atomic counter, seeded once per process. Not cryptographic; uniform and
//! lock-free, which is all a traffic split needs.

use router_policies::Draw;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

static COUNTER: AtomicU64 = AtomicU64::new(0);
static SEED: OnceLock<u64> = OnceLock::new();

/// The next uniform draw in `[0, 1)`.
pub fn next_draw() -> Draw {
    let seed = *SEED.get_or_init(|| RandomState::new().hash_one(0x5357_4954_4348u64));
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Draw::from_bits(splitmix64(seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15))))
}

/// SplitMix64's output function.
fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_roughly_uniform() {
        let n = 10_000;
        let low = (0..n).filter(|_| next_draw().value() < 0.25).count();
        assert!((2_000..3_000).contains(&low), "{low} of {n} below 0.25");
    }
}
