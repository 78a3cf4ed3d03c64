//! Byte sizes in config: an integer number of bytes, or a string with a
//! binary unit such as `"64MiB"`.

use schemars::JsonSchema;
use serde::Deserialize;

/// A size in bytes, written in config as `1048576`, `"512KiB"`, `"64MiB"`
/// or `"1GiB"` (also `KB`/`MB`/`GB` as powers of ten).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(try_from = "SizeRepr")]
pub struct ByteSize(pub u64);

#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum SizeRepr {
    Int(u64),
    Text(String),
}

impl TryFrom<SizeRepr> for ByteSize {
    type Error = String;

    fn try_from(repr: SizeRepr) -> Result<Self, Self::Error> {
        match repr {
            SizeRepr::Int(n) => Ok(ByteSize(n)),
            SizeRepr::Text(s) => parse_size(&s).map(ByteSize),
        }
    }
}

/// Parses `"64MiB"`-style sizes; the error says what was expected.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 =
        digits.parse().map_err(|_| format!("invalid size {text:?}: expected e.g. \"64MiB\""))?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => return Err(format!("unknown size unit {other:?} in {text:?}: use B, KiB, MiB or GiB")),
    };
    number.checked_mul(factor).ok_or_else(|| format!("size {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("10"), Ok(10));
        assert_eq!(parse_size("2 GiB"), Ok(2 << 30));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999999999999GiB").is_err());
    }
}
