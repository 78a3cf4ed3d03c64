//! `sse-bench`: time to draft and time to final of draft-then-final
//! streams, side by side with the cheap and the heavy model called alone
//! (plain requests), at several concurrency levels in one run.
//!
//! Per concurrency level `c`, `rounds` times: `c` clients (one keep-alive
//! connection each) send `requests / rounds` calls each to the cheap model
//! alone, then to the heavy model alone, then as streams to the draft
//! route. Interleaving the three phases in rounds spreads machine noise
//! over all of them. Inputs cycle through the dataset's rows; every call
//! says `Cache-Control: no-store`, so nothing is answered from the cache.

pub mod client;
pub mod report;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use bytes::Bytes;
use clap::Parser;

use client::{Client, Timing};
use report::Level;

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "sse-bench", about = "Time to draft / time to final of SSE streams vs the models alone")]
pub struct Args {
    /// Gateway address, e.g. 127.0.0.1:8000.
    #[arg(long)]
    pub addr: SocketAddr,
    /// The route with a cheap/heavy pair (streams go there).
    #[arg(long, default_value = "draft")]
    pub route: String,
    /// The cheap model, called alone.
    #[arg(long, default_value = "digits-cheap")]
    pub cheap: String,
    /// The heavy model, called alone.
    #[arg(long, default_value = "synth-heavy")]
    pub heavy: String,
    /// Concurrency levels.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16])]
    pub concurrency: Vec<usize>,
    /// Measured calls per phase and level.
    #[arg(long, default_value_t = 600)]
    pub requests: usize,
    /// Rounds the phases are interleaved in.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Unmeasured calls per client before each level.
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// Rows to send: a JSON file with `"X": [[...64 floats], ...]`.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Write the report as JSON here too.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
}

/// The three kinds of call a level compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Cheap,
    Heavy,
    Stream,
}

/// V2 bodies, one per dataset row, asking for `label`.
fn bodies(path: &PathBuf) -> anyhow::Result<Vec<Bytes>> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_slice(&text)?;
    let rows = doc["X"].as_array().context("the dataset needs an \"X\" array of rows")?;
    rows.iter()
        .map(|row| {
            let width = row.as_array().map_or(0, Vec::len);
            let body = serde_json::json!({
                "inputs": [{"name": "X", "shape": [1, width], "datatype": "FP32", "data": row}],
                "outputs": [{"name": "label"}],
            });
            Ok(Bytes::from(serde_json::to_vec(&body)?))
        })
        .collect()
}

/// Runs every level and returns the report.
pub async fn run(args: &Args) -> anyhow::Result<Vec<Level>> {
    let bodies = bodies(&args.dataset)?;
    anyhow::ensure!(!bodies.is_empty(), "the dataset has no rows");
    let mut levels = Vec::new();
    for &c in &args.concurrency {
        let mut level = Level::new(c);
        let per_client = (args.requests / args.rounds.max(1) / c.max(1)).max(1);
        for phase in [Phase::Cheap, Phase::Heavy, Phase::Stream] {
            phase_run(args, &bodies, phase, c, args.warmup).await?;
        }
        for _ in 0..args.rounds.max(1) {
            for phase in [Phase::Cheap, Phase::Heavy, Phase::Stream] {
                let timings = phase_run(args, &bodies, phase, c, per_client).await?;
                record(&mut level, phase, &timings);
            }
        }
        eprintln!("{}", level.line());
        levels.push(level);
    }
    Ok(levels)
}

fn record(level: &mut Level, phase: Phase, timings: &[Timing]) {
    for t in timings {
        match (phase, *t) {
            (Phase::Cheap, Timing::Plain(d)) => level.cheap.push(d),
            (Phase::Heavy, Timing::Plain(d)) => level.heavy.push(d),
            (Phase::Stream, Timing::Stream { draft, last }) => {
                match draft {
                    Some(d) => level.draft.push(d),
                    None => level.no_draft += 1,
                }
                level.last.push(last);
            }
            _ => {}
        }
    }
}

/// `c` clients send `each` calls of `phase`; returns every timing.
async fn phase_run(
    args: &Args,
    bodies: &[Bytes],
    phase: Phase,
    c: usize,
    each: usize,
) -> anyhow::Result<Vec<Timing>> {
    let (path, stream) = match phase {
        Phase::Cheap => (format!("/v2/models/{}/infer", args.cheap), false),
        Phase::Heavy => (format!("/v2/models/{}/infer", args.heavy), false),
        Phase::Stream => (format!("/v2/models/{}/infer", args.route), true),
    };
    let mut tasks = Vec::new();
    for client_index in 0..c {
        let (path, addr) = (path.clone(), args.addr);
        let bodies: Vec<Bytes> = bodies.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut client = Client::connect(addr).await?;
            let mut out = Vec::with_capacity(each);
            for i in 0..each {
                let body = bodies[(client_index * 7919 + i) % bodies.len()].clone();
                out.push(client.call(&path, body, stream).await?);
            }
            anyhow::Ok(out)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}
