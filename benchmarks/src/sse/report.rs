//! Percentiles and the side-by-side table of one `sse-bench` run.

use serde::Serialize;
use std::time::Duration;

/// Latencies of one kind of call.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Samples {
    micros: Vec<u64>,
}

impl Samples {
    /// Adds one latency.
    pub fn push(&mut self, d: Duration) {
        self.micros.push(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.micros.is_empty()
    }

    /// The `q` quantile (0..=1) in milliseconds, nearest rank; NaN if empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.micros.is_empty() {
            return f64::NAN;
        }
        let mut sorted = self.micros.clone();
        sorted.sort_unstable();
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1] as f64 / 1000.0
    }
}

/// One concurrency level's results.
#[derive(Debug, Clone, Serialize)]
pub struct Level {
    /// Concurrent clients.
    pub concurrency: usize,
    /// The cheap model alone (plain calls).
    pub cheap: Samples,
    /// The heavy model alone (plain calls).
    pub heavy: Samples,
    /// Streams: time to the draft event.
    pub draft: Samples,
    /// Streams: time to the final event.
    pub last: Samples,
    /// Streams whose final came before any draft.
    pub no_draft: usize,
}

impl Level {
    /// An empty level.
    pub fn new(concurrency: usize) -> Level {
        Level {
            concurrency,
            cheap: Samples::default(),
            heavy: Samples::default(),
            draft: Samples::default(),
            last: Samples::default(),
            no_draft: 0,
        }
    }

    /// One progress line.
    pub fn line(&self) -> String {
        format!(
            "c={:<3} cheap p50 {:.3} ms | heavy p50 {:.3} ms | draft p50 {:.3} ms | final p50 {:.3} ms",
            self.concurrency,
            self.cheap.quantile_ms(0.5),
            self.heavy.quantile_ms(0.5),
            self.draft.quantile_ms(0.5),
            self.last.quantile_ms(0.5),
        )
    }
}

/// The Markdown table: p50/p99 of each kind and the two ratios the goal
/// is stated in (draft vs cheap alone, final vs heavy alone).
pub fn table(levels: &[Level]) -> String {
    let mut out = String::from(
        "| streams | cheap alone p50 / p99 | draft p50 / p99 | draft / cheap (p50, p99) \
         | heavy alone p50 / p99 | final p50 / p99 | final / heavy (p50, p99) | streams / no draft |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let pair = |s: &Samples| format!("{:.3} / {:.3} ms", s.quantile_ms(0.5), s.quantile_ms(0.99));
    let ratio = |a: &Samples, b: &Samples| {
        format!(
            "{:.2}, {:.2}",
            a.quantile_ms(0.5) / b.quantile_ms(0.5),
            a.quantile_ms(0.99) / b.quantile_ms(0.99)
        )
    };
    for l in levels {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} |\n",
            l.concurrency,
            pair(&l.cheap),
            pair(&l.draft),
            ratio(&l.draft, &l.cheap),
            pair(&l.heavy),
            pair(&l.last),
            ratio(&l.last, &l.heavy),
            l.last.len(),
            l.no_draft,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let mut s = Samples::default();
        for ms in 1..=100 {
            s.push(Duration::from_millis(ms));
        }
        assert_eq!(s.quantile_ms(0.5), 50.0);
        assert_eq!(s.quantile_ms(0.99), 99.0);
        assert!(Samples::default().quantile_ms(0.5).is_nan());
    }
}
