//! Which versions of a model are served, as Triton's `version_policy`
//! says: the latest N (default: the latest one), all, or specific ones.

/// A model's version policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionPolicy {
    /// The `n` highest version numbers (Triton's default, `n = 1`).
    Latest(u32),
    /// Every version.
    All,
    /// Exactly these versions (those present).
    Specific(Vec<u64>),
}

impl Default for VersionPolicy {
    fn default() -> Self {
        VersionPolicy::Latest(1)
    }
}

/// The selection and what could not be honoured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VersionSelection {
    /// Selected versions, newest first.
    pub versions: Vec<u64>,
    /// Versions a `Specific` policy names that are not available.
    pub missing: Vec<u64>,
}

impl VersionPolicy {
    /// Applies the policy to the `available` versions (any order).
    pub fn select(&self, available: &[u64]) -> VersionSelection {
        let mut newest_first: Vec<u64> = available.to_vec();
        newest_first.sort_unstable_by(|a, b| b.cmp(a));
        newest_first.dedup();
        match self {
            VersionPolicy::Latest(n) => {
                newest_first.truncate((*n).max(1) as usize);
                VersionSelection { versions: newest_first, missing: Vec::new() }
            }
            VersionPolicy::All => VersionSelection { versions: newest_first, missing: Vec::new() },
            VersionPolicy::Specific(wanted) => {
                let versions = newest_first.iter().copied().filter(|v| wanted.contains(v)).collect();
                let mut missing: Vec<u64> =
                    wanted.iter().copied().filter(|v| !available.contains(v)).collect();
                missing.sort_unstable();
                missing.dedup();
                VersionSelection { versions, missing }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_select_like_triton() {
        let available = [1, 3, 2, 10];
        assert_eq!(VersionPolicy::default().select(&available).versions, [10]);
        assert_eq!(VersionPolicy::Latest(2).select(&available).versions, [10, 3]);
        assert_eq!(VersionPolicy::Latest(9).select(&available).versions, [10, 3, 2, 1]);
        assert_eq!(VersionPolicy::All.select(&available).versions, [10, 3, 2, 1]);
        let specific = VersionPolicy::Specific(vec![2, 7, 1]).select(&available);
        assert_eq!((specific.versions, specific.missing), (vec![2, 1], vec![7]));
        assert!(VersionPolicy::Latest(1).select(&[]).versions.is_empty());
    }
}
