//! One traffic file's writer: a thread that takes records from a bounded
//! queue, encodes them and appends them, rotating the file at its size
//! bound. A request only ever `try_send`s to it. A line larger than its
//! route's `max_line_bytes` (never more than `max_bytes`) is not written
//! but counted (`oversized`), so every file stays within `max_bytes`.

use super::held::Held;
use super::line::TrafficRecord;
use super::RecordStats;
use crate::config::record_section::{rotated, RecordConfig};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;

/// Records waiting for the writer; more are dropped.
pub const QUEUE: usize = 1024;

/// What [`FileWriter::submit`] did with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// Queued for writing.
    Queued,
    /// Dropped: the queue was full (or the writer is gone).
    Dropped,
}

/// A record and the rotation settings in force when it was taken (a
/// reload may change them; the writer follows).
struct Job {
    record: TrafficRecord,
    max_bytes: u64,
    files: usize,
    max_line_bytes: u64,
    /// The record's share of the queue's byte bound, given back when the
    /// job is dropped (written, failed, or refused by a full queue).
    _held: Held,
}

/// The sending side of one file's writer thread.
pub struct FileWriter {
    jobs: SyncSender<Job>,
}

type Stats = Arc<Mutex<HashMap<String, RecordStats>>>;

impl FileWriter {
    /// Starts the writer of `path`; its counters go to `stats`.
    pub fn start(path: PathBuf, stats: Stats) -> FileWriter {
        let (jobs, queue) = sync_channel(QUEUE);
        let name = format!("sy-record-{}", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
        let spawned = std::thread::Builder::new().name(name).spawn(move || run(&path, &queue, &stats));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "could not start a traffic-record writer; its records will be dropped");
        }
        FileWriter { jobs }
    }

    /// Queues `record` (holding `held` of the queue's bytes) under
    /// `config`'s rotation settings; never blocks.
    pub fn submit(&self, config: &RecordConfig, record: TrafficRecord, held: Held) -> Submitted {
        let job = Job {
            record,
            max_bytes: config.max_bytes,
            files: config.files,
            max_line_bytes: config.max_line_bytes.min(config.max_bytes),
            _held: held,
        };
        match self.jobs.try_send(job) {
            Ok(()) => Submitted::Queued,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => Submitted::Dropped,
        }
    }
}

/// The open file and its size.
struct Output {
    file: BufWriter<File>,
    size: u64,
}

fn open(path: &Path) -> std::io::Result<Output> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let size = file.metadata()?.len();
    Ok(Output { file: BufWriter::new(file), size })
}

/// Shifts `path` -> `path.1` -> ... keeping `files` files in all.
fn rotate(path: &Path, files: usize) -> std::io::Result<()> {
    if files <= 1 {
        return std::fs::remove_file(path);
    }
    let _ = std::fs::remove_file(rotated(path, files - 1));
    for n in (1..files - 1).rev() {
        let from = rotated(path, n);
        if from.exists() {
            std::fs::rename(&from, rotated(path, n + 1))?;
        }
    }
    std::fs::rename(path, rotated(path, 1))
}

/// The writer loop: until every sender is gone.
fn run(path: &Path, queue: &Receiver<Job>, stats: &Stats) {
    let mut output: Option<Output> = None;
    let mut next = queue.recv().ok();
    while let Some(job) = next {
        let route = job.record.route.clone();
        let result = write(path, &mut output, &job);
        drop(job);
        let mut all = stats.lock();
        let counters = all.entry(route).or_default();
        match result {
            Ok(Wrote::Line { rotated }) => {
                counters.written += 1;
                counters.rotations += u64::from(rotated);
            }
            Ok(Wrote::Oversized) => counters.oversized += 1,
            Err(e) => {
                counters.failed += 1;
                output = None;
                tracing::warn!(error = %e, path = %path.display(), "a traffic record could not be written");
            }
        }
        drop(all);
        next = match queue.try_recv() {
            Ok(job) => Some(job),
            Err(TryRecvError::Empty) => {
                if let Some(out) = output.as_mut() {
                    if let Err(e) = out.file.flush() {
                        tracing::warn!(error = %e, path = %path.display(), "flushing the traffic file failed");
                    }
                }
                queue.recv().ok()
            }
            Err(TryRecvError::Disconnected) => None,
        };
    }
    if let Some(mut out) = output {
        let _ = out.file.flush();
    }
}

/// What [`write`] did with a record.
enum Wrote {
    /// Appended its line, after rotating the file or not.
    Line { rotated: bool },
    /// Nothing: its line is larger than `max_line_bytes`.
    Oversized,
}

