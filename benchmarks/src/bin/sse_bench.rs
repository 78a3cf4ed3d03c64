//! `sse-bench`: time to draft and time to final of draft-then-final SSE
//! streams against the cheap and heavy models alone. See
//! `switchyard_benchmarks::sse` and `benchmarks/sse_bench.sh`.

use anyhow::Context;
use clap::Parser;
use switchyard_benchmarks::sse::{self, report, Args};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    let levels = rt.block_on(sse::run(&args))?;
    print!("{}", report::table(&levels));
    if let Some(path) = &args.json_out {
        std::fs::write(path, serde_json::to_string_pretty(&levels)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
