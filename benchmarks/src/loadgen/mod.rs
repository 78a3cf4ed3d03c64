//! `loadgen`: a closed- and open-loop HTTP/1.1 load generator for Open
//! Inference Protocol V2 servers.
//!
//! * [`args`]: command line.
//! * [`body`]: raw, generated (JSON or Triton binary) and dataset bodies.
//! * [`text_body`]: `BYTES` text requests from a file of sentences.
//! * [`client`]: target, request template, keep-alive connections.
//! * [`closed`] / [`open`]: the two pacing modes.
//! * [`stats`], [`progress`], [`report`]: measuring and reporting.
//! * [`testserver`]: a trivial local server for tests and calibration.

pub mod args;
pub mod body;
pub mod client;
pub mod closed;
pub mod error;
pub mod open;
pub mod progress;
pub mod report;
pub mod stats;
pub mod testserver;
pub mod text_body;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

pub use args::{Args, Mode};
pub use error::{LoadgenError, Result};
pub use report::Report;

use body::{Encoding, PreparedBody, TensorSpec};
use client::{Conn, RequestTemplate, Target};
use report::{LatencySummary, RunInfo, ScheduleSummary};
use stats::{Live, Phases, Recorder};

/// State shared by all workers of a run.
#[derive(Debug)]
pub struct RunCtx {
    /// Builds each request.
    pub template: Arc<RequestTemplate>,
    /// Live counters for the progress line.
    pub live: Arc<Live>,
    /// Run phases.
    pub phases: Phases,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Maximum number of measured requests.
    pub limit: Option<u64>,
}

/// Awaits worker tasks and merges their recorders.
pub(crate) async fn join_all(handles: Vec<JoinHandle<Result<Recorder>>>) -> Result<Recorder> {
    let mut total = Recorder::new()?;
    for h in handles {
        let rec = h.await.map_err(|e| LoadgenError::Join(e.to_string()))??;
        total.merge(&rec)?;
    }
    Ok(total)
}

/// Loads or generates the request bodies described by `args`.
pub fn load_bodies(args: &Args) -> Result<Vec<PreparedBody>> {
    let enc = Encoding { datatype: args.datatype, binary: args.binary, binary_output: args.binary_output };
    if let Some(path) = &args.body_file {
        body::from_file(path)
    } else if let Some(path) = &args.dataset {
        body::from_dataset(path, args.dataset_input.as_deref(), enc, args.distinct)
    } else if let Some(path) = &args.text_file {
        let req = text_body::TextRequests {
            input: args.text_input.clone(),
            per_request: args.texts_per_request,
            binary: args.binary,
            binary_output: args.binary_output,
            openai_model: args.openai_model.clone(),
        };
        text_body::from_text_file(path, &req, args.distinct)
    } else if let Some(shape) = &args.input_shape {
        body::generate(&TensorSpec::parse(shape)?, enc, args.distinct.unwrap_or(1), args.seed)
    } else {
        Err(LoadgenError::Args("give one of --body-file, --input-shape, --dataset or --text-file".into()))
    }
}

