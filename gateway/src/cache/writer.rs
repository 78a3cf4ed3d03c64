//! Background L2 writes: the request path puts a [`WriteJob`] on a bounded
//! channel and returns at once; one writer task sends the `SET`s. When the
//! channel is full the write is dropped and counted: a lost L2 write only
//! costs a later miss, while waiting would delay responses.
//!
//! At shutdown, [`Writer::flush_blocking`] sends what is still queued on a
//! fresh connection, best effort, until a deadline; or, when the server
//! stopped before its runtimes did (a drain that finished early), waits
//! for the writer task to empty the queue.

use super::l2::{set_command, Connection, L2};
use super::stats::CacheStats;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Mutex};

/// One value to store in L2.
#[derive(Debug, Clone)]
pub struct WriteJob {
    /// The Redis key (namespace included).
    pub redis_key: String,
    /// The encoded answer.
    pub value: Bytes,
    /// The route's `l2_ttl_s`.
    pub ttl: Duration,
    /// A fleet-coalescing marker to delete once the value is written (the
    /// replicas waiting on it then read the value, see [`super::fleet`]).
    pub release: Option<String>,
}

/// The queue between requests and the writer task.
pub struct Writer {
    tx: mpsc::Sender<WriteJob>,
    rx: Arc<Mutex<mpsc::Receiver<WriteJob>>>,
    stats: Arc<CacheStats>,
    /// Writes queued or being sent.
    pending: AtomicUsize,
}

impl Writer {
    /// A queue holding at most `capacity` pending writes.
    pub fn new(capacity: usize, stats: Arc<CacheStats>) -> Writer {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        Writer { tx, rx: Arc::new(Mutex::new(rx)), stats, pending: AtomicUsize::new(0) }
    }

    /// Queues a write without waiting; drops (and counts) it when full.
    pub fn enqueue(&self, job: WriteJob) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.tx.try_send(job).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            CacheStats::bump(&self.stats.l2_writes_dropped);
        }
    }

    /// The writer loop: runs until the process stops (its runtime is shut
    /// down). Writes refused by the breaker are dropped and counted.
    pub async fn run(&self, l2: &L2) {
        let mut rx = self.rx.lock().await;
        while let Some(job) = rx.recv().await {
            let written = match &job.release {
                Some(marker) => {
                    super::fleet::store_and_release(l2, &job.redis_key, &job.value, job.ttl, marker).await
                }
                None => l2.set(&job.redis_key, &job.value, job.ttl).await,
            };
            if written {
                CacheStats::bump(&self.stats.l2_writes);
            } else {
                CacheStats::bump(&self.stats.l2_writes_dropped);
            }
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Sends the queued writes on a fresh connection and a private
    /// runtime (the server's runtimes are gone at this point), stopping at
    /// `deadline`. Returns how many were written.
    pub fn flush_blocking(&self, l2: &L2, deadline: Duration) -> usize {
        let started = Instant::now();
        let Ok(mut rx) = self.rx.try_lock() else {
            self.wait_for_writer(started + deadline);
            return 0;
        };
        let mut jobs = Vec::new();
        while let Ok(job) = rx.try_recv() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            jobs.push(job);
        }
        if jobs.is_empty() {
            return 0;
        }
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!(error = %e, "no runtime to flush L2 writes");
                return 0;
            }
        };
        let pending = jobs.len();
        let mut written = 0usize;
        runtime.block_on(async {
            let remaining = deadline.saturating_sub(started.elapsed());
            let flush = async {
                let Ok(mut conn) = Connection::open(l2.config()).await else { return };
                for job in jobs {
                    let cmd = set_command(&job.redis_key, &job.value, job.ttl);
                    if conn.query::<()>(&cmd).await.is_ok() {
                        written += 1;
                    }
                }
            };
            // Best effort: what is not written by the deadline is lost.
            let _ = tokio::time::timeout(remaining, flush).await;
        });
        self.stats.l2_writes.fetch_add(written as u64, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(pending, written, "flushed pending L2 writes at shutdown");
        written
    }

    /// Waits until the running writer task has sent everything queued, or
    /// until `until`.
    fn wait_for_writer(&self, until: Instant) {
        loop {
            let pending = self.pending.load(Ordering::SeqCst);
            if pending == 0 {
                tracing::info!("pending L2 writes sent by the writer before shutdown");
                return;
            }
            if Instant::now() >= until {
                tracing::warn!(pending, "L2 writes still pending at the shutdown deadline; lost");
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