/// Appends one record, rotating first when it would pass `max_bytes`.
fn write(path: &Path, output: &mut Option<Output>, job: &Job) -> std::io::Result<Wrote> {
    let line = job.record.to_line();
    let len = line.len() as u64;
    if len > job.max_line_bytes {
        return Ok(Wrote::Oversized);
    }
    if output.is_none() {
        *output = Some(open(path)?);
    }
    let mut rotated_now = false;
    if let Some(out) = output.as_mut() {
        if out.size > 0 && out.size + len > job.max_bytes {
            out.file.flush()?;
            rotate(path, job.files)?;
            *out = open(path)?;
            rotated_now = true;
        }
    }
    match output.as_mut() {
        Some(out) => {
            out.file.write_all(&line)?;
            out.size += len;
            Ok(Wrote::Line { rotated: rotated_now })
        }
        None => Err(std::io::Error::other("no traffic file open")),
    }
}

#[cfg(test)]
mod tests {
    use super::super::held::QueueBytes;
    use super::super::line::Ending;
    use super::*;

    fn record(i: usize) -> TrafficRecord {
        TrafficRecord {
            route: "r".into(),
            arrived_ms: 1000 + i as u64,
            protocol: "rest",
            id: Some(format!("{i:04}")),
            tenant: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
            parameters: serde_json::Map::new(),
            budget_ms: 1,
            latency_us: 1,
            ending: Ending::Failed { status: 400, label: "bad_request" },
        }
    }

    fn wait_for_written(stats: &Stats, n: u64) {
        for _ in 0..500 {
            if stats.lock().get("r").is_some_and(|s| s.written + s.failed >= n) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the writer did not write {n} records: {:?}", stats.lock().get("r"));
    }

    #[test]
    fn rotation_keeps_at_most_files_of_at_most_max_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("t.jsonl");
        let stats = Stats::default();
        let writer = FileWriter::start(path.clone(), stats.clone());
        let line_len = record(0).to_line().len() as u64;
        let config = RecordConfig {
            sample: 1.0,
            path: path.clone(),
            max_bytes: line_len * 10,
            files: 3,
            max_line_bytes: line_len * 10,
        };
        let queue = QueueBytes::default();
        for i in 0..100 {
            assert_eq!(writer.submit(&config, record(i), queue.take(1).unwrap()), Submitted::Queued);
        }
        wait_for_written(&stats, 100);
        drop(writer);
        let s = stats.lock()["r"];
        assert_eq!((s.written, s.failed, s.dropped), (100, 0, 0));
        assert_eq!(queue.held(), 0, "written records give their bytes back");
        assert_eq!(s.rotations, 9, "100 lines of 10 per file");
        let kept = [path.clone(), rotated(&path, 1), rotated(&path, 2)];
        for file in &kept {
            assert!(std::fs::metadata(file).unwrap().len() <= config.max_bytes, "{}", file.display());
        }
        assert!(!rotated(&path, 3).exists(), "only `files` files are kept");
        // The newest lines are in the current file, the oldest kept in `.2`.
        let ids = |p: &Path| -> Vec<String> {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_string()
                })
                .collect()
        };
        assert_eq!(ids(&path).last().map(String::as_str), Some("0099"));
        assert_eq!(ids(&rotated(&path, 2)).first().map(String::as_str), Some("0070"));
    }

    #[test]
    fn a_full_queue_drops_instead_of_blocking() {
        let (jobs, queue) = sync_channel(2);
        let writer = FileWriter { jobs };
        let config = RecordConfig {
            sample: 1.0,
            path: PathBuf::from("unused"),
            max_bytes: 1 << 20,
            files: 1,
            max_line_bytes: 1 << 20,
        };
        let bytes = QueueBytes::default();
        let take = || bytes.take(10).unwrap();
        assert_eq!(writer.submit(&config, record(0), take()), Submitted::Queued);
        assert_eq!(writer.submit(&config, record(1), take()), Submitted::Queued);
        assert_eq!(writer.submit(&config, record(2), take()), Submitted::Dropped);
        assert_eq!(bytes.held(), 20, "a dropped record gives its bytes back");
        drop(queue);
        assert_eq!(writer.submit(&config, record(3), take()), Submitted::Dropped);
    }

    #[test]
    fn a_line_over_max_line_bytes_is_counted_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let stats = Stats::default();
        let writer = FileWriter::start(path.clone(), stats.clone());
        let line_len = record(0).to_line().len() as u64;
        let mut big = record(1);
        big.id = Some("x".repeat(3 * line_len as usize));
        let config = RecordConfig {
            sample: 1.0,
            path: path.clone(),
            max_bytes: 2 * line_len,
            files: 2,
            max_line_bytes: 2 * line_len,
        };
        let queue = QueueBytes::default();
        for r in [record(0), big, record(2)] {
            assert_eq!(writer.submit(&config, r, queue.take(1).unwrap()), Submitted::Queued);
        }
        wait_for_written(&stats, 2);
        drop(writer);
        let s = stats.lock()["r"];
        assert_eq!((s.written, s.oversized, s.failed), (2, 1, 0));
        assert!(std::fs::metadata(&path).unwrap().len() <= config.max_bytes);
        assert!(!std::fs::read_to_string(&path).unwrap().contains("xxx"));
    }
}
