//! Secrets (the admin token, API keys) kept only as blake3 digests and
//! compared in constant time.
//!
//! Why digests: the plain secret is dropped once the config is checked, so
//! it can never reach a log line, a `Debug` dump or `/admin/config`; and
//! comparing two fixed-length digests leaks neither the secret's length
//! nor, through timing, how many leading bytes of a guess were right.

use std::fmt;

/// The digest of a secret. `Debug` prints `[redacted]`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SecretDigest([u8; 32]);

impl SecretDigest {
    /// The digest of `secret`.
    pub fn of(secret: &[u8]) -> SecretDigest {
        SecretDigest(*blake3::hash(secret).as_bytes())
    }

    /// True when `candidate` is the secret, compared in constant time.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        constant_time_eq(&self.0, blake3::hash(candidate).as_bytes())
    }

    /// The raw digest bytes, for lookups keyed by digest (see
    /// [`super::KeySet`]).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for SecretDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Equality of two digests whose running time does not depend on where
/// they differ: every byte is examined, differences are OR-ed together.
pub fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        diff |= x ^ y;
    }
    // Keep the optimiser from turning the loop into an early-exit compare.
    std::hint::black_box(diff) == 0
}

/// A secret as written in the config file; `Debug` prints `[redacted]`,
/// so a dump of the raw config never shows it.
#[derive(Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct RawSecret(pub String);

impl fmt::Debug for RawSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_secret() {
        let digest = SecretDigest::of(b"correct horse battery staple");
        assert!(digest.matches(b"correct horse battery staple"));
        assert!(!digest.matches(b"correct horse battery stapler"));
        assert!(!digest.matches(b"correct horse battery staplf"));
        assert!(!digest.matches(b""));
        assert!(!digest.matches(b"Correct horse battery staple"));
    }

    #[test]
    fn constant_time_eq_compares_every_byte() {
        let a = [7u8; 32];
        let mut b = a;
        assert!(constant_time_eq(&a, &b));
        for i in [0, 15, 31] {
            b = a;
            b[i] ^= 1;
            assert!(!constant_time_eq(&a, &b), "difference at byte {i}");
        }
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let text =
            format!("{:?} {:?}", SecretDigest::of(b"hunter2hunter2"), RawSecret("hunter2hunter2".into()));
        assert_eq!(text, "[redacted] [redacted]");
    }
}
