//! The final report: a human-readable table and a JSON document.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::stats::Recorder;

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

impl LatencySummary {
    /// Summarises a microsecond histogram (all zeros when empty).
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary { p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0.0 };
        }
        LatencySummary {
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: (h.mean() * 10.0).round() / 10.0,
        }
    }
}

/// Open-loop schedule adherence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleSummary {
    /// Requested rate (requests/s).
    pub target_rate: f64,
    /// Measured requests scheduled.
    pub scheduled: u64,
    /// Measured requests actually sent.
    pub sent: u64,
    /// Scheduled but never sent because the run ended first (the generator fell behind).
    pub unsent: u64,
    /// Requests sent per second of the measured window.
    pub achieved_rate: f64,
    /// True when fewer than 99% of scheduled requests were sent.
    pub behind: bool,
    /// Delay between intended and actual send (waiting for a free connection or the event loop).
    pub send_lag_us: LatencySummary,
}

/// Everything a run measured. Serialised as the `--json-out` document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Free-form label (defaults to the URL).
    pub label: String,
    /// Target URL.
    pub url: String,
    /// `closed` or `open`.
    pub mode: String,
    /// Closed loop: virtual clients; open loop: connections.
    pub concurrency: usize,
    /// Open loop: target rate; closed loop: null.
    pub rate: Option<f64>,
    /// Measured window used for `rps`, in seconds.
    pub duration_s: f64,
    /// Warm-up, in seconds (not measured).
    pub warmup_s: f64,
    /// Measured requests, whatever their outcome.
    pub requests: u64,
    /// Measured 2xx responses.
    pub ok: u64,
    /// Non-2xx responses by status code.
    pub errors: BTreeMap<String, u64>,
    /// Connect/send/receive failures.
    pub connection_errors: u64,
    /// Requests that exceeded the per-request timeout.
    pub timeouts: u64,
    /// Successful requests per second: the measured requests (those that
    /// started inside the window) over the window, stretched to the last
    /// one's completion.
    pub rps: f64,
    /// Closed loop (run to its duration): 2xx responses that completed
    /// inside the window, whenever they started, per second of the window:
    /// the rate the server sustained. For requests much shorter than the
    /// window it equals `rps`; for long ones (seconds each, many clients)
    /// `rps` undercounts, as few requests both start and end in the window
    /// and the drain stretches it. `null` for open loops and runs cut short
    /// by `--requests`.
    pub window_rps: Option<f64>,
    /// Latency of successful requests, microseconds (open loop: from the intended send time).
    pub latency_us: LatencySummary,
    /// Open loop only: how well the schedule was kept.
    pub schedule: Option<ScheduleSummary>,
    /// Number of distinct request bodies.
    pub bodies: usize,
    /// Mean request body size in bytes.
    pub body_bytes: usize,
    /// Tokio worker threads of the generator.
    pub threads: usize,
}

