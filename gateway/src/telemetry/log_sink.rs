//! Where log lines go: a buffer in memory that one background thread
//! writes to stderr in bursts.
//!
//! Why not a channel of lines: a request then pays for a copy of its line
//! into a fresh allocation, a channel send and, whenever the writer was
//! waiting, a wake-up of the writer thread, all per line. Here a line is
//! copied into the shared buffer under a short lock; the writer is woken
//! only when it is waiting for the buffer to fill (so a lone line leaves at
//! once), and after each write it naps for [`NAP`] so that, under load, the
//! lines of that time leave in one `write(2)` and the serving threads wake
//! it at most once per nap, not once per request.
//!
//! Every line is written whole and in the order appended, from one thread:
//! the `tracing` formatter's lines ([`LogSink`] is its writer) and the
//! access log's ([`super::access_log`]) never interleave. Past
//! [`MAX_PENDING_BYTES`] waiting (stderr blocked), new lines are dropped
//! rather than slowing requests down, and counted; the count is reported
//! on the next line written.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the writer naps after each write, gathering the next burst.
///
/// Each nap costs the process about two context switches (the writer's
/// timer and its wake-up), so the log's switches per request are the
/// nap rate divided by the request rate: at 2 ms they were 0.05-0.06 per
/// request at 20k req/s on a slow VM, half of issue 42's bar. A line
/// waits at most this long under load (a lone line leaves at once).
pub const NAP: Duration = Duration::from_millis(10);

/// Bytes waiting to be written past which new lines are dropped.
pub const MAX_PENDING_BYTES: usize = 8 << 20;

/// The shared buffer and the writer's state.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// The writer waits on the condvar (so an append must wake it).
    writer_waiting: bool,
    /// The guard was dropped: write what is left and stop.
    closed: bool,
    /// Lines dropped since the last write.
    dropped: u64,
}

#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding this lock cannot leave the buffer invalid
        // (appends and swaps only), so a poisoned lock is used as is.
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The log buffer's handle: cheap to clone, appends whole lines.
#[derive(Clone)]
pub struct LogSink {
    shared: Arc<Shared>,
}

/// Keeps the writer thread; dropping it writes the lines still pending
/// and stops the thread (hold it until the process ends).
pub struct LogGuard {
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
}

impl LogSink {
    /// Starts the writer thread writing to `out`.
    pub fn start(out: Box<dyn Write + Send>) -> std::io::Result<(LogSink, LogGuard)> {
        let shared = Arc::new(Shared::default());
        let writer = std::thread::Builder::new().name("sy-log-writer".into()).spawn({
            let shared = shared.clone();
            move || write_until_closed(&shared, out)
        })?;
        Ok((LogSink { shared: shared.clone() }, LogGuard { shared, writer: Some(writer) }))
    }

    /// Appends `line` (one or more whole lines, newline-terminated), or
    /// drops it when too much is already waiting.
    pub fn append(&self, line: &[u8]) {
        let mut pending = self.shared.lock();
        if pending.bytes.len() + line.len() > MAX_PENDING_BYTES {
            pending.dropped += 1;
            return;
        }
        pending.bytes.extend_from_slice(line);
        let wake = std::mem::take(&mut pending.writer_waiting);
        drop(pending);
        if wake {
            self.shared.wake.notify_one();
        }
    }
}

/// The writer thread: waits for lines, writes everything pending in one
/// write, naps, again; after the guard is dropped, writes the rest and
/// returns.
fn write_until_closed(shared: &Shared, mut out: Box<dyn Write + Send>) {
    let mut spare = Vec::new();
    loop {
        let mut pending = shared.lock();
        while pending.bytes.is_empty() && !pending.closed {
            pending.writer_waiting = true;
            pending = shared.wake.wait(pending).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        pending.writer_waiting = false;
        let closed = pending.closed;
        let dropped = std::mem::take(&mut pending.dropped);
        std::mem::swap(&mut pending.bytes, &mut spare);
        drop(pending);
        if dropped > 0 {
            let _ = writeln!(out, "switchyard: {dropped} log lines dropped (stderr could not keep up)");
        }
        // Nothing useful can be done when stderr fails; the lines are lost.
        let _ = out.write_all(&spare).and_then(|()| out.flush());
        spare.clear();
        if closed {
            return;
        }
        std::thread::sleep(NAP);
    }
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The `tracing` formatter's writer: each event's formatted line is
/// appended whole.
pub struct SinkWriter<'a>(&'a LogSink);

impl Write for SinkWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogSink {
    type Writer = SinkWriter<'a>;

    fn make_writer(&'a self) -> SinkWriter<'a> {
        SinkWriter(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Write` whose bytes the test reads back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_from_many_threads_arrive_whole_and_in_each_threads_order() {
        let out = Captured::default();
        let (sink, guard) = LogSink::start(Box::new(out.clone())).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let sink = sink.clone();
                std::thread::spawn(move || {
                    for i in 0..2000 {
                        sink.append(format!("thread={t} line={i} {}\n", "x".repeat(i % 50)).as_bytes());
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        drop(guard); // writes what is left
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let mut next = [0usize; 4];
        for line in text.lines() {
            let mut words = line.split(' ');
            let t: usize = words.next().unwrap().strip_prefix("thread=").unwrap().parse().unwrap();
            let i: usize = words.next().unwrap().strip_prefix("line=").unwrap().parse().unwrap();
            assert_eq!(i, next[t], "thread {t}'s lines in order, none lost");
            assert_eq!(words.next().unwrap_or(""), "x".repeat(i % 50));
            next[t] += 1;
        }
        assert_eq!(next, [2000; 4]);
    }

    #[test]
    fn a_lone_line_is_written_without_waiting_for_more() {
        let out = Captured::default();
        let (sink, _guard) = LogSink::start(Box::new(out.clone())).unwrap();
        sink.append(b"alone\n");
        // Polled, not timed: the writer wakes for it (no guard drop here).
        while out.0.lock().unwrap().is_empty() {
            std::thread::yield_now();
        }
        assert_eq!(&out.0.lock().unwrap()[..], b"alone\n");
    }

    #[test]
    fn past_the_bound_lines_are_dropped_and_counted() {
        let shared = Arc::new(Shared::default());
        let sink = LogSink { shared: shared.clone() };
        let big = vec![b'y'; MAX_PENDING_BYTES / 2];
        sink.append(&big);
        sink.append(&big);
        sink.append(b"one too many\n");
        let pending = shared.lock();
        assert_eq!(pending.bytes.len(), MAX_PENDING_BYTES);
        assert_eq!(pending.dropped, 1);
    }
}
