//! Open loop: requests are due at fixed intended times `t0 + i / rate`; a
//! free connection takes the next due request, and latency is measured from
//! the intended send time, so waiting for a connection (client-side
//! queueing) is counted instead of hidden (coordinated-omission corrected).
//!
//! Tokio's timer has millisecond resolution and rounds deadlines up, so a
//! request due less than [`EARLY_SEND`] from now is sent at once instead of
//! sleeping (otherwise every request would pay up to a millisecond and the
//! connections could not keep up at high rates). Such a request's latency is
//! measured from its actual send time: the start of a request is the earlier
//! of its intended and actual send times.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::Conn;
use super::error::Result;
use super::stats::{micros, Recorder};
use super::RunCtx;

/// How early a request may be sent rather than sleeping for less than a timer tick.
pub const EARLY_SEND: Duration = Duration::from_millis(1);

/// The request schedule: request `i` is due `i / rate` seconds after `t0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Requests per second.
    pub rate: f64,
    /// Index of the first measured request (those before are warm-up).
    pub first_measured: u64,
    /// One past the index of the last scheduled request.
    pub end: u64,
}

impl Schedule {
    /// Schedule for `warmup` then `duration` at `rate`, at most `limit` measured requests.
    pub fn new(rate: f64, warmup: Duration, duration: Duration, limit: Option<u64>) -> Self {
        // Request i is in a phase [a, b) when a <= i / rate < b, i.e. ceil(a * rate) <= i < ceil(b * rate).
        let first_measured = (warmup.as_secs_f64() * rate).ceil() as u64;
        let mut end = ((warmup + duration).as_secs_f64() * rate).ceil() as u64;
        if let Some(limit) = limit {
            end = end.min(first_measured.saturating_add(limit));
        }
        Schedule { rate, first_measured, end: end.max(first_measured) }
    }

    /// Intended send time of request `i`, relative to `t0`.
    pub fn offset(&self, i: u64) -> Duration {
        Duration::from_secs_f64(i as f64 / self.rate)
    }

    /// Whether request `i` is measured (not warm-up).
    pub fn is_measured(&self, i: u64) -> bool {
        i >= self.first_measured && i < self.end
    }

    /// Number of measured requests scheduled.
    pub fn measured(&self) -> u64 {
        self.end - self.first_measured
    }

    /// Length of the measured part of the schedule.
    pub fn window(&self) -> Duration {
        Duration::from_secs_f64(self.measured() as f64 / self.rate)
    }
}

/// Results of an open-loop run.
#[derive(Debug)]
pub struct OpenResult {
    /// Merged measurements (latency from intended send time).
    pub rec: Recorder,
    /// The schedule that was followed.
    pub schedule: Schedule,
    /// Measured requests actually sent.
    pub sent: u64,
    /// End of the measured window used for throughput (the later of this and the last completion).
    pub nominal_end: Instant,
}

async fn worker(
    mut conn: Conn,
    ctx: Arc<RunCtx>,
    sched: Schedule,
    next: Arc<AtomicU64>,
) -> Result<(Recorder, u64)> {
    let mut rec = Recorder::new()?;
    let mut sent = 0_u64;
    let t0 = ctx.phases.t0;
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= sched.end {
            break;
        }
        let intended = t0 + sched.offset(i);
        let now = Instant::now();
        if now >= ctx.phases.end {
            // Behind schedule at the end of the run: the rest stays unsent (reported).
            break;
        }
        if intended > now + EARLY_SEND {
            tokio::time::sleep_until((intended - EARLY_SEND).into()).await;
        }
        let sent_at = Instant::now();
        let start = intended.min(sent_at);
        let outcome = conn.send(ctx.template.build(), ctx.timeout).await;
        let done = Instant::now();
        ctx.live.note(outcome);
        if sched.is_measured(i) {
            sent += 1;
            rec.send_lag.saturating_record(micros(sent_at.saturating_duration_since(intended)).max(1));
            rec.record(outcome, done.saturating_duration_since(start), done);
        }
    }
    Ok((rec, sent))
}

/// Follows the schedule over the given connections until it is exhausted or the run ends.
pub async fn run(ctx: Arc<RunCtx>, conns: Vec<Conn>, sched: Schedule) -> Result<OpenResult> {
    let next = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(conns.len());
    for conn in conns {
        handles.push(tokio::spawn(worker(conn, Arc::clone(&ctx), sched, Arc::clone(&next))));
    }
    let mut rec = Recorder::new()?;
    let mut sent = 0;
    for h in handles {
        let (r, s) = h.await.map_err(|e| super::LoadgenError::Join(e.to_string()))??;
        rec.merge(&r)?;
        sent += s;
    }
    let nominal_end = ctx.phases.measure_start + sched.window();
    Ok(OpenResult { rec, schedule: sched, sent, nominal_end })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_counts() {
        let s = Schedule::new(1000.0, Duration::from_secs(1), Duration::from_secs(2), None);
        assert_eq!(s.first_measured, 1000);
        assert_eq!(s.end, 3000);
        assert_eq!(s.measured(), 2000);
        assert_eq!(s.window(), Duration::from_secs(2));
        assert!(!s.is_measured(999));
        assert!(s.is_measured(1000));
        assert!(s.is_measured(2999));
        assert!(!s.is_measured(3000));
        assert_eq!(s.offset(0), Duration::ZERO);
        assert_eq!(s.offset(1500), Duration::from_millis(1500));
    }

    #[test]
    fn schedule_fractional_and_limit() {
        // 3 req/s for 1 s: due at 0, 1/3, 2/3.
        let s = Schedule::new(3.0, Duration::ZERO, Duration::from_secs(1), None);
        assert_eq!((s.first_measured, s.end), (0, 3));
        // 2.5 req/s, 1 s warm-up (0, 0.4, 0.8 -> 3 warm-up), 1 s measured (1.2, 1.6).
        let s = Schedule::new(2.5, Duration::from_secs(1), Duration::from_secs(1), None);
        assert_eq!((s.first_measured, s.end), (3, 5));
        let s = Schedule::new(1000.0, Duration::from_secs(1), Duration::from_secs(10), Some(50));
        assert_eq!((s.first_measured, s.end, s.measured()), (1000, 1050, 50));
        assert_eq!(s.window(), Duration::from_millis(50));
        let offsets: Vec<_> = (0..4).map(|i| s.offset(i)).collect();
        assert!(offsets.windows(2).all(|w| w[1] - w[0] == Duration::from_millis(1)));
    }
}
