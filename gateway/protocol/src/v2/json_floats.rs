//! A fast path for the commonest JSON tensor: a flat array of numbers for
//! an `FP32` or `FP64` input (what `tritonclient`, `perf_analyzer` and
//! hand-written clients send).
//!
//! Why: walked element by element through serde's visitor, each number
//! costs a dispatch, a visitor call and the depth and count checks, about
//! as much as the rest of a small inference request's decoding together
//! (issue 42). Here the array's text is scanned once and each number is
//! converted where it lies.
//!
//! Same answers as the general walk ([`super::json_data`]): a number is
//! read as `f64` (an integer as an integer first, `-0` as `-0.0`, as
//! there) and narrowed to `f32` for `FP32`. Anything else (nesting, a
//! value that is not a number, a count that differs from the shape's, a
//! number out of `FP32`'s range) makes [`flat_floats`] answer `None`, and
//! the caller takes the general walk, which finds the error and words it.

use switchyard_runtime::tensor::DataType;

/// Exact powers of ten as `f64` (10^0 to 10^22, all exactly representable).
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19, 1e20, 1e21, 1e22,
];

/// The little-endian bytes of `text` (a JSON value) read as a flat array
/// of exactly `count` numbers of `dtype` (`FP32` or `FP64`), or `None`
/// when the general walk must decide.
pub(crate) fn flat_floats(text: &str, dtype: DataType, count: usize) -> Option<Vec<u8>> {
    let size = match dtype {
        DataType::F32 => 4,
        DataType::F64 => 8,
        _ => return None,
    };
    let bytes = text.as_bytes();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    // At most one element per two bytes of text bounds the reservation.
    let mut out = Vec::with_capacity(count.min(bytes.len() / 2 + 1) * size);
    let mut seen = 0usize;
    if bytes.get(at) == Some(&b']') {
        at += 1;
    } else {
        loop {
            let (value, next) = number(bytes, at)?;
            seen += 1;
            if seen > count {
                return None;
            }
            if size == 4 {
                let narrow = value as f32;
                if narrow.is_infinite() {
                    return None;
                }
                out.extend_from_slice(&narrow.to_le_bytes());
            } else {
                out.extend_from_slice(&value.to_le_bytes());
            }
            at = skip_space(bytes, next);
            match bytes.get(at) {
                Some(b',') => at = skip_space(bytes, at + 1),
                Some(b']') => {
                    at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    (seen == count && skip_space(bytes, at) == bytes.len()).then_some(out)
}

/// The index of the first byte at or after `at` that is not JSON
/// whitespace.
fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        at += 1;
    }
    at
}

/// The JSON number starting at `at` (strict JSON grammar) and the index
/// after it; `None` when there is none.
fn number(bytes: &[u8], start: usize) -> Option<(f64, usize)> {
    let mut at = start;
    let negative = bytes.get(at) == Some(&b'-');
    if negative {
        at += 1;
    }
    // Integer part: `0` or a non-zero digit then digits.
    let int_start = at;
    match bytes.get(at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => {
            while matches!(bytes.get(at), Some(b'0'..=b'9')) {
                at += 1;
            }
        }
        _ => return None,
    }
    let int_end = at;
    let mut frac = (at, at);
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        let frac_start = at;
        while matches!(bytes.get(at), Some(b'0'..=b'9')) {
            at += 1;
        }
        if at == frac_start {
            return None;
        }
        frac = (frac_start, at);
    }
    let mut has_exponent = false;
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        has_exponent = true;
        at += 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let exp_start = at;
        while matches!(bytes.get(at), Some(b'0'..=b'9')) {
            at += 1;
        }
        if at == exp_start {
            return None;
        }
    }
    let int_digits = &bytes[int_start..int_end];
    let frac_digits = &bytes[frac.0..frac.1];
    if !has_exponent && frac_digits.is_empty() {
        // An integer, read as one first, as serde reads it.
        if let Some(value) = integer(int_digits, negative) {
            return Some((value, at));
        }
    } else if !has_exponent && int_digits.len() + frac_digits.len() <= 19 {
        // m / 10^k with m < 2^53 and k <= 22: both exact, one correctly
        // rounded division.
        let m = digits_value(int_digits).and_then(|i| append_digits(i, frac_digits))?;
        if m < (1 << 53) && frac_digits.len() < POW10.len() {
            let value = m as f64 / POW10[frac_digits.len()];
            return Some((if negative { -value } else { value }, at));
        }
    }
    // Anything else: the standard library's correctly rounded parse.
    let text = std::str::from_utf8(&bytes[start..at]).ok()?;
    text.parse::<f64>().ok().map(|value| (value, at))
}

/// Decimal digits as a `u64`; `None` on overflow.
fn digits_value(digits: &[u8]) -> Option<u64> {
    append_digits(0, digits)
}

/// `value` followed by the decimal `digits`; `None` on overflow.
fn append_digits(value: u64, digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(value, |acc, d| acc.checked_mul(10)?.checked_add(u64::from(d - b'0')))
}

