//! Downloading one object into a local file, checked as it is written.
//!
//! A file up to [`TransferSettings::part_bytes`] is one streamed GET. A
//! larger one is fetched as ranged GETs of that size, up to
//! [`TransferSettings::concurrency`] at once, each on its own task. Every
//! GET streams its bytes to one writer thread as they arrive, which puts
//! them in place ([`PartWriter`]: positional writes, early writeback,
//! the digest taken in file order). Every GET carries `If-Match: <ETag>`,
//! so the parts of one file all come from the same object even if it is
//! replaced meanwhile ([`StoreError::Changed`]).
//!
//! The destination is a temporary path chosen by the caller; on any error
//! it is removed. The file is flushed to disk (`fsync`) before success is
//! reported, so a rename after it never exposes a half-written file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange};
use tokio::sync::mpsc;

use crate::backend::{map_error, Backend};
use crate::error::StoreError;
use crate::integrity::{Expected, Hasher};
use crate::listing::ObjectInfo;
use crate::part_writer::PartWriter;
use crate::settings::TransferSettings;
use crate::stats::StoreCounters;

/// Pieces queued between the network tasks and the writer thread (each
/// is one network read, typically tens to hundreds of kB).
const WRITE_QUEUE: usize = 64;

/// Bytes of part `.0`, continuing where its previous piece ended.
type Piece = (usize, Bytes);

/// Downloads `file` to `dest` and checks it against `expected`.
pub(crate) async fn download(
    backend: &Backend,
    file: &ObjectInfo,
    expected: &Expected,
    dest: &Path,
    transfer: &TransferSettings,
    counters: &Arc<StoreCounters>,
) -> Result<(), StoreError> {
    let result = fetch_to(backend, file, expected, dest, transfer, counters).await;
    if result.is_err() {
        let _ = std::fs::remove_file(dest);
    }
    result
}

async fn fetch_to(
    backend: &Backend,
    file: &ObjectInfo,
    expected: &Expected,
    dest: &Path,
    transfer: &TransferSettings,
    counters: &Arc<StoreCounters>,
) -> Result<(), StoreError> {
    let ranges = part_ranges(file.size, transfer.part_bytes);
    let (tx, rx) = mpsc::channel::<Piece>(WRITE_QUEUE);
    let writer = spawn_writer(dest.to_path_buf(), ranges.clone(), expected.hasher(), rx);
    let sent = send_parts(backend, file, ranges, transfer.concurrency, counters, tx).await;
    let written = writer.await.map_err(|e| StoreError::cache(dest, format!("writer task failed: {e}")))?;
    sent?;
    let (hasher, bytes) = written.map_err(|e| StoreError::cache(dest, e))?;
    counters.add_bytes(bytes);
    expected.verify(file, hasher, bytes)
}

/// The file's parts: one for a file up to `part_bytes` (fetched without a
/// range), else `part_bytes`-sized ranges tiling it.
fn part_ranges(size: u64, part_bytes: u64) -> Vec<(u64, u64)> {
    let part = part_bytes.max(1);
    if size <= part {
        return vec![(0, size)];
    }
    (0..size.div_ceil(part)).map(|i| (i * part, ((i + 1) * part).min(size))).collect()
}

fn get_options(file: &ObjectInfo, range: Option<GetRange>) -> GetOptions {
    GetOptions {
        if_match: file.etag.as_ref().map(|e| format!("\"{}\"", e.trim_matches('"'))),
        range,
        ..Default::default()
    }
}

/// Runs the GETs, up to `concurrency` at once, each on its own task and
/// streaming to the writer.
async fn send_parts(
    backend: &Backend,
    file: &ObjectInfo,
    ranges: Vec<(u64, u64)>,
    concurrency: usize,
    counters: &Arc<StoreCounters>,
    tx: mpsc::Sender<Piece>,
) -> Result<(), StoreError> {
    let whole = ranges.len() == 1;
    let tasks = ranges.into_iter().enumerate().map(|(part, (start, end))| {
        let (store, counters, tx) = (Arc::clone(&backend.store), Arc::clone(counters), tx.clone());
        let options = get_options(file, (!whole).then_some(GetRange::Bounded(start..end)));
        let location = ObjectPath::from(file.key.as_str());
        AbortOnDrop(tokio::spawn(async move {
            counters.count_get();
            let mut stream = store.get_opts(&location, options).await?.into_stream();
            while let Some(chunk) = stream.try_next().await? {
                if tx.send((part, chunk)).await.is_err() {
                    break; // the writer failed; its error is reported
                }
            }
            Ok::<(), object_store::Error>(())
        }))
    });
    let mut parts = futures::stream::iter(tasks).buffer_unordered(concurrency.max(1));
    while let Some(joined) = parts.next().await {
        joined
            .map_err(|e| StoreError::Backend {
                store: backend.name.clone(),
                reason: format!("download task: {e}"),
            })?
            .map_err(|e| map_error(backend, &file.key, e))?;
    }
    Ok(())
}

/// A spawned part download that is cancelled when dropped (a failed
/// download stops its other parts instead of letting them run on).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The writer thread: puts each piece in place as it arrives, then
/// flushes the file to disk. Returns the digest and the bytes written.
fn spawn_writer(
    dest: PathBuf,
    ranges: Vec<(u64, u64)>,
    hasher: Hasher,
    mut rx: mpsc::Receiver<Piece>,
) -> tokio::task::JoinHandle<std::io::Result<(Hasher, u64)>> {
    tokio::task::spawn_blocking(move || {
        let mut writer = PartWriter::create(&dest, &ranges, hasher)?;
        while let Some((part, chunk)) = rx.blocking_recv() {
            writer.write(part, &chunk)?;
        }
        writer.finish()
    })
}

#[cfg(test)]
mod tests {
    use super::part_ranges;

    #[test]
    fn parts_tile_the_file() {
        assert_eq!(part_ranges(0, 8), vec![(0, 0)]);
        assert_eq!(part_ranges(8, 8), vec![(0, 8)]);
        assert_eq!(part_ranges(17, 8), vec![(0, 8), (8, 16), (16, 17)]);
        assert_eq!(part_ranges(5, 0), vec![(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]);
    }
}
