//! Readers of small request fields shared by the request's validation
//! ([`super::request`]) and its first reading ([`super::raw_request`],
//! which needs an input's shape to decode its data in the same pass).

use serde_json::Value;

use super::error::V2Error;
use super::limits::DecodeLimits;

/// Parses a `shape` array of non-negative integers.
pub(crate) fn parse_shape(
    raw: Option<&Value>,
    context: &str,
    limits: &DecodeLimits,
) -> Result<Vec<usize>, V2Error> {
    let Some(raw) = raw else {
        return Err(V2Error::MissingField { field: "shape", context: context.to_owned() });
    };
    let Value::Array(dims) = raw else {
        return Err(V2Error::InvalidField {
            field: "shape",
            context: context.to_owned(),
            reason: "must be an array of non-negative integers".to_owned(),
        });
    };
    if dims.len() > limits.max_rank {
        return Err(V2Error::TooLarge(format!(
            "{context} has {} dimensions, the limit is {}",
            dims.len(),
            limits.max_rank
        )));
    }
    dims.iter()
        .map(|d| {
            whole_number(d).ok_or_else(|| V2Error::InvalidField {
                field: "shape",
                context: context.to_owned(),
                reason: format!("{d} is not a non-negative integer"),
            })
        })
        .collect()
}

/// A non-negative whole JSON number (`3`, `3.0`, `3e2`) as a `usize`;
/// `None` for anything else. JSON has one number type, so an integer may
/// come with a fraction part or an exponent (Python's `json.dumps(3.0)`,
/// JSON Schema's `integer`), as tensor elements already may
/// ([`super::json_data`]).
pub(crate) fn whole_number(value: &Value) -> Option<usize> {
    let whole = match value.as_u64() {
        Some(n) => n,
        // Below 2^64 the cast is exact; `-0.0` is 0.
        None => match value.as_f64() {
            Some(f) if f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&f) => f as u64,
            _ => return None,
        },
    };
    usize::try_from(whole).ok()
}
