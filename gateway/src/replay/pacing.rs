//! When each call of a replay at the recorded pace (`--pace recorded`)
//! starts: its recorded arrival's offset from the earliest call, divided
//! by `--speed`.
//!
//! A replay that would take longer than [`MAX_PACED`] is refused before
//! anything runs, naming the line that arrives last: a sample with a
//! wrong `arrived_ms` (a jump of 10^12 ms, a value near 2^64) or a tiny
//! `--speed` (1e-300) would otherwise wait for ever, or overflow the
//! conversion to a `Duration` and panic.

use std::time::Duration;

/// Longest a paced replay may take: a week.
pub const MAX_PACED: Duration = Duration::from_secs(7 * 24 * 3600);

/// One call's place in the sample: its line and recorded arrival (ms since
/// the Unix epoch).
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    /// The line's number in its file.
    pub line: usize,
    /// `arrived_ms` as recorded.
    pub arrived_ms: u64,
}

/// Each call's start, from the replay's start, in the calls' order; an
/// error when `speed` is not a positive number or the replay would take
/// longer than [`MAX_PACED`].
pub fn offsets(arrivals: &[Arrival], speed: f64) -> Result<Vec<Duration>, String> {
    if !(speed.is_finite() && speed > 0.0) {
        return Err(format!("--speed must be a positive number, got {speed}"));
    }
    let Some(first) = arrivals.iter().min_by_key(|a| a.arrived_ms) else { return Ok(Vec::new()) };
    let seconds = |a: &Arrival| (a.arrived_ms - first.arrived_ms) as f64 / 1e3 / speed;
    if let Some(last) = arrivals.iter().max_by_key(|a| a.arrived_ms) {
        let wait = seconds(last);
        if wait > MAX_PACED.as_secs_f64() {
            return Err(format!(
                "line {} arrived {} ms after the earliest call (line {}): at --speed {speed} the replay would wait {wait:.3e} s for it, more than {} days; pass a larger --speed, use --pace fast, or remove lines whose arrived_ms is wrong",
                last.line,
                last.arrived_ms - first.arrived_ms,
                first.line,
                MAX_PACED.as_secs() / 86_400,
            ));
        }
    }
    arrivals
        .iter()
        .map(|a| Duration::try_from_secs_f64(seconds(a)).map_err(|e| format!("line {}: {e}", a.line)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: &[u64]) -> Vec<Arrival> {
        ms.iter().enumerate().map(|(i, &arrived_ms)| Arrival { line: i + 1, arrived_ms }).collect()
    }

    #[test]
    fn offsets_are_from_the_earliest_call_divided_by_the_speed() {
        let got = offsets(&at(&[2_000, 1_000, 5_000]), 2.0).unwrap();
        assert_eq!(got, [Duration::from_millis(500), Duration::ZERO, Duration::from_secs(2)]);
        assert_eq!(offsets(&[], 1.0).unwrap(), Vec::<Duration>::new());
        assert_eq!(offsets(&at(&[u64::MAX, u64::MAX]), 1e-300).unwrap(), [Duration::ZERO; 2]);
    }

    #[test]
    fn a_replay_that_would_wait_for_ever_is_refused_naming_the_line() {
        let now = 1_764_000_000_000;
        for (arrivals, speed) in [
            (at(&[now, now + 10]), 1e-300),
            (at(&[now, now + 1_000_000_000_000, now + 20]), 1.0),
            (at(&[now, u64::MAX]), 1.0),
            (at(&[u64::MAX, 0]), 1.0),
        ] {
            let err = offsets(&arrivals, speed).unwrap_err();
            assert!(err.contains("line ") && err.contains("--speed"), "{err}");
        }
        let err = offsets(&at(&[now, now + 1_000_000_000_000, now + 20]), 1.0).unwrap_err();
        assert!(err.starts_with("line 2 "), "{err}");
        for speed in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(offsets(&at(&[1, 2]), speed).is_err());
        }
    }
}