/// An integer token as serde reads it: a `u64`, or an `i64` when
/// negative, converted to `f64`; `None` when it fits neither.
fn integer(digits: &[u8], negative: bool) -> Option<f64> {
    let magnitude = digits_value(digits)?;
    if !negative {
        return Some(magnitude as f64);
    }
    if magnitude == 0 {
        return Some(-0.0); // serde reads `-0` as a float, negative zero
    }
    if magnitude <= i64::MAX as u64 {
        return Some(-(magnitude as i64) as f64);
    }
    (magnitude == i64::MIN.unsigned_abs()).then_some(i64::MIN as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v2::json_data::parse_walked;
    use serde_json::value::RawValue;
    use switchyard_runtime::tensor::TensorData;

    /// The general walk's bytes for `text`, or its error.
    fn general(text: &str, dtype: DataType, count: usize) -> Result<Vec<u8>, String> {
        let raw: Box<RawValue> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match parse_json_data_general(&raw, dtype, count) {
            Ok(TensorData::Fixed(b)) => Ok(b.to_vec()),
            Ok(other) => Err(format!("{other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    fn parse_json_data_general(
        raw: &RawValue,
        dtype: DataType,
        count: usize,
    ) -> Result<TensorData, crate::v2::V2Error> {
        parse_walked("x", dtype, &[count], count, raw)
    }

    #[test]
    fn agrees_with_the_general_walk_on_every_kind_of_number() {
        let numbers = [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1",
            "-1",
            "5.0",
            "13.0",
            "0.1",
            "0.2",
            "0.30000000000000004",
            "3.14159",
            "-2.5e-3",
            "1e10",
            "1E+2",
            "6.02214076e23",
            "1.7976931348623157e308",
            "4.9e-324",
            "123456789012345678",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "0.000001",
            "99999999999999999999.5",
            "3.4028235e38",
            "1.00000017881393432617187499",
            "0.1000000000000000055511151231257827",
            "9007199254740993",
            "2.2250738585072014e-308",
        ];
        for dtype in [DataType::F32, DataType::F64] {
            for n in numbers {
                let text = format!("[{n}]");
                let fast = flat_floats(&text, dtype, 1);
                let slow = general(&text, dtype, 1);
                match (fast, slow) {
                    (Some(f), Ok(s)) => assert_eq!(f, s, "{n} as {dtype:?}"),
                    (None, Err(_)) => {}
                    (f, s) => panic!("{n} as {dtype:?}: fast {f:?}, general {s:?}"),
                }
            }
        }
    }

    #[test]
    fn agrees_with_the_general_walk_on_many_generated_numbers() {
        // A fixed xorshift stream of bit patterns, printed the ways clients
        // print floats (shortest, fixed digits, exponent).
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut texts = Vec::new();
        for _ in 0..4000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let wide = f64::from_bits(state);
            let narrow = f32::from_bits((state >> 32) as u32);
            for value in [wide, f64::from(narrow), (state % 100_000) as f64 / 1000.0] {
                if value.is_finite() {
                    texts.extend([format!("{value}"), format!("{value:e}"), format!("{value:.7}")]);
                }
            }
        }
        for dtype in [DataType::F32, DataType::F64] {
            for chunk in texts.chunks(64) {
                let text = format!("[{}]", chunk.join(","));
                let fast = flat_floats(&text, dtype, chunk.len());
                let slow = general(&text, dtype, chunk.len());
                match (fast, slow) {
                    (Some(f), Ok(s)) => assert_eq!(f, s, "{text} as {dtype:?}"),
                    (None, Err(_)) => {}
                    (f, s) => panic!("{text} as {dtype:?}: fast {:?}, general {s:?}", f.map(|f| f.len())),
                }
            }
        }
    }

    #[test]
    fn a_typical_row_reads_like_the_general_walk() {
        let row: Vec<String> = (0..64).map(|i| format!("{}.{}", i % 17, i % 10)).collect();
        let text = format!("[ {} ]", row.join(" , "));
        for dtype in [DataType::F32, DataType::F64] {
            assert_eq!(flat_floats(&text, dtype, 64).unwrap(), general(&text, dtype, 64).unwrap());
        }
        assert_eq!(flat_floats("[]", DataType::F32, 0).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn anything_else_is_left_to_the_general_walk() {
        for text in [
            "[[1,2],[3,4]]",
            "[1,2,3]",
            "[1,\"2\",3,4]",
            "[1,null,3,4]",
            "[1,2,3,4,5]",
            "[1,2,3",
            "[1,2,3,4] x",
            "[1,2,,4]",
            "[01,2,3,4]",
            "[1.,2,3,4]",
            "[.5,2,3,4]",
            "[+1,2,3,4]",
            "[1e,2,3,4]",
            "[1,2,3,4e40]",
            "{\"a\":1}",
            "7",
            "[1 2,3,4]",
            "[-,2,3,4]",
            "[NaN,2,3,4]",
            "[true,2,3,4]",
        ] {
            assert!(flat_floats(text, DataType::F32, 4).is_none(), "{text}");
        }
        assert!(flat_floats("[1,2,3,4]", DataType::I64, 4).is_none(), "integers keep the general walk");
        // 4e40 fits FP64, not FP32: the general walk words the FP32 error.
        assert!(flat_floats("[1,2,3,4e40]", DataType::F64, 4).is_some());
        assert!(general("[1,2,3,4e40]", DataType::F32, 4).unwrap_err().contains("out of range"));
    }
}
