//! `loadgen`: load generator for Open Inference Protocol V2 servers.
//! See `loadgen --help` and `switchyard_benchmarks::loadgen`.

use anyhow::Context;
use clap::Parser;
use switchyard_benchmarks::loadgen::{self, testserver, Args};

fn runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()
    };
    rt.context("starting the Tokio runtime")
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.validate()?;
    let rt = runtime(args.threads)?;
    if let Some(addr) = args.serve {
        return rt.block_on(async {
            let (local, server) = testserver::spawn(addr, args.serve_fail_every).await?;
            eprintln!("serving on http://{local}/ for {:?}", args.duration);
            tokio::time::sleep(args.duration).await;
            server.abort();
            Ok(())
        });
    }
    let report = rt.block_on(loadgen::run(&args))?;
    print!("{}", report.table());
    if let Some(path) = &args.json_out {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
