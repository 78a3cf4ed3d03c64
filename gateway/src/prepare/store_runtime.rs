//! The model store's own small runtime: its I/O runs there (the store's
//! HTTP connections outlive a reload, and the reload thread is itself
//! inside a runtime), shared by [`super::store`] and [`super::store_gate`].

use std::future::Future;
use std::sync::OnceLock;

/// The store's runtime, started on first use.
pub fn store_runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("sy-store")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the model store's runtime: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Runs `work` on the store's runtime and waits for it (from any thread,
/// inside a runtime or not).
pub fn run_on_store<T: Send + 'static>(work: impl Future<Output = T> + Send + 'static) -> Result<T, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    store_runtime()?.spawn(async move {
        let _ = tx.send(work.await);
    });
    rx.recv().map_err(|_| "the model store's task stopped".to_string())
}
