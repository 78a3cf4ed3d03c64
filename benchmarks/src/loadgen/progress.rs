//! One progress line per second on stderr while a run is going.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::stats::{Live, Phases};

/// Formats one progress line.
pub fn line(elapsed: Duration, warmup: bool, done: u64, rate: f64, errors: u64) -> String {
    let phase = if warmup { " (warm-up)" } else { "" };
    format!(
        "[{:>6.1}s] requests {done:>9}  rate {rate:>9.0}/s  errors {errors}{phase}",
        elapsed.as_secs_f64()
    )
}

/// Starts printing progress every second; abort the returned task to stop it.
pub fn spawn(live: Arc<Live>, phases: Phases) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut prev_done = 0_u64;
        let mut prev_at = phases.t0;
        let mut tick =
            tokio::time::interval_at((phases.t0 + Duration::from_secs(1)).into(), Duration::from_secs(1));
        loop {
            tick.tick().await;
            let now = Instant::now();
            let done = live.done.load(Ordering::Relaxed);
            let errors = live.errors.load(Ordering::Relaxed);
            let dt = now.duration_since(prev_at).as_secs_f64().max(1e-9);
            let rate = (done - prev_done) as f64 / dt;
            eprintln!(
                "{}",
                line(now.duration_since(phases.t0), now < phases.measure_start, done, rate, errors)
            );
            prev_done = done;
            prev_at = now;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format() {
        let l = line(Duration::from_millis(2500), true, 1234, 999.6, 3);
        assert_eq!(l, "[   2.5s] requests      1234  rate      1000/s  errors 3 (warm-up)");
    }
}
