//! Requests per priority class (1..=[`PRIORITY_LEVELS`]), counted where
//! routing takes a request up ([`crate::routing::execute`]): how many of
//! each class reached the pools, and how each ended. Shown in `/metrics`
//! (`switchyard_priority_admitted_total{class}`,
//! `switchyard_priority_requests_total{class,outcome}`) and in
//! `GET /admin/stats` under `"priority"`.
//!
//! - `admitted`: taken up by routing, i.e. past the gateway's admission,
//!   the tenant's limits and fair share, and the cache (a hit never
//!   counts). Counted when routing starts.
//! - `answered`: a model answered it.
//! - `shed`: refused with 429 because no queue would take it (every pool
//!   full to its class, or the policy shed it) or because a request of a
//!   higher class displaced it from a full queue.
//! - `failed`: any other error (a model failed, the budget ran out on a
//!   paused pool, an upstream failed).
//!
//! So `admitted = answered + shed + failed + in flight`; a request whose
//! client went away before its answer stays in none of the three.
//!
//! One process-wide table, like [`super::requests`]: the classes are a
//! closed set, so the labels are bounded whatever the config.

use super::family::Family;
use prometheus::proto::MetricFamily;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use switchyard_runtime::PRIORITY_LEVELS;

const LEVELS: usize = PRIORITY_LEVELS as usize;

/// How a request of a class ended (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassOutcome {
    /// A model answered.
    Answered,
    /// 429: no queue took it, or a higher class displaced it.
    Shed,
    /// Any other error.
    Failed,
}

impl ClassOutcome {
    /// Every outcome, in the order metrics list them.
    pub const ALL: [ClassOutcome; 3] = [ClassOutcome::Answered, ClassOutcome::Shed, ClassOutcome::Failed];

    /// The `outcome` label.
    pub fn as_str(self) -> &'static str {
        match self {
            ClassOutcome::Answered => "answered",
            ClassOutcome::Shed => "shed",
            ClassOutcome::Failed => "failed",
        }
    }

    /// The outcome of an answer with HTTP `status` (200 when answered):
    /// 429 is shed (inside routing only the pools and the policy answer
    /// 429), other errors failed.
    pub fn of_status(status: u16) -> ClassOutcome {
        match status {
            200..=299 => ClassOutcome::Answered,
            429 => ClassOutcome::Shed,
            _ => ClassOutcome::Failed,
        }
    }
}

/// Counters per class: admitted, then one per outcome.
#[derive(Debug)]
pub struct ClassCounters {
    admitted: [AtomicU64; LEVELS],
    outcomes: [[AtomicU64; 3]; LEVELS],
}

/// One class's counters, copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClassView {
    /// Taken up by routing.
    pub admitted: u64,
    /// Answered by a model.
    pub answered: u64,
    /// Refused with 429 (no queue took it, or displaced).
    pub shed: u64,
    /// Ended with another error.
    pub failed: u64,
}

impl ClassCounters {
    /// All zero.
    pub const fn new() -> ClassCounters {
        ClassCounters {
            admitted: [const { AtomicU64::new(0) }; LEVELS],
            outcomes: [const { [const { AtomicU64::new(0) }; 3] }; LEVELS],
        }
    }

    fn index(class: u8) -> usize {
        usize::from(class.clamp(1, PRIORITY_LEVELS) - 1)
    }

    /// Routing took up a request of `class`.
    pub fn admitted(&self, class: u8) {
        if let Some(c) = self.admitted.get(Self::index(class)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request of `class` ended with `outcome`.
    pub fn finished(&self, class: u8, outcome: ClassOutcome) {
        let at = ClassOutcome::ALL.iter().position(|o| *o == outcome);
        if let Some(c) = self.outcomes.get(Self::index(class)).and_then(|row| row.get(at?)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Class `class`'s counters now.
    pub fn view(&self, class: u8) -> ClassView {
        let i = Self::index(class);
        let load = |c: Option<&AtomicU64>| c.map_or(0, |c| c.load(Ordering::Relaxed));
        let row = self.outcomes.get(i);
        ClassView {
            admitted: load(self.admitted.get(i)),
            answered: load(row.and_then(|r| r.first())),
            shed: load(row.and_then(|r| r.get(1))),
            failed: load(row.and_then(|r| r.get(2))),
        }
    }
}

impl Default for ClassCounters {
    fn default() -> Self {
        ClassCounters::new()
    }
}

/// The process's counters (module docs).
pub static CLASSES: ClassCounters = ClassCounters::new();

/// The two families, every class listed (zero until used).
pub fn class_families(counters: &ClassCounters) -> Vec<MetricFamily> {
    let mut admitted = Family::counter(
        "switchyard_priority_admitted_total",
        "Requests of each priority class taken up by routing (past admission, tenant limits and the cache).",
        &["class"],
    );
    let mut outcomes = Family::counter(
        "switchyard_priority_requests_total",
        "Requests of each priority class by how they ended: answered, shed (429: no queue took them, or displaced by a higher class) or failed.",
        &["class", "outcome"],
    );
    for class in 1..=PRIORITY_LEVELS {
        let view = counters.view(class);
        let label = class.to_string();
        admitted.sample(&[&label], view.admitted as f64);
        for (outcome, n) in ClassOutcome::ALL.iter().zip([view.answered, view.shed, view.failed]) {
            outcomes.sample(&[&label, outcome.as_str()], n as f64);
        }
    }
    [admitted, outcomes].into_iter().filter_map(Family::finish).collect()
}

/// `"priority"` of `/admin/stats`: `{"1": {"admitted", "answered", "shed", "failed"}, ...}`.
pub fn stats_json(counters: &ClassCounters) -> Value {
    let classes: serde_json::Map<String, Value> = (1..=PRIORITY_LEVELS)
        .map(|class| (class.to_string(), serde_json::to_value(counters.view(class)).unwrap_or_default()))
        .collect();
    json!(classes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, TextEncoder};

    #[test]
    fn outcomes_are_counted_per_class_and_out_of_range_classes_clamped() {
        let c = ClassCounters::new();
        c.admitted(1);
        c.admitted(4);
        c.admitted(9);
        c.finished(1, ClassOutcome::Answered);
        c.finished(4, ClassOutcome::Shed);
        c.finished(0, ClassOutcome::Failed);
        assert_eq!(c.view(1), ClassView { admitted: 1, answered: 1, shed: 0, failed: 1 });
        assert_eq!(c.view(4), ClassView { admitted: 2, answered: 0, shed: 1, failed: 0 });
        assert_eq!(stats_json(&c)["4"]["shed"], 1);
    }

    #[test]
    fn statuses_map_to_outcomes() {
        assert_eq!(ClassOutcome::of_status(200), ClassOutcome::Answered);
        assert_eq!(ClassOutcome::of_status(429), ClassOutcome::Shed);
        assert_eq!(ClassOutcome::of_status(503), ClassOutcome::Failed);
        assert_eq!(ClassOutcome::of_status(400), ClassOutcome::Failed);
    }

    #[test]
    fn every_class_and_outcome_is_exported() {
        let c = ClassCounters::new();
        c.finished(3, ClassOutcome::Shed);
        let mut out = Vec::new();
        TextEncoder::new().encode(&class_families(&c), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("switchyard_priority_admitted_total{class=\"4\"} 0\n"), "{text}");
        assert!(
            text.contains("switchyard_priority_requests_total{class=\"3\",outcome=\"shed\"} 1\n"),
            "{text}"
        );
        assert_eq!(text.matches("switchyard_priority_requests_total{").count(), 12, "{text}");
    }
}
