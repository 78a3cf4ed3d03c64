//! The `switchyard` binary: `serve`, `check-config`, `replay` and `config-schema`.

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use switchyard::{
    load_config_file, load_default_config, read_config_file, CliOverrides, Config, ConfigIssue, ConfigSource,
    Pace,
};

/// Switchyard: an inference routing gateway.
#[derive(Parser)]
#[command(name = "switchyard", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true)]
    log_json: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Open Inference Protocol on the configured listener.
    Serve {
        /// Config file; without it, the bundled example models are served.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override `server.listen`.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Override `server.admin_listen`.
        #[arg(long)]
        admin_listen: Option<SocketAddr>,
        /// Override `server.grpc_listen` (turns the gRPC listener on).
        #[arg(long)]
        grpc_listen: Option<SocketAddr>,
        /// Once every listener is bound, write their addresses to this file
        /// as JSON (`{"listen": ..., "admin_listen": ..., "grpc_listen": ...}`):
        /// how a script learns the ports that port 0 became.
        #[arg(long)]
        ports_file: Option<PathBuf>,
    },
    /// Check a config file (and its models' signatures); print what is
    /// wrong with field paths and exit non-zero on any problem.
    CheckConfig {
        /// The config file.
        file: PathBuf,
    },
    /// Print the config file's JSON Schema (every field, its type and doc),
    /// derived from the config types: for editors that validate TOML
    /// against a schema (docs/src/reference/config.schema.json is this).
    ConfigSchema,
    /// Replay a recorded traffic sample (`routes[].record`) offline through
    /// a candidate config, with its real models, beside the current one.
    Replay {
        /// The candidate config.
        #[arg(long)]
        config: PathBuf,
        /// The traffic file (JSON lines written by `record`).
        #[arg(long)]
        traffic: PathBuf,
        /// The config in force, to compare with.
        #[arg(long)]
        against: Option<PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// `fast`: calls one after the other, latency simulated from the
        /// pools' tables; `recorded`: each call at its recorded arrival
        /// time (overlapping, queueing and batching as live), latency
        /// measured.
        #[arg(long, value_enum, default_value = "fast")]
        pace: PaceArg,
        /// With `--pace recorded`: time compression (2 replays an hour of
        /// traffic in half an hour).
        #[arg(long, default_value_t = 1.0, value_parser = positive_speed)]
        speed: f64,
    },
}

/// `switchyard replay --pace`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PaceArg {
    Fast,
    Recorded,
}

fn positive_speed(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{text:?} is not a positive number")),
    }
}

/// The gateway's Rust heap is mimalloc rather than glibc's malloc: every
/// request allocates and frees buffers, headers and tensors across the
/// HTTP threads and the pool workers, and mimalloc's thread-local free
/// lists cut the server's CPU per request by about a sixth at 40 clients
/// (A/B in benchmarks/NOTES.md, "Global allocator"). Its 2.x line (the
/// `v2` feature in the workspace manifest): 3.x frees and re-takes a page
/// for the one 4 KiB buffer each response header needs ("mimalloc 2.x
/// rather than 3.x" in the same notes). ONNX Runtime's own allocations
/// stay with glibc (see `gateway/src/memory.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // One rustls provider for every TLS client (backends, Redis, OTLP).
    switchyard::install_tls_provider();
    let result = match cli.command {
        Command::Serve { config, listen, admin_listen, grpc_listen, ports_file } => {
            let overrides = CliOverrides { listen, admin_listen, grpc_listen };
            serve_command(cli.log_json, config, overrides, ports_file.as_deref())
        }
        Command::Replay { config, traffic, against, json, pace, speed } => {
            let pace = match pace {
                PaceArg::Fast => Pace::Fast,
                PaceArg::Recorded => Pace::Recorded { speed },
            };
            switchyard::init_logging(cli.log_json, None)
                .and_then(|_log_guard| replay_command(&config, &traffic, against.as_deref(), json, pace))
        }
        Command::CheckConfig { file } => {
            switchyard::init_logging(cli.log_json, None).and_then(|_log_guard| check_command(&file))
        }
        Command::ConfigSchema => switchyard::config_json_schema()
            .map(|schema| {
                print!("{schema}");
                ExitCode::SUCCESS
            })
            .context("writing the config schema"),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("switchyard: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The config and the digest of the file contents it was parsed from.
fn load(path: Option<&PathBuf>) -> (Option<blake3::Hash>, Result<Config, Vec<ConfigIssue>>) {
    match path {
        Some(p) => read_config_file(p),
        None => (None, load_default_config()),
    }
}

fn print_issues(source: &str, issues: &[ConfigIssue]) {
    eprintln!("{source}: {} problem(s)", issues.len());
    for issue in issues {
        eprintln!("  {issue}");
    }
}

fn serve_command(
    log_json: bool,
    path: Option<PathBuf>,
    overrides: CliOverrides,
    ports_file: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    let source = path.as_ref().map_or("built-in config".to_string(), |p| p.display().to_string());
    let (digest, loaded) = load(path.as_ref());
    let mut config = match loaded {
        Ok(c) => c,
        Err(issues) => {
            print_issues(&source, &issues);
            return Ok(ExitCode::FAILURE);
        }
    };
    overrides.apply(&mut config);
    let source = ConfigSource { path, loaded_digest: digest, overrides };
    // Logs and traces start once the config (its `[telemetry]`) is known;
    // the guard flushes pending log lines when serving ends.
    let _log_guard = switchyard::init_logging(log_json, config.telemetry.as_ref()).context("logging")?;
    switchyard::serve(config, source, ports_file).context("serve")?;
    Ok(ExitCode::SUCCESS)
}

fn replay_command(
    candidate: &std::path::Path,
    traffic: &std::path::Path,
    against: Option<&std::path::Path>,
    json: bool,
    pace: Pace,
) -> anyhow::Result<ExitCode> {
    match switchyard::replay(candidate, traffic, against, pace) {
        Ok(report) if json => {
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        Ok(report) => {
            print!("{}", report.table());
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("switchyard replay: {message}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn check_command(file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let mut config = match load_config_file(file) {
        Ok(c) => c,
        Err(issues) => {
            print_issues(&file.display().to_string(), &issues);
            return Ok(ExitCode::FAILURE);
        }
    };
    // What `serve` checks: the trace exporter (built when its logging
    // starts), then `prepare::prepare`, the same function `serve` runs.
    let exporter = config.telemetry.as_ref().map_or(Ok(()), switchyard::check_trace_exporter);
    let checked = exporter.context("logging").and_then(|()| {
        let upstreams = switchyard::Upstreams::new(&config.proxy);
        switchyard::prepare(&mut config, &upstreams).map(drop)
    });
    match checked {
        Ok(()) => {
            println!(
                "{}: OK ({} models, {} routes)",
                file.display(),
                config.models.len(),
                config.routes.len()
            );
            for line in config.server.tls.describe() {
                println!("  {line}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("{}: {err:#}", file.display());
            Ok(ExitCode::FAILURE)
        }
    }
}
