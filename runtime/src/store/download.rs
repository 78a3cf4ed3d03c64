//! Downloading one object into a local file, checked as it is written.
//!
//! A file up to [`TransferSettings::part_bytes`] is one streamed GET. A
//! larger one is fetched as ranged GETs of that size, up to
//! [`TransferSettings::concurrency`] at once, each on its own task (they
//! progress while earlier parts are written); the parts are consumed in
//! file order, so the file is written sequentially and hashed in the same
//! pass, on a blocking thread. Every GET carries `If-Match: <ETag>`, so
//! the parts of one file all come from the same object even if it is
//! replaced meanwhile ([`StoreError::Changed`]).
//!
//! The destination is a temporary path chosen by the caller; on any error
//! it is removed. The file is flushed to disk (`fsync`) before success is
//! reported, so a rename after it never exposes a half-written file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use tokio::sync::mpsc;

use super::backend::{map_error, Backend};
use super::error::StoreError;
use super::integrity::{Expected, Hasher};
use super::listing::ObjectInfo;
use super::settings::TransferSettings;
use super::stats::StoreCounters;

/// Parts queued between the network and the writer thread.
const WRITE_QUEUE: usize = 4;

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
    let (tx, rx) = mpsc::channel::<Bytes>(WRITE_QUEUE);
    let writer = spawn_writer(dest.to_path_buf(), expected.hasher(), rx);
    let sent = if file.size > transfer.part_bytes.max(1) {
        send_ranges(backend, file, transfer, counters, tx).await
    } else {
        send_stream(backend, file, counters, tx).await
    };
    let written = writer.await.map_err(|e| StoreError::cache(dest, format!("writer task failed: {e}")))?;
    sent?;
    let (hasher, bytes) = written.map_err(|e| StoreError::cache(dest, e))?;
    counters.add_bytes(bytes);
    expected.verify(file, hasher, bytes)
}

fn get_options(file: &ObjectInfo, range: Option<GetRange>) -> GetOptions {
    GetOptions {
        if_match: file.etag.as_ref().map(|e| format!("\"{}\"", e.trim_matches('"'))),
        range,
        ..Default::default()
    }
}

/// One GET, streamed chunk by chunk to the writer.
async fn send_stream(
    backend: &Backend,
    file: &ObjectInfo,
    counters: &StoreCounters,
    tx: mpsc::Sender<Bytes>,
) -> Result<(), StoreError> {
    let location = ObjectPath::from(file.key.as_str());
    counters.count_get();
    let result = backend
        .store
        .get_opts(&location, get_options(file, None))
        .await
        .map_err(|e| map_error(backend, &file.key, e))?;
    let mut stream = result.into_stream();
    while let Some(chunk) = stream.try_next().await.map_err(|e| map_error(backend, &file.key, e))? {
        if tx.send(chunk).await.is_err() {
            break; // the writer failed; its error is reported
        }
    }
    Ok(())
}

/// Ranged GETs on their own tasks, handed to the writer in file order.
async fn send_ranges(
    backend: &Backend,
    file: &ObjectInfo,
    transfer: &TransferSettings,
    counters: &Arc<StoreCounters>,
    tx: mpsc::Sender<Bytes>,
) -> Result<(), StoreError> {
    let part = transfer.part_bytes.max(1);
    let ranges: Vec<(u64, u64)> =
        (0..file.size.div_ceil(part)).map(|i| (i * part, ((i + 1) * part).min(file.size))).collect();
    let tasks = ranges.into_iter().map(|(start, end)| {
        let (store, counters) = (Arc::clone(&backend.store), Arc::clone(counters));
        let options = get_options(file, Some(GetRange::Bounded(start..end)));
        let location = ObjectPath::from(file.key.as_str());
        AbortOnDrop(tokio::spawn(async move {
            counters.count_get();
            let got = store.get_opts(&location, options).await?;
            got.bytes().await
        }))
    });
    let mut parts = futures::stream::iter(tasks).buffered(transfer.concurrency.max(1));
    while let Some(joined) = parts.next().await {
        let bytes = joined
            .map_err(|e| StoreError::Backend {
                store: backend.name.clone(),
                reason: format!("download task: {e}"),
            })?
            .map_err(|e| map_error(backend, &file.key, e))?;
        if tx.send(bytes).await.is_err() {
            break;
        }
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

/// The writer thread: writes and hashes the parts in order, then flushes
/// the file to disk. Returns the hasher and the bytes written.
fn spawn_writer(
    dest: PathBuf,
    mut hasher: Hasher,
    mut rx: mpsc::Receiver<Bytes>,
) -> tokio::task::JoinHandle<std::io::Result<(Hasher, u64)>> {
    tokio::task::spawn_blocking(move || {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&dest)?);
        let mut written = 0u64;
        while let Some(chunk) = rx.blocking_recv() {
            out.write_all(&chunk)?;
            hasher.update(&chunk);
            written += chunk.len() as u64;
        }
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_data()?;
        Ok((hasher, written))
    })
}
