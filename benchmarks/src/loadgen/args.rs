//! Command-line arguments.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use super::body::Datatype;
use super::error::{LoadgenError, Result};

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// N virtual clients, each sending its next request as soon as the previous one is answered.
    Closed,
    /// A fixed request rate on a precomputed schedule; latency counted from the intended send time.
    Open,
}

impl Mode {
    /// Lower-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Closed => "closed",
            Mode::Open => "open",
        }
    }
}

/// Load generator for Open Inference Protocol V2 (KServe v2 / Triton HTTP) servers.
#[derive(Debug, Clone, Parser)]
#[command(name = "loadgen", version)]
pub struct Args {
    /// Target URL (plain http), e.g. http://127.0.0.1:8000/v2/models/digits/infer
    #[arg(long, required_unless_present = "serve")]
    pub url: Option<String>,

    /// Pacing: closed loop (--concurrency) or open loop (--rate, --connections).
    #[arg(long, value_enum, default_value_t = Mode::Closed)]
    pub mode: Mode,

    /// Closed loop: number of virtual clients (one keep-alive connection each).
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,

    /// Open loop: target request rate in requests per second.
    #[arg(long)]
    pub rate: Option<f64>,

    /// Open loop: number of keep-alive connections the scheduled requests are spread over.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,

    /// Measured duration (after warm-up), e.g. 10s, 500ms, 2m.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Warm-up before measuring; requests sent during it are not recorded.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub warmup: Duration,

    /// Stop after this many measured requests (or at --duration, whichever comes first).
    #[arg(long)]
    pub requests: Option<u64>,

    /// Per-request timeout (connect + send + full response); timeouts are counted separately.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Send this file's bytes as the request body, unchanged.
    #[arg(long, conflicts_with_all = ["input_shape", "dataset"])]
    pub body_file: Option<PathBuf>,

    /// Generate V2 infer requests with one input NAME:DIM,DIM,..., e.g. X:1,64.
    #[arg(long, conflicts_with = "dataset")]
    pub input_shape: Option<String>,

    /// Read rows from a JSON file {"NAME": [[...], ...]}; each row is sent as shape [1, len].
    #[arg(long)]
    pub dataset: Option<PathBuf>,

    /// Dataset key holding the rows (default: the only key holding an array of arrays).
    #[arg(long, requires = "dataset")]
    pub dataset_input: Option<String>,

    /// Send BYTES text requests: one sentence per line of this file (see --texts-per-request).
    #[arg(long, conflicts_with_all = ["input_shape", "dataset", "body_file"])]
    pub text_file: Option<PathBuf>,

    /// With --text-file: name of the BYTES input.
    #[arg(long, default_value = "text")]
    pub text_input: String,

    /// With --text-file: send OpenAI embeddings bodies `{"model": NAME, "input": [...]}`
    /// (for /v1/embeddings and peers that speak it) instead of V2 bodies.
    #[arg(long, requires = "text_file", conflicts_with = "binary")]
    pub openai_model: Option<String>,

    /// With --text-file: sentences per request (consecutive lines; the request shape is [K]).
    #[arg(long, default_value_t = 1)]
    pub texts_per_request: usize,

    /// Tensor datatype of generated bodies (BOOL, UINT8, INT8, INT32, INT64, FP32, FP64).
    #[arg(long, default_value = "FP32")]
    pub datatype: Datatype,

    /// Triton binary tensor extension: JSON header + raw little-endian tensor bytes.
    #[arg(long)]
    pub binary: bool,

    /// Ask the server for binary outputs (request parameter binary_data_output=true).
    #[arg(long)]
    pub binary_output: bool,

    /// Number of different bodies, cycled round-robin (1 = all identical; default: 1, or all dataset rows).
    #[arg(long)]
    pub distinct: Option<usize>,

    /// Seed of the random tensor data.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Extra request header 'name: value' (repeatable); overrides generated headers.
    #[arg(long = "header", short = 'H')]
    pub headers: Vec<String>,

    /// Write a machine-readable JSON report to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,

    /// Label stored in the report (defaults to the URL).
    #[arg(long)]
    pub label: Option<String>,

    /// No per-second progress on stderr.
    #[arg(long)]
    pub quiet: bool,

    /// Tokio worker threads (1 = current-thread runtime).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,

    /// Instead of generating load, run the built-in trivial HTTP server on this address
    /// (for calibrating the generator itself); stops after --duration.
    #[arg(long)]
    pub serve: Option<SocketAddr>,

    /// With --serve: answer every Nth request with 500.
    #[arg(long, requires = "serve")]
    pub serve_fail_every: Option<u64>,
}

impl Args {
    /// Checks the combinations clap cannot express.
    pub fn validate(&self) -> Result<()> {
        if self.threads == 0 {
            return Err(LoadgenError::Args("--threads must be at least 1".into()));
        }
        if self.serve.is_some() {
            return Ok(());
        }
        match self.mode {
            Mode::Closed => {
                if self.rate.is_some() {
                    return Err(LoadgenError::Args("--rate needs --mode open".into()));
                }
                if self.concurrency == 0 {
                    return Err(LoadgenError::Args("--concurrency must be at least 1".into()));
                }
            }
            Mode::Open => match self.rate {
                Some(r) if r.is_finite() && r > 0.0 => {
                    if self.connections == 0 {
                        return Err(LoadgenError::Args("--connections must be at least 1".into()));
                    }
                }
                _ => return Err(LoadgenError::Args("--mode open needs --rate > 0".into())),
            },
        }
        if self.body_file.is_none()
            && self.input_shape.is_none()
            && self.dataset.is_none()
            && self.text_file.is_none()
        {
            return Err(LoadgenError::Args(
                "give one of --body-file, --input-shape, --dataset or --text-file".into(),
            ));
        }
        if self.distinct == Some(0) {
            return Err(LoadgenError::Args("--distinct must be at least 1".into()));
        }
        if self.duration.is_zero() && self.requests.is_none() {
            return Err(LoadgenError::Args("--duration must be positive".into()));
        }
        Ok(())
    }
}

/// Parses durations such as `10s`, `1.5s`, `250ms`, `2m`, `100us` or a bare number of seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown duration unit {other:?} in {s:?}")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("bad duration {s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("5x").is_err());
    }

    #[test]
    fn validation() {
        let a = Args::try_parse_from(["loadgen", "--url", "http://127.0.0.1:1/", "--input-shape", "X:1,4"])
            .unwrap();
        a.validate().unwrap();
        let a = Args::try_parse_from(["loadgen", "--url", "http://x/", "--mode", "open", "--body-file", "f"])
            .unwrap();
        assert!(a.validate().is_err());
        let a = Args::try_parse_from(["loadgen", "--url", "http://x/"]).unwrap();
        assert!(a.validate().is_err());
        assert!(Args::try_parse_from(["loadgen", "--url", "u", "--body-file", "f", "--input-shape", "X:1"])
            .is_err());
    }
}
