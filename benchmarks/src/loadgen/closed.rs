//! Closed loop: each virtual client owns one keep-alive connection and sends
//! its next request as soon as the previous response is complete.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::{Conn, Outcome};
use super::error::Result;
use super::stats::Recorder;
use super::RunCtx;

/// Pause after a connection error so a refused port does not turn into a busy loop.
const ERROR_BACKOFF: Duration = Duration::from_millis(10);

/// Results of a closed-loop run.
#[derive(Debug)]
pub struct ClosedResult {
    /// Merged measurements.
    pub rec: Recorder,
    /// End of the measured window used for throughput (the later of this and the last completion).
    pub nominal_end: Instant,
    /// Whether the request limit ended the run before the window's end.
    pub limit_hit: bool,
}

async fn worker(mut conn: Conn, ctx: Arc<RunCtx>, tickets: Arc<AtomicU64>) -> Result<Recorder> {
    let mut rec = Recorder::new()?;
    let phases = ctx.phases;
    loop {
        let start = Instant::now();
        if start >= phases.end {
            break;
        }
        let measured = start >= phases.measure_start;
        if measured {
            if let Some(limit) = ctx.limit {
                if tickets.fetch_add(1, Ordering::Relaxed) >= limit {
                    break;
                }
            }
        }
        let outcome = conn.send(ctx.template.build(), ctx.timeout).await;
        let done = Instant::now();
        ctx.live.note(outcome);
        if measured {
            rec.record(outcome, done - start, done);
        }
        if outcome.is_success() && done >= phases.measure_start && done <= phases.end {
            rec.ok_in_window += 1;
        }
        if outcome == Outcome::ConnError {
            tokio::time::sleep(ERROR_BACKOFF).await;
        }
    }
    Ok(rec)
}

/// Runs one worker per connection until the end of the run or the request limit.
pub async fn run(ctx: Arc<RunCtx>, conns: Vec<Conn>) -> Result<ClosedResult> {
    let tickets = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> =
        conns.into_iter().map(|c| tokio::spawn(worker(c, Arc::clone(&ctx), Arc::clone(&tickets)))).collect();
    let rec = super::join_all(handles).await?;
    let limit_hit = ctx.limit.is_some_and(|l| tickets.load(Ordering::Relaxed) >= l);
    let nominal_end = if limit_hit { ctx.phases.measure_start } else { ctx.phases.end };
    Ok(ClosedResult { rec, nominal_end, limit_hit })
}
