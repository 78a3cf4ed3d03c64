//! What a replay reports, per config: counts and shares, as a table for a
//! terminal and as JSON for tools.

use super::traffic::RecordedCall;
use super::CallOutcome;
use crate::error::GatewayError;
use serde::Serialize;
use std::collections::BTreeMap;

/// One config's results.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigReport {
    /// The config file.
    pub config: String,
    /// Calls replayed (answered).
    pub replayed: usize,
    /// Calls of routes the config does not have.
    pub skipped: usize,
    /// Calls that failed, with the first few reasons.
    pub failed: usize,
    /// `line N: why`, for the first failures.
    pub failures: Vec<String>,
    /// Share of replayed calls a cascade escalated.
    pub escalated_share: f64,
    /// Share of replayed calls agreeing with the heaviest model.
    pub agreement_with_heaviest: f64,
    /// Mean compute cost per replayed call.
    pub cost_per_call: f64,
    /// Share of replayed calls answered by the model that answered live.
    pub same_decision_as_live: f64,
    /// Share of the recorded calls (of these routes) escalated live.
    pub live_escalated_share: f64,
    /// Answering models and their counts.
    pub models: BTreeMap<String, usize>,
    /// The simulated L1 hit ratio (`None`: no cache on these routes).
    pub cache_hit_ratio: Option<f64>,
    /// The hit ratio recorded live (L1 and L2 hits over lookups).
    pub live_cache_hit_ratio: Option<f64>,
    /// Latency and budget misses ([`super::latency`]).
    pub latency: Option<super::latency::LatencyReport>,
    /// Per cascade route: the agreement curve of the replayed calls and the
    /// threshold it suggests.
    pub calibration: BTreeMap<String, crate::routing::calibration::CalibrationView>,
    #[serde(skip)]
    sums: Sums,
}

#[derive(Debug, Clone, Default)]
struct Sums {
    escalated: usize,
    agreeing: usize,
    cost: f64,
    same_as_live: usize,
    live_known: usize,
    live_escalated: usize,
    live_lookups: usize,
    live_hits: usize,
}

/// A table row: its label and how to read it from a config's report.
type Row = (&'static str, fn(&ConfigReport) -> String);

/// Failures listed by line in a report.
const LISTED_FAILURES: usize = 5;

impl ConfigReport {
    /// An empty report for the config at `config`.
    pub fn new(config: String) -> ConfigReport {
        ConfigReport {
            config,
            replayed: 0,
            skipped: 0,
            failed: 0,
            failures: Vec::new(),
            escalated_share: 0.0,
            agreement_with_heaviest: 0.0,
            cost_per_call: 0.0,
            same_decision_as_live: 0.0,
            live_escalated_share: 0.0,
            models: BTreeMap::new(),
            cache_hit_ratio: None,
            live_cache_hit_ratio: None,
            latency: None,
            calibration: BTreeMap::new(),
            sums: Sums::default(),
        }
    }

    /// Counts one replayed call.
    pub fn add(&mut self, outcome: &CallOutcome, call: &RecordedCall) {
        self.replayed += 1;
        let s = &mut self.sums;
        s.escalated += usize::from(outcome.escalated);
        s.agreeing += usize::from(outcome.agrees);
        s.cost += outcome.cost;
        if let Some(live) = &call.live_model {
            s.live_known += 1;
            s.same_as_live += usize::from(*live == outcome.model);
            s.live_escalated +=
                usize::from(call.live_reason == Some(router_policies::Reason::CascadeEscalate));
        }
        if let Some(cache) = call.live_cache.as_deref().filter(|c| matches!(*c, "hit-l1" | "hit-l2" | "miss"))
        {
            s.live_lookups += 1;
            s.live_hits += usize::from(cache != "miss");
        }
        *self.models.entry(outcome.model.clone()).or_default() += 1;
        self.refresh();
    }

    /// Counts one failed call.
    pub fn fail(&mut self, line: usize, error: &GatewayError) {
        self.failed += 1;
        if self.failures.len() < LISTED_FAILURES {
            self.failures.push(format!("line {line}: {error}"));
        }
    }

    fn refresh(&mut self) {
        let share = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        let s = &self.sums;
        self.escalated_share = share(s.escalated, self.replayed);
        self.agreement_with_heaviest = share(s.agreeing, self.replayed);
        self.cost_per_call = if self.replayed == 0 { 0.0 } else { s.cost / self.replayed as f64 };
        self.same_decision_as_live = share(s.same_as_live, s.live_known);
        self.live_escalated_share = share(s.live_escalated, s.live_known);
        self.live_cache_hit_ratio = (s.live_lookups > 0).then(|| share(s.live_hits, s.live_lookups));
    }
}

/// A whole replay.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The traffic file.
    pub traffic: String,
    /// Calls in it.
    pub calls: usize,
    /// One report per config: `--against` first, then the candidate.
    pub configs: Vec<ConfigReport>,
}

