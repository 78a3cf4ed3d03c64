//! One model version pulled from an object store into an empty disk
//! cache by Switchyard's model store (`switchyard_store`), timed:
//! the download half of a cold start, to compare with another client's
//! download of the same objects from the same server
//! (`benchmarks/store_cold_start.py` runs it beside boto3).
//!
//! `store-pull --uri s3://models/repo --endpoint http://127.0.0.1:9000 --model minilm-l6 --version 1`
//!
//! Credentials come from the environment, as the gateway's do. Prints
//! `{"bytes": ..., "seconds": ..., "mb_per_s": ..., "gets": ...}`.

use anyhow::{Context, Result};
use clap::Parser;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;
use switchyard_store::{AwsEnv, ModelStore, StoreSettings, StoreUri};

#[derive(Parser)]
struct Args {
    /// The repository (`s3://bucket/prefix`).
    #[arg(long)]
    uri: String,
    /// S3 endpoint URL.
    #[arg(long)]
    endpoint: Option<String>,
    /// The model (folder name in the repository).
    #[arg(long)]
    model: String,
    /// The version folder.
    #[arg(long, default_value_t = 1)]
    version: u64,
    /// Cache folder (a fresh temporary one by default).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Ranged-GET part size in bytes (default: the gateway's).
    #[arg(long)]
    part_bytes: Option<u64>,
    /// Parts in flight at once (default: the gateway's).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Tokio worker threads (default: one per CPU).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let scratch = std::env::temp_dir().join(format!("store-pull-{}", std::process::id()));
    let cache_dir = args.cache_dir.clone().unwrap_or_else(|| scratch.clone());
    let uri = StoreUri::parse(&args.uri, "--uri").context("--uri")?;
    let mut settings = StoreSettings::new(uri, &cache_dir);
    settings.s3.endpoint = args.endpoint.clone();
    if let Some(part) = args.part_bytes {
        settings.transfer.part_bytes = part;
    }
    if let Some(concurrency) = args.concurrency {
        settings.transfer.concurrency = concurrency;
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = args.threads {
        builder.worker_threads(threads.max(1));
    }
    let runtime = builder.enable_all().build()?;
    let result = runtime.block_on(async {
        let store = ModelStore::open(settings, &AwsEnv::from_process()).context("opening the store")?;
        let started = Instant::now();
        let local = store.materialize(&args.model, args.version).await.context("pulling")?;
        let seconds = started.elapsed().as_secs_f64();
        let bytes = store.stats().bytes_downloaded;
        drop(local);
        anyhow::Ok(json!({
            "bytes": bytes,
            "seconds": seconds,
            "mb_per_s": bytes as f64 / 1e6 / seconds,
            "gets": store.stats().gets,
        }))
    });
    if args.cache_dir.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    println!("{}", serde_json::to_string(&result?)?);
    Ok(())
}
