//! A random draw supplied by the caller.
//!
//! Policies never own a random generator: the gateway draws one number per
//! request and passes it in, so decisions are reproducible in tests and
//! simulations.

/// A number in `[0, 1)`, used by the weighted policy to split traffic.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Default)]
pub struct Draw(f64);

impl Draw {
    /// Largest value below 1.0.
    const BELOW_ONE: f64 = 1.0 - f64::EPSILON / 2.0;

    /// `value` clamped into `[0, 1)`; NaN becomes 0.
    pub fn new(value: f64) -> Self {
        if value.is_nan() {
            Draw(0.0)
        } else {
            Draw(value.clamp(0.0, Self::BELOW_ONE))
        }
    }

    /// A uniform draw from 64 random bits (e.g. `rand::random::<u64>()`),
    /// using the top 53 bits.
    pub fn from_bits(bits: u64) -> Self {
        Draw((bits >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// The value, in `[0, 1)`.
    pub const fn value(self) -> f64 {
        self.0
    }
}
