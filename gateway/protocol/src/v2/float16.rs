//! Conversions between JSON numbers and the 16-bit float formats `FP16`
//! (IEEE binary16) and `BF16` (bfloat16), which JSON cannot carry natively.
//!
//! Narrowing rounds to nearest, ties to even, directly from `f64` (no
//! double rounding through `f32`); widening to `f32` is exact.

/// Rounds `v` to a float with `exp_bits` exponent and `man_bits` mantissa
/// bits (at most 16 bits in all). `None` when the result overflows to
/// infinity or `v` is not finite.
fn narrow(v: f64, exp_bits: u32, man_bits: u32) -> Option<u16> {
    let bits = v.to_bits();
    let sign = ((bits >> 63) as u16) << (exp_bits + man_bits);
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0x7ff {
        return None;
    }
    if exp == 0 {
        // Zero, or an f64 subnormal: far below half the smallest target
        // subnormal, so it rounds to (signed) zero.
        return Some(sign);
    }
    let significand = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    let bias = (1i32 << (exp_bits - 1)) - 1;
    let unbiased = exp - 1023;
    let emin = 1 - bias;
    let mut shift = 52 - man_bits as i32;
    if unbiased < emin {
        shift += emin - unbiased;
    }
    if shift > 53 {
        // Less than half the smallest subnormal.
        return Some(sign);
    }
    let shift = shift as u32;
    let mut q = significand >> shift;
    let rem = significand & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q += 1;
    }
    // For normals, q carries the implicit bit at `man_bits`; adding it to
    // (biased exponent - 1) << man_bits handles a carry out of rounding.
    let magnitude = if unbiased < emin { q } else { (((unbiased + bias - 1) as u64) << man_bits) + q };
    let infinity = ((1u64 << exp_bits) - 1) << man_bits;
    if magnitude >= infinity {
        return None;
    }
    Some(sign | magnitude as u16)
}

/// `v` as IEEE binary16 bits, or `None` when out of range.
pub(crate) fn f64_to_f16_bits(v: f64) -> Option<u16> {
    narrow(v, 5, 10)
}

/// `v` as bfloat16 bits, or `None` when out of range.
pub(crate) fn f64_to_bf16_bits(v: f64) -> Option<u16> {
    narrow(v, 8, 7)
}

/// The exact `f32` value of IEEE binary16 bits.
pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        0 => {
            // Subnormal (or zero): man x 2^-24, exact in f32.
            let magnitude = man as f32 * f32::from_bits(0x3380_0000);
            f32::from_bits(sign | magnitude.to_bits())
        }
        31 => f32::from_bits(sign | 0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(sign | ((exp + 127 - 15) << 23) | (man << 13)),
    }
}

/// The exact `f32` value of bfloat16 bits.
pub(crate) fn bf16_bits_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_known_values() {
        assert_eq!(f64_to_f16_bits(1.0), Some(0x3c00));
        assert_eq!(f64_to_f16_bits(-2.0), Some(0xc000));
        assert_eq!(f64_to_f16_bits(0.0), Some(0));
        assert_eq!(f64_to_f16_bits(-0.0), Some(0x8000));
        assert_eq!(f64_to_f16_bits(65504.0), Some(0x7bff));
        assert_eq!(f64_to_f16_bits(65519.0), Some(0x7bff));
        assert_eq!(f64_to_f16_bits(65520.0), None);
        assert_eq!(f64_to_f16_bits(2f64.powi(-24)), Some(1));
        assert_eq!(f64_to_f16_bits(2f64.powi(-25)), Some(0)); // tie to even
        assert_eq!(f64_to_f16_bits(1.5 * 2f64.powi(-25)), Some(1));
        assert_eq!(f64_to_f16_bits(2f64.powi(-14)), Some(0x0400));
        assert_eq!(f64_to_f16_bits(0.1), Some(0x2e66));
        assert_eq!(f64_to_f16_bits(1e-300), Some(0));
    }

    #[test]
    fn bf16_known_values() {
        assert_eq!(f64_to_bf16_bits(1.0), Some(0x3f80));
        assert_eq!(f64_to_bf16_bits(-1.5), Some(0xbfc0));
        assert_eq!(f64_to_bf16_bits(0.1), Some(0x3dcd));
        assert_eq!(f64_to_bf16_bits(3.39e38), Some(0x7f7f));
        assert_eq!(f64_to_bf16_bits(3.38e38), Some(0x7f7e));
        assert_eq!(f64_to_bf16_bits(3.4e38), None);
        assert_eq!(f64_to_bf16_bits(1e39), None);
        assert_eq!(bf16_bits_to_f32(0x3dcd), f32::from_bits(0x3dcd_0000));
    }

    #[test]
    fn every_f16_round_trips() {
        for h in 0..=u16::MAX {
            let exp = (h >> 10) & 0x1f;
            if exp == 31 {
                continue;
            }
            let wide = f16_bits_to_f32(h);
            assert_eq!(f64_to_f16_bits(f64::from(wide)), Some(h), "{h:#06x}");
            // Via the shortest decimal of the f32, as sent in JSON.
            let text = serde_json::to_string(&wide).unwrap();
            let parsed: f64 = text.parse().unwrap();
            assert_eq!(f64_to_f16_bits(parsed), Some(h), "{h:#06x} via {text}");
        }
    }

    #[test]
    fn every_bf16_round_trips() {
        for b in 0..=u16::MAX {
            if (b >> 7) & 0xff == 0xff {
                continue;
            }
            let text = serde_json::to_string(&bf16_bits_to_f32(b)).unwrap();
            let parsed: f64 = text.parse().unwrap();
            assert_eq!(f64_to_bf16_bits(parsed), Some(b), "{b:#06x} via {text}");
        }
    }
}
