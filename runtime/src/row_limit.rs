//! How many rows one batch of a pool may hold: `max_batch_size`, and for a
//! text model also `max_batch_tokens` divided by the batch's length bucket.
//!
//! Why: a transformer's cost per token on a CPU falls until a batch holds
//! a few hundred tokens, stays flat, then grows (likely the activations
//! outgrowing the caches). All-MiniLM-L6 int8 on one EPYC core: the same
//! per text from 16 to 64 texts of 16 tokens, 8% more at 64 texts of 32
//! tokens, 28% more at 128 (benchmarks/NOTES.md). A fixed row count is
//! then too small for short texts or too large for long ones, and a wide
//! batch holds the requests queued behind it longer. A token budget sizes
//! each bucket's batches by what they cost.
//!
//! A text request's queue entries carry their bucket as their group
//! (`[[bucket]]`, see `crate::repository`), so the limit is read from the
//! group; the bucket is the upper bound of the batch's padded length. A
//! single request larger than the limit still runs, alone.

/// The row limit of one pool's batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLimit {
    max_rows: usize,
    max_tokens: Option<usize>,
}

impl RowLimit {
    /// `max_rows` rows per batch (1: no batching); `max_tokens` padded
    /// tokens per batch, only for a text model's pool.
    pub fn new(max_rows: usize, max_tokens: Option<usize>) -> Self {
        RowLimit { max_rows: max_rows.max(1), max_tokens }
    }

    /// Whether requests may share a batch at all.
    pub fn batches(&self) -> bool {
        self.max_rows > 1
    }

    /// The most rows a batch of `group`'s entries may hold (at least 1).
    pub fn for_group(&self, group: &[Vec<usize>]) -> usize {
        match (self.max_tokens, group) {
            (Some(tokens), [bucket]) if bucket.len() == 1 && bucket[0] > 0 => {
                (tokens / bucket[0]).clamp(1, self.max_rows)
            }
            _ => self.max_rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_budget_sizes_batches_by_bucket() {
        let limit = RowLimit::new(64, Some(1024));
        assert_eq!(limit.for_group(&[vec![16]]), 64);
        assert_eq!(limit.for_group(&[vec![32]]), 32);
        assert_eq!(limit.for_group(&[vec![128]]), 8);
        assert_eq!(limit.for_group(&[vec![4096]]), 1, "one request at least");
        assert_eq!(RowLimit::new(16, Some(1024)).for_group(&[vec![16]]), 16, "never past max_batch_size");
    }

    #[test]
    fn without_a_budget_or_a_bucket_rows_alone_limit() {
        assert_eq!(RowLimit::new(32, None).for_group(&[vec![16]]), 32);
        assert_eq!(RowLimit::new(32, Some(1024)).for_group(&[vec![3, 4]]), 32, "not a bucket");
        assert_eq!(RowLimit::new(32, Some(1024)).for_group(&[]), 32);
        assert!(!RowLimit::new(0, Some(1024)).batches());
        assert_eq!(RowLimit::new(1, Some(1024)).for_group(&[vec![16]]), 1);
    }
}
