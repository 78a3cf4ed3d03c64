//! The idle reaper: a background thread that unloads models that have had
//! no request for longer than their `idle_unload`, freeing their sessions;
//! the next request reloads them transparently.
//!
//! It holds only a weak reference to the repository between rounds, so it
//! exits on its own once the repository is dropped (or shut down).

use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::repository::ModelRepository;

const MIN_TICK: Duration = Duration::from_millis(5);
const MAX_TICK: Duration = Duration::from_secs(1);

impl ModelRepository {
    /// Starts the idle reaper thread. It checks every quarter of the
    /// shortest `idle_unload` (between 5 ms and 1 s) and unloads models
    /// idle past their limit with nothing queued. Call once; a model without
    /// `idle_unload` is never unloaded by it.
    pub fn start_idle_reaper(self: &Arc<Self>) -> std::io::Result<JoinHandle<()>> {
        let tick = self
            .models()
            .iter()
            .filter_map(|m| m.spec.idle_unload)
            .min()
            .map_or(MAX_TICK, |d| (d / 4).clamp(MIN_TICK, MAX_TICK));
        let weak = Arc::downgrade(self);
        std::thread::Builder::new().name("sy-idle-reaper".into()).spawn(move || reap_loop(weak, tick))
    }
}

fn reap_loop(weak: Weak<ModelRepository>, tick: Duration) {
    loop {
        std::thread::sleep(tick);
        let Some(repo) = weak.upgrade() else { return };
        if repo.is_shutting_down() {
            return;
        }
        reap_once(&repo);
    }
}

fn reap_once(repo: &ModelRepository) {
    for m in repo.models() {
        let Some(limit) = m.spec.idle_unload else { continue };
        if m.loaded().is_some() && !m.busy() && m.idle_for() > limit && m.unload() {
            tracing::info!(model = %m.spec.name, idle_ms = limit.as_millis() as u64, "idle model unloaded");
        }
    }
}
