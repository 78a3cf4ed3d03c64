//! Closed loops for `runtime-bench --section isolation`: what the runtime
//! answers when some callers send data the model cannot run, beside
//! callers that send valid data, sharing batches (issue 37, item 5).
//!
//! The model is `runtime/tests/fixtures/str-to-int.onnx`: one `text`
//! string per row, cast to an integer by ONNX Runtime, which fails the
//! whole run on a string that is no number.

use anyhow::{Context, Result};
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchyard_runtime::{DataType, ErrorClass, InferenceRequest, ModelRepository, Tensor, TensorData};

/// What a mixed loop measured over its window.
#[derive(Debug, Clone, Copy, Default)]
pub struct MixedResult {
    /// Valid requests answered per second (one row each).
    pub valid_per_s: f64,
    /// Valid requests that got an error.
    pub valid_failed: u64,
    /// Bad requests answered with a 400-class error.
    pub bad_rejected: u64,
    /// Bad requests answered with any other error (500-class).
    pub bad_other: u64,
}

impl MixedResult {
    /// The result as JSON fields.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"valid_per_s": self.valid_per_s, "valid_failed": self.valid_failed,
                           "bad_rejected": self.bad_rejected, "bad_other": self.bad_other})
    }
}

/// Counters the callers share during the measured window.
#[derive(Default)]
struct Counts {
    valid_ok: AtomicU64,
    valid_failed: AtomicU64,
    bad_rejected: AtomicU64,
    bad_other: AtomicU64,
}

/// One `[1, 1]` BYTES request of `text`.
fn text_request(text: String) -> Result<InferenceRequest> {
    let t = Tensor::new(DataType::Bytes, vec![1, 1], TensorData::Strings(vec![Bytes::from(text)]))
        .context("text tensor")?;
    Ok(InferenceRequest::new(vec![("text".to_string(), t)]))
}

/// `valid` callers sending numbers and `bad` callers sending text that is
/// no number, closed loop, one row per request; a fifth of `duration`
/// warms up, then `duration` is measured.
pub async fn mixed_loop(
    repo: Arc<ModelRepository>,
    model: &str,
    valid: usize,
    bad: usize,
    duration: Duration,
) -> Result<MixedResult> {
    repo.load(model).await.context("load")?;
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let mut tasks = Vec::new();
    for c in 0..valid + bad {
        let (repo, stop, measuring, counts, model) =
            (repo.clone(), stop.clone(), measuring.clone(), counts.clone(), model.to_string());
        let is_bad = c >= valid;
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let text =
                    if is_bad { format!("x{c}-{i}") } else { (c as u64 * 1_000_000_000 + i).to_string() };
                let result = repo.infer(&model, None, text_request(text)?).await;
                if !measuring.load(Ordering::Relaxed) {
                    continue;
                }
                let counter = match (is_bad, &result) {
                    (false, Ok(_)) => &counts.valid_ok,
                    (false, Err(_)) => &counts.valid_failed,
                    (true, Err(e)) if e.class() == ErrorClass::InvalidInput => &counts.bad_rejected,
                    (true, _) => &counts.bad_other,
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    let elapsed = crate::runtime_loops::measured_window(duration, &measuring, &stop, tasks).await?;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    Ok(MixedResult {
        valid_per_s: get(&counts.valid_ok) as f64 / elapsed.as_secs_f64(),
        valid_failed: get(&counts.valid_failed),
        bad_rejected: get(&counts.bad_rejected),
        bad_other: get(&counts.bad_other),
    })
}

/// CPU seconds (user + system) the threads of this process whose name
/// starts with `prefix` have used: a pool's worker threads are named
/// `sy-<model>-<pool>-<i>` (cut to 15 bytes by the kernel). Unlike
/// throughput, it does not count the time the thread waited for a core,
/// so it compares two builds' worker paths on a busy machine.
pub fn threads_cpu_seconds(prefix: &str) -> Result<f64> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = if ticks > 0 { ticks as f64 } else { 100.0 };
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").context("/proc/self/task")? {
        let dir = task?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        // Fields after the ")" closing the name: state is field 3, utime
        // and stime are fields 14 and 15.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        for i in [11, 12] {
            total += fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    Ok(total as f64 / ticks)
}