/// Runs the load described by `args` and returns its report. Must be called
/// inside a Tokio runtime.
pub async fn run(args: &Args) -> Result<Report> {
    args.validate()?;
    let url = args.url.as_deref().ok_or_else(|| LoadgenError::Args("--url is required".into()))?;
    let target = Target::resolve(url).await?;
    let headers = args.headers.iter().map(|h| client::parse_header(h)).collect::<Result<Vec<_>>>()?;
    let bodies = load_bodies(args)?;
    let body_bytes = bodies.iter().map(|b| b.body.len()).sum::<usize>() / bodies.len().max(1);
    let template = Arc::new(RequestTemplate::new(&target, bodies, headers)?);
    let n_bodies = template.bodies().len();

    let n_conns = match args.mode {
        Mode::Closed => args.concurrency,
        Mode::Open => args.connections,
    };
    let mut conns = Vec::with_capacity(n_conns);
    let mut first_error = None;
    for _ in 0..n_conns {
        let mut c = Conn::new(target.addr);
        if let Err(e) = c.open(args.timeout).await {
            first_error.get_or_insert(e);
        }
        conns.push(c);
    }
    if let Some(e) = first_error {
        if !args.quiet {
            eprintln!("warning: {e} (workers will retry; failures count as connection errors)");
        }
    }

    let live = Arc::new(Live::default());
    let phases = Phases::starting_now(args.warmup, args.duration);
    let ctx = Arc::new(RunCtx {
        template,
        live: Arc::clone(&live),
        phases,
        timeout: args.timeout,
        limit: args.requests,
    });
    let progress = (!args.quiet).then(|| progress::spawn(live, phases));

    let mut window_rps = None;
    let (rec, nominal_end, schedule) = match args.mode {
        Mode::Closed => {
            let r = closed::run(ctx, conns).await?;
            let window = phases.end.saturating_duration_since(phases.measure_start).as_secs_f64();
            if !r.limit_hit && window > 0.0 {
                window_rps = Some((r.rec.ok_in_window as f64 / window * 100.0).round() / 100.0);
            }
            (r.rec, r.nominal_end, None)
        }
        Mode::Open => {
            let rate = args.rate.unwrap_or(1.0);
            let sched = open::Schedule::new(rate, args.warmup, args.duration, args.requests);
            let r = open::run(ctx, conns, sched).await?;
            let window = sched.window().as_secs_f64();
            let achieved = if window > 0.0 { r.sent as f64 / window } else { 0.0 };
            let summary = ScheduleSummary {
                target_rate: rate,
                scheduled: sched.measured(),
                sent: r.sent,
                unsent: sched.measured().saturating_sub(r.sent),
                achieved_rate: (achieved * 100.0).round() / 100.0,
                behind: (r.sent as f64) < 0.99 * sched.measured() as f64,
                send_lag_us: LatencySummary::from_histogram(&r.rec.send_lag),
            };
            (r.rec, r.nominal_end, Some(summary))
        }
    };
    if let Some(p) = progress {
        p.abort();
    }
    let window_end: Instant = rec.last_done.map_or(nominal_end, |t| t.max(nominal_end));
    let window_s = window_end.saturating_duration_since(phases.measure_start).as_secs_f64();
    let info = RunInfo {
        label: args.label.clone().unwrap_or_else(|| url.to_string()),
        url: url.to_string(),
        mode: args.mode.as_str(),
        concurrency: n_conns,
        rate: args.rate.filter(|_| args.mode == Mode::Open),
        warmup_s: args.warmup.as_secs_f64(),
        bodies: n_bodies,
        body_bytes,
        threads: args.threads,
    };
    let mut report = Report::new(info, &rec, window_s, schedule);
    report.window_rps = window_rps;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn args(url: &str, extra: &[&str]) -> Args {
        let mut v = vec!["loadgen", "--url", url, "--input-shape", "X:1,8", "--quiet", "--timeout", "5s"];
        v.extend_from_slice(extra);
        Args::try_parse_from(v).unwrap()
    }

    #[tokio::test]
    async fn closed_loop_counts_alternating_statuses() {
        let (addr, server) = testserver::spawn("127.0.0.1:0".parse().unwrap(), Some(2)).await.unwrap();
        let url = format!("http://{addr}/v2/models/m/infer");
        let a = args(&url, &["--concurrency", "4", "--requests", "300", "--duration", "10s", "--binary"]);
        let started = Instant::now();
        let r = run(&a).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(r.requests, 300);
        assert_eq!(r.ok, 150);
        assert_eq!(r.errors.get("500"), Some(&150));
        assert_eq!(r.connection_errors, 0);
        assert!(r.latency_us.p50 > 0);
        assert!(r.rps > 0.0);
        assert_eq!(r.concurrency, 4);
        assert_eq!(r.window_rps, None, "cut short by --requests: no window rate");
        server.abort();
    }

    #[tokio::test]
    async fn a_closed_loop_run_to_its_end_counts_completions_inside_the_window() {
        let (addr, server) = testserver::spawn("127.0.0.1:0".parse().unwrap(), None).await.unwrap();
        let url = format!("http://{addr}/v2/models/m/infer");
        let a = args(&url, &["--concurrency", "2", "--duration", "300ms", "--warmup", "100ms"]);
        let r = run(&a).await.unwrap();
        let window = r.window_rps.expect("a closed loop run to its end");
        assert!(window > 0.0 && r.ok > 0);
        // Every measured request that ended by the window's end is in both
        // counts; the window count adds at most one per client started in
        // the warm-up, and lacks those still running at the end.
        let in_window = (window * 0.3).round() as i64;
        assert!((in_window - r.ok as i64).abs() <= 2 * 2 + 1, "{in_window} vs {}", r.ok);
        server.abort();
    }

    #[tokio::test]
    async fn open_loop_follows_schedule() {
        let (addr, server) = testserver::spawn("127.0.0.1:0".parse().unwrap(), Some(2)).await.unwrap();
        let url = format!("http://{addr}/v2/models/m/infer");
        let a = args(
            &url,
            &[
                "--mode",
                "open",
                "--rate",
                "1000",
                "--connections",
                "4",
                "--duration",
                "200ms",
                "--warmup",
                "50ms",
            ],
        );
        let r = run(&a).await.unwrap();
        let sched = r.schedule.clone().unwrap();
        assert_eq!(sched.scheduled, 200);
        assert_eq!(sched.sent + sched.unsent, 200);
        assert_eq!(r.requests, sched.sent);
        assert!(sched.sent >= 150, "sent only {}", sched.sent);
        assert_eq!(r.ok + r.errors.get("500").copied().unwrap_or(0), r.requests);
        assert!(r.ok >= 70 && r.errors.get("500").copied().unwrap_or(0) >= 70);
        assert_eq!(r.rate, Some(1000.0));
        server.abort();
    }

    #[tokio::test]
    async fn refused_connections_are_counted() {
        // Bind then drop a listener to get a port that refuses connections.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/v2/models/m/infer");
        let r = run(&args(&url, &["--concurrency", "2", "--duration", "100ms"])).await.unwrap();
        assert_eq!(r.ok, 0);
        assert!(r.connection_errors > 0);
        assert_eq!(r.requests, r.connection_errors);
    }
}