/// Fields of a report that do not come from the measurements.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// Report label.
    pub label: String,
    /// Target URL.
    pub url: String,
    /// `closed` or `open`.
    pub mode: &'static str,
    /// Virtual clients or connections.
    pub concurrency: usize,
    /// Open-loop target rate.
    pub rate: Option<f64>,
    /// Warm-up seconds.
    pub warmup_s: f64,
    /// Distinct bodies.
    pub bodies: usize,
    /// Mean body size.
    pub body_bytes: usize,
    /// Generator threads.
    pub threads: usize,
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl Report {
    /// Builds the report from merged measurements over a measured window of `window_s` seconds.
    pub fn new(info: RunInfo, rec: &Recorder, window_s: f64, schedule: Option<ScheduleSummary>) -> Self {
        let rps = if window_s > 0.0 { rec.ok as f64 / window_s } else { 0.0 };
        Report {
            label: info.label,
            url: info.url,
            mode: info.mode.to_string(),
            concurrency: info.concurrency,
            rate: info.rate,
            duration_s: (window_s * 1000.0).round() / 1000.0,
            warmup_s: info.warmup_s,
            requests: rec.total(),
            ok: rec.ok,
            errors: rec.statuses.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
            connection_errors: rec.conn_errors,
            timeouts: rec.timeouts,
            rps: round2(rps),
            window_rps: None,
            latency_us: LatencySummary::from_histogram(&rec.latency),
            schedule,
            bodies: info.bodies,
            body_bytes: info.body_bytes,
            threads: info.threads,
        }
    }

    /// The human-readable table printed on stdout.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let ms = |us: u64| format!("{:.3} ms", us as f64 / 1000.0);
        let l = &self.latency_us;
        let pacing = match self.rate {
            Some(r) => format!("open loop, {r} req/s over {} connections", self.concurrency),
            None => format!("closed loop, {} clients", self.concurrency),
        };
        let errors = if self.errors.is_empty() {
            "none".to_string()
        } else {
            self.errors.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
        };
        let _ = writeln!(s, "{:<12}{}", "label", self.label);
        let _ = writeln!(s, "{:<12}{}", "url", self.url);
        let _ = writeln!(s, "{:<12}{pacing}, {} thread(s)", "mode", self.threads);
        let _ = writeln!(s, "{:<12}{} x {} B", "bodies", self.bodies, self.body_bytes);
        let _ = writeln!(
            s,
            "{:<12}{:.2} s measured (+{:.2} s warm-up)",
            "duration", self.duration_s, self.warmup_s
        );
        let _ = writeln!(s, "{:<12}{} ({} ok)", "requests", self.requests, self.ok);
        let _ = writeln!(s, "{:<12}{:.1} req/s (successful)", "throughput", self.rps);
        let _ = writeln!(
            s,
            "{:<12}{:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "latency", "p50", "p90", "p99", "p99.9", "max", "mean"
        );
        let _ = writeln!(
            s,
            "{:<12}{:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "",
            ms(l.p50),
            ms(l.p90),
            ms(l.p99),
            ms(l.p999),
            ms(l.max),
            format!("{:.3} ms", l.mean / 1000.0)
        );
        let _ = writeln!(
            s,
            "{:<12}http {errors}; connection {}; timeouts {}",
            "errors", self.connection_errors, self.timeouts
        );
        if let Some(sc) = &self.schedule {
            let _ = writeln!(
                s,
                "{:<12}target {} req/s, sent {}/{} ({:.1} req/s), unsent {}, send lag p99 {} max {}{}",
                "schedule",
                sc.target_rate,
                sc.sent,
                sc.scheduled,
                sc.achieved_rate,
                sc.unsent,
                ms(sc.send_lag_us.p99),
                ms(sc.send_lag_us.max),
                if sc.behind { "  ** GENERATOR FELL BEHIND SCHEDULE **" } else { "" }
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::loadgen::client::Outcome;

    fn info() -> RunInfo {
        RunInfo {
            label: "t".into(),
            url: "http://127.0.0.1:1/v2/models/m/infer".into(),
            mode: "open",
            concurrency: 4,
            rate: Some(100.0),
            warmup_s: 0.0,
            bodies: 1,
            body_bytes: 10,
            threads: 1,
        }
    }

    #[test]
    fn json_shape() {
        let mut rec = Recorder::new().unwrap();
        let now = Instant::now();
        for us in [100, 200, 300, 400] {
            rec.record(Outcome::Status(200), Duration::from_micros(us), now);
        }
        rec.record(Outcome::Status(503), Duration::from_micros(1), now);
        rec.record(Outcome::ConnError, Duration::ZERO, now);
        let lag = LatencySummary::from_histogram(&rec.send_lag);
        let sched = ScheduleSummary {
            target_rate: 100.0,
            scheduled: 6,
            sent: 6,
            unsent: 0,
            achieved_rate: 100.0,
            behind: false,
            send_lag_us: lag,
        };
        let r = Report::new(info(), &rec, 2.0, Some(sched));
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "label",
            "url",
            "mode",
            "concurrency",
            "rate",
            "duration_s",
            "requests",
            "errors",
            "rps",
            "latency_us",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["errors"], serde_json::json!({"503": 1}));
        assert_eq!(v["requests"], 6);
        assert_eq!(v["rps"], 2.0);
        assert_eq!(v["mode"], "open");
        assert_eq!(v["connection_errors"], 1);
        let lat = v["latency_us"].as_object().unwrap();
        let mut keys: Vec<_> = lat.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["max", "mean", "p50", "p90", "p99", "p999"]);
        assert_eq!(v["latency_us"]["p50"], 200);
        assert_eq!(v["latency_us"]["max"], 400);
        assert_eq!(v["schedule"]["behind"], false);
        assert!(r.table().contains("503: 1"));
    }

    #[test]
    fn empty_histogram() {
        let rec = Recorder::new().unwrap();
        let r = Report::new(RunInfo { rate: None, mode: "closed", ..info() }, &rec, 0.0, None);
        assert_eq!(r.rps, 0.0);
        assert_eq!(r.latency_us.max, 0);
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["rate"].is_null());
        assert!(v["schedule"].is_null());
    }
}