impl Report {
    /// The report as a table, one column per config.
    pub fn table(&self) -> String {
        let pct = |v: f64| format!("{:.1}%", v * 100.0);
        let rows: [Row; 14] = [
            ("calls replayed", |c| c.replayed.to_string()),
            ("calls skipped (route not in config)", |c| c.skipped.to_string()),
            ("calls failed", |c| c.failed.to_string()),
            ("escalated to the heavy model", |c| format!("{:.1}%", c.escalated_share * 100.0)),
            ("agreement with the heaviest model", |c| format!("{:.1}%", c.agreement_with_heaviest * 100.0)),
            ("compute cost per call", |c| format!("{:.3}", c.cost_per_call)),
            ("same model as live", |c| format!("{:.1}%", c.same_decision_as_live * 100.0)),
            ("cache hit ratio (simulated L1)", |c| {
                c.cache_hit_ratio.map_or("-".into(), |r| format!("{:.1}%", r * 100.0))
            }),
            ("cache hit ratio recorded live", |c| {
                c.live_cache_hit_ratio.map_or("-".into(), |r| format!("{:.1}%", r * 100.0))
            }),
            ("latency p50 / p99, ms (replayed)", |c| {
                c.latency
                    .as_ref()
                    .map_or("-".into(), |l| format!("{:.3} / {:.3} ({})", l.p50_ms, l.p99_ms, l.basis))
            }),
            ("over budget (replayed)", |c| {
                c.latency.as_ref().map_or("-".into(), |l| format!("{:.1}%", l.over_budget_share * 100.0))
            }),
            ("latency p50 / p99, ms (recorded live)", |c| {
                c.latency
                    .as_ref()
                    .map_or("-".into(), |l| format!("{:.3} / {:.3}", l.live_p50_ms, l.live_p99_ms))
            }),
            ("suggested cascade threshold (target agreement)", |c| {
                let each: Vec<String> = c
                    .calibration
                    .iter()
                    .map(|(route, v)| match v.suggested_threshold {
                        Some(t) => format!("{route}: {t:.2} ({:.1}%)", v.target * 100.0),
                        None => format!("{route}: none ({:.1}%)", v.target * 100.0),
                    })
                    .collect();
                if each.is_empty() {
                    "-".into()
                } else {
                    each.join(", ")
                }
            }),
            ("models", |c| c.models.iter().map(|(m, n)| format!("{m}: {n}")).collect::<Vec<_>>().join(", ")),
        ];
        let mut out = format!("traffic: {} ({} calls)\n\n| |", self.traffic, self.calls);
        for c in &self.configs {
            out.push_str(&format!(" {} |", c.config));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(self.configs.len()));
        out.push('\n');
        for (name, value) in rows {
            out.push_str(&format!("| {name} |"));
            for c in &self.configs {
                out.push_str(&format!(" {} |", value(c)));
            }
            out.push('\n');
        }
        if let Some(first) = self.configs.first() {
            out.push_str(&format!("\nescalated live (recorded): {}\n", pct(first.live_escalated_share)));
        }
        for c in self.configs.iter().filter(|c| !c.failures.is_empty()) {
            out.push_str(&format!("\nfailures under {}:\n", c.config));
            for f in &c.failures {
                out.push_str(&format!("  {f}\n"));
            }
        }
        out
    }
}
