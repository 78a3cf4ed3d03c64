//! The bytes queued traffic records hold, bounded for all the writers of
//! a process together: a record is queued only while the records waiting
//! to be written hold less than [`QUEUE_BYTES`]; past it, it is dropped
//! and counted, as when the queue is full by count.
//!
//! Why: each queued record keeps its request's input data. Bounded by
//! count only, four clients repeating a 7.9 MB request filled the queue
//! with gigabytes while the writer encoded the first few.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Most bytes of input data (and parameters) that queued records hold,
/// all routes together.
pub const QUEUE_BYTES: usize = 32 << 20;

/// The bytes the queued records hold now, and their bound.
#[derive(Debug, Clone)]
pub struct QueueBytes {
    held: Arc<AtomicUsize>,
    max: usize,
}

impl Default for QueueBytes {
    fn default() -> Self {
        QueueBytes::new(QUEUE_BYTES)
    }
}

impl QueueBytes {
    /// A bound of `max` bytes.
    pub fn new(max: usize) -> QueueBytes {
        QueueBytes { held: Arc::new(AtomicUsize::new(0)), max }
    }

    /// Takes `bytes` for one record if they fit under the bound; the
    /// returned [`Held`] gives them back when the record is gone (written,
    /// failed or dropped).
    pub fn take(&self, bytes: usize) -> Option<Held> {
        let mut now = self.held.load(Ordering::Relaxed);
        loop {
            let after = now.checked_add(bytes).filter(|&after| after <= self.max)?;
            match self.held.compare_exchange_weak(now, after, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Some(Held { held: self.held.clone(), bytes }),
                Err(seen) => now = seen,
            }
        }
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// One queued record's share of [`QueueBytes`], given back on drop.
#[derive(Debug)]
pub struct Held {
    held: Arc<AtomicUsize>,
    bytes: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_taken_up_to_the_bound_and_given_back_on_drop() {
        let queue = QueueBytes::new(100);
        let a = queue.take(60).expect("fits");
        assert!(queue.take(41).is_none(), "60 + 41 > 100");
        let b = queue.take(40).expect("60 + 40 fits");
        assert_eq!(queue.held(), 100);
        drop(a);
        assert_eq!(queue.held(), 40);
        assert!(queue.take(usize::MAX).is_none(), "no overflow");
        drop(b);
        assert_eq!(queue.held(), 0);
    }
}
