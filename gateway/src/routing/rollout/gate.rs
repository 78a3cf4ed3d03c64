//! A rollout step's gate: pure, over one step's [`Comparison`].
//!
//! 1. Too little evidence (fewer than `min_rows` compared rows and fewer
//!    than `min_rows` candidate calls): wait.
//! 2. Fail, with every reason that holds, when
//!    - the agreement's 95% Wilson interval lies wholly below
//!      `min_agreement` (the candidate is worse, not merely unproven);
//!    - the candidate's p99 latency is above `max_p99_ratio` x live's;
//!    - the candidate's error rate is above `max_error_ratio` x live's
//!      (with no live errors, any candidate error fails).
//! 3. Pass when the interval lies wholly at or above `min_agreement`
//!    (with `min_agreement = 1`: every row agreed).
//! 4. Otherwise hold: the step keeps collecting rows.

use super::stats::Comparison;
use crate::config::candidate_section::GateConfig;
use serde::Serialize;

/// Why a gate failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "gate", rename_all = "snake_case")]
pub enum GateFailure {
    /// Agreement below the minimum, beyond doubt.
    Agreement {
        /// The point estimate.
        agreement: f64,
        /// The interval's upper end.
        upper: f64,
        /// The minimum.
        min: f64,
    },
    /// p99 latency too high against live.
    Latency {
        /// Candidate p99, ms.
        candidate_p99_ms: f64,
        /// Live p99, ms.
        live_p99_ms: f64,
        /// The largest ratio allowed.
        max_ratio: f64,
    },
    /// Error rate too high against live.
    Errors {
        /// Candidate error rate.
        candidate_rate: f64,
        /// Live error rate.
        live_rate: f64,
        /// The largest ratio allowed.
        max_ratio: f64,
    },
}

impl GateFailure {
    /// One line for the log and the rollback reason.
    pub fn describe(&self) -> String {
        match self {
            GateFailure::Agreement { agreement, upper, min } => {
                format!("agreement {agreement:.4} (95% interval up to {upper:.4}) is below the minimum {min}")
            }
            GateFailure::Latency { candidate_p99_ms, live_p99_ms, max_ratio } => format!(
                "latency p99 {candidate_p99_ms:.2} ms is above {max_ratio}x the live p99 {live_p99_ms:.2} ms"
            ),
            GateFailure::Errors { candidate_rate, live_rate, max_ratio } => format!(
                "error rate {candidate_rate:.4} is above {max_ratio}x the live error rate {live_rate:.4}"
            ),
        }
    }
}

/// A gate's verdict on a step.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Not enough rows yet.
    Wait,
    /// Enough rows, no failure, agreement not yet proven: keep collecting.
    Hold,
    /// The step holds: move on.
    Pass,
    /// Roll back, for these reasons.
    Fail(Vec<GateFailure>),
}

/// Judges one step (module docs).
pub fn judge(step: &Comparison, gate: &GateConfig, min_rows: u64) -> Verdict {
    if step.rows < min_rows && step.candidate.calls < min_rows {
        return Verdict::Wait;
    }
    let mut failures = Vec::new();
    let (low, high) = step.interval();
    if step.rows > 0 && high < gate.min_agreement {
        failures.push(GateFailure::Agreement {
            agreement: step.agreement().unwrap_or(0.0),
            upper: high,
            min: gate.min_agreement,
        });
    }
    let p99 = |side: &super::stats::Side| side.latency.quantile(0.99);
    if let (Some(c), Some(l)) = (p99(&step.candidate), p99(&step.live)) {
        if c > gate.max_p99_ratio * l {
            failures.push(GateFailure::Latency {
                candidate_p99_ms: c / 1000.0,
                live_p99_ms: l / 1000.0,
                max_ratio: gate.max_p99_ratio,
            });
        }
    }
    let (c_rate, l_rate) = (step.candidate.error_rate(), step.live.error_rate());
    if c_rate > gate.max_error_ratio * l_rate {
        failures.push(GateFailure::Errors {
            candidate_rate: c_rate,
            live_rate: l_rate,
            max_ratio: gate.max_error_ratio,
        });
    }
    if !failures.is_empty() {
        return Verdict::Fail(failures);
    }
    let proven = if gate.min_agreement >= 1.0 {
        step.rows > 0 && step.agreeing == step.rows
    } else {
        low >= gate.min_agreement
    };
    if proven {
        Verdict::Pass
    } else {
        Verdict::Hold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(rows: u64, agreeing: u64, live_ms: f64, candidate_ms: f64) -> Comparison {
        let mut c = Comparison { rows, agreeing, ..Comparison::default() };
        for _ in 0..rows / 10 {
            c.live.calls += 1;
            c.candidate.calls += 1;
            c.live.latency.add(live_ms * 1000.0);
            c.candidate.latency.add(candidate_ms * 1000.0);
        }
        c
    }

    const GATE: GateConfig = GateConfig { min_agreement: 0.99, max_p99_ratio: 1.2, max_error_ratio: 1.0 };

    #[test]
    fn too_few_rows_wait() {
        assert_eq!(judge(&step(150, 0, 1.0, 9.0), &GATE, 200), Verdict::Wait);
    }

    #[test]
    fn perfect_agreement_passes_once_the_interval_clears_the_minimum() {
        // 200 rows all agreeing: the lower end is 0.981, below 0.99.
        assert_eq!(judge(&step(200, 200, 1.0, 1.0), &GATE, 200), Verdict::Hold);
        // 400 rows: 0.9905.
        assert_eq!(judge(&step(400, 400, 1.0, 1.0), &GATE, 200), Verdict::Pass);
        let exact = GateConfig { min_agreement: 1.0, ..GATE };
        assert_eq!(judge(&step(200, 200, 1.0, 1.0), &exact, 200), Verdict::Pass);
        assert!(matches!(judge(&step(200, 199, 1.0, 1.0), &exact, 200), Verdict::Fail(_)));
    }

    #[test]
    fn a_share_of_disagreement_fails_on_agreement() {
        let Verdict::Fail(why) = judge(&step(300, 285, 1.0, 1.0), &GATE, 200) else { panic!("must fail") };
        assert!(matches!(why.as_slice(), [GateFailure::Agreement { min, .. }] if *min == 0.99), "{why:?}");
        // 197 of 200 is unproven, not failed: the interval reaches above 0.99.
        assert_eq!(judge(&step(200, 198, 1.0, 1.0), &GATE, 200), Verdict::Hold);
    }

    #[test]
    fn a_slow_or_failing_candidate_fails_its_gates() {
        let Verdict::Fail(why) = judge(&step(400, 400, 1.0, 5.0), &GATE, 200) else { panic!("must fail") };
        assert!(matches!(why.as_slice(), [GateFailure::Latency { .. }]), "{why:?}");
        assert!(why[0].describe().contains("latency p99"));
        let mut errors = step(400, 400, 1.0, 1.0);
        errors.candidate.errors = 1;
        let Verdict::Fail(why) = judge(&errors, &GATE, 200) else { panic!("must fail") };
        assert!(matches!(why.as_slice(), [GateFailure::Errors { live_rate, .. }] if *live_rate == 0.0));
        // As many errors as live, proportionally: allowed at ratio 1.
        errors.live.errors = 1;
        assert_eq!(judge(&errors, &GATE, 200), Verdict::Pass);
    }
}
