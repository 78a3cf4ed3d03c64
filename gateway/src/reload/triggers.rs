//! What starts a reload besides the admin API: `SIGHUP`, and the config
//! file's contents changing. Both run on one small thread with its own
//! single-threaded tokio runtime, started before the server so that a
//! `SIGHUP` never meets the default action (which ends the process).
//!
//! The file is polled every `[reload] interval_ms` (default 1 s) and
//! compared by content digest, which is portable and sees edits, atomic
//! renames and `touch`-free copies alike; a reload runs when the digest
//! differs from the contents last read and stays the same for
//! [`SETTLE`] (a file caught while a writer is still writing it waits for
//! the next poll). A rejected file is not retried until it changes again.
//! Writers should still replace the file atomically (write a temporary
//! file, rename it over): a writer that pauses mid-file longer than the
//! settle time can be read half-written, and a half that parses is applied.

use super::{Reloader, Trigger};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};

/// How often the loop wakes when the file is not watched (to notice a
/// reload that turned watching on).
const IDLE_TICK: Duration = Duration::from_secs(1);

/// How long a changed file's contents must stay the same before a reload.
pub const SETTLE: Duration = Duration::from_millis(50);

/// Starts the trigger thread; returns once the `SIGHUP` handler is
/// installed.
pub fn spawn(reloader: Arc<Reloader>) -> std::io::Result<()> {
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::Builder::new().name("sy-reload".into()).spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        match runtime {
            Ok(rt) => rt.block_on(run(reloader, ready_tx)),
            Err(e) => {
                let _ = ready_tx.send(Err(e));
            }
        }
    })?;
    ready_rx
        .recv()
        .unwrap_or_else(|_| Err(std::io::Error::other("the reload thread stopped before it was ready")))
}

async fn run(reloader: Arc<Reloader>, ready: mpsc::Sender<std::io::Result<()>>) {
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    tokio::spawn(poll_store(Arc::clone(&reloader)));
    tokio::spawn(super::rollout::run(Arc::clone(&reloader)));
    loop {
        let interval = reloader.watch_interval();
        tokio::select! {
            _ = hangup.recv() => {
                tracing::info!("SIGHUP received: reloading the config");
                reloader.reload(Trigger::Signal);
            }
            () = tokio::time::sleep(interval.unwrap_or(IDLE_TICK)) => {
                if interval.is_some() && reloader.file_changed().is_none() && reloader.tls_files_changed() {
                    tls_files_changed(&reloader).await;
                    continue;
                }
                let Some(seen) = interval.and_then(|_| reloader.file_changed()) else { continue };
                tokio::time::sleep(SETTLE).await;
                if reloader.file_digest() == Some(seen) {
                    tracing::info!("config file changed: reloading");
                    reloader.reload(Trigger::FileChange);
                } else {
                    tracing::debug!("config file still changing: reloading at the next poll");
                }
            }
        }
    }
}

/// Reloads once the TLS files that changed have settled (a certificate and
/// its key are often written one after the other; a reload between the
/// two is refused, and the next poll tries again).
async fn tls_files_changed(reloader: &Arc<Reloader>) {
    let seen = reloader.tls_digest();
    tokio::time::sleep(SETTLE).await;
    if reloader.tls_digest() == seen {
        tracing::info!("TLS certificate files changed: reloading");
        reloader.reload(Trigger::FileChange);
    }
}

/// Lists the model store every `repository.poll_interval_ms` and reloads
/// when a version appeared, was replaced or went away, or when the store
/// answers again after the running generation was built from the cache.
async fn poll_store(reloader: Arc<Reloader>) {
    loop {
        let Some((interval, store, offline)) = reloader.store_poll() else {
            tokio::time::sleep(IDLE_TICK).await;
            continue;
        };
        tokio::time::sleep(interval).await;
        match crate::prepare::store::poll(store).await {
            Ok(changes) if !changes.is_empty() || offline => {
                tracing::info!(?changes, back_online = offline, "model store changed: reloading");
                reloader.reload_async(Trigger::StorePoll).await;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "model store poll failed; serving the current models"),
        }
    }
}
