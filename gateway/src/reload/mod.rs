//! Hot reload: reread the config file, validate it, build its models, and
//! swap the new snapshot in atomically.
//!
//! Triggers ([`triggers`]): the file's contents changing (polled,
//! `[reload] watch`), the listeners' TLS certificate, key or client-CA
//! files changing (polled with it: certificate rotation), `SIGHUP`, and
//! `POST /admin/reload`. One reload runs
//! at a time; others wait their turn.
//!
//! A reload ([`Reloader::reload`]):
//! 1. reads and parses the file (`switchyard serve --config FILE`; the
//!    built-in config has no file, so there is nothing to reload);
//! 2. re-applies the command line's `--listen`/`--admin-listen`;
//! 3. builds the next snapshot ([`build::next_snapshot_with`]): the model
//!    store's versions (a gated one asks its rollout), then what the
//!    routes' rollouts want in force (`routing::rollout`: a step's share,
//!    a promoted or rolled-back candidate, a posted one), restart-only
//!    settings keep their running values and are reported, unchanged
//!    models are shared, new or changed ones are loaded before the swap;
//! 4. swaps it in. Requests already running finish on the snapshot they
//!    started with; models no longer used stop when the last of them ends.
//!
//! Any problem rejects the new config with its field-path errors and the
//! running snapshot keeps serving, untouched.

pub mod build;
pub mod restart;
pub mod rollout;
pub mod triggers;

use crate::config::{self, Config, ConfigIssue};
use crate::reply::Reply;
use crate::state::AppState;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_store::ModelStore;

/// What asked for a reload (logged and reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// `POST /admin/reload`.
    Admin,
    /// `SIGHUP`.
    Signal,
    /// The config file's contents changed.
    FileChange,
    /// The model store's poller saw a new, replaced or removed version.
    StorePoll,
    /// The console wrote an edit into the config file
    /// (`POST /admin/config/edit`).
    Console,
    /// A route's rollout moved: a gate passed or failed, or an operator
    /// promoted or rolled back (`crate::routing::rollout`).
    Rollout,
}

impl Trigger {
    /// A stable label.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Admin => "admin",
            Trigger::Signal => "sighup",
            Trigger::FileChange => "file_change",
            Trigger::StorePoll => "store_poll",
            Trigger::Console => "console",
            Trigger::Rollout => "rollout",
        }
    }
}

/// Command-line overrides, re-applied to every reloaded file.
#[derive(Debug, Clone, Copy, Default)]
pub struct CliOverrides {
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// `--admin-listen`.
    pub admin_listen: Option<SocketAddr>,
    /// `--grpc-listen`.
    pub grpc_listen: Option<SocketAddr>,
}

impl CliOverrides {
    /// Applies the overrides to `config`.
    pub fn apply(&self, config: &mut Config) {
        if let Some(addr) = self.listen {
            config.server.listen = addr;
        }
        if let Some(addr) = self.admin_listen {
            config.server.admin_listen = addr;
        }
        if let Some(addr) = self.grpc_listen {
            config.server.grpc_listen = Some(addr);
        }
    }
}

/// Where the config came from.
#[derive(Debug, Clone)]
pub struct ConfigSource {
    /// The file, or `None` for the built-in config.
    pub path: Option<PathBuf>,
    /// Digest of the file's contents as loaded at start-up.
    pub loaded_digest: Option<blake3::Hash>,
    /// Command-line overrides.
    pub overrides: CliOverrides,
}

/// Reads and checks a config file; also returns the digest of the
/// contents that were parsed (`None` when the file cannot be read).
///
/// An empty file is refused: it is what a reload sees between a writer
/// truncating the file and writing it again, and applying it would leave
/// the gateway serving nothing.
pub fn read_config_file(path: &Path) -> (Option<blake3::Hash>, Result<Config, Vec<ConfigIssue>>) {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => (
            Some(blake3::hash(text.as_bytes())),
            Err(vec![ConfigIssue {
                path: path.display().to_string(),
                message: "the file is empty (still being written?): nothing to serve".into(),
            }]),
        ),
        Ok(text) => (Some(blake3::hash(text.as_bytes())), config::parse_file(&text, path)),
        Err(e) => (
            None,
            Err(vec![ConfigIssue { path: path.display().to_string(), message: format!("cannot read: {e}") }]),
        ),
    }
}

/// The result of one reload.
#[derive(Debug, Clone)]
pub enum ReloadResult {
    /// The new snapshot is serving.
    Applied(Value),
    /// The config was rejected; the old snapshot keeps serving.
    Rejected(Value),
    /// Started without `--config`: nothing to reread.
    NoSource,
}

impl ReloadResult {
    /// The admin API's answer: 200, 400 with the issues, or 409.
    pub fn into_reply(self) -> Reply {
        match self {
            ReloadResult::Applied(doc) => Reply::json_value(200, &doc),
            ReloadResult::Rejected(doc) => Reply::json_value(400, &doc),
            ReloadResult::NoSource => Reply::json_value(409, &json!({ "error": NO_SOURCE })),
        }
    }
}

const NO_SOURCE: &str =
    "serving the built-in config (started without --config): there is no file to reload; restart with --config FILE";

struct Record {
    /// Digest of the file contents last read (loaded or rejected).
    seen: Option<blake3::Hash>,
    /// Digest of the TLS files as the last reload (or the start) found
    /// them ([`Reloader::tls_digest`]).
    seen_tls: Option<blake3::Hash>,
    /// The last reload's document.
    last: Option<Value>,
}

/// Reloads the config into the shared state.
pub struct Reloader {
    state: Arc<AppState>,
    source: ConfigSource,
    one_at_a_time: Mutex<()>,
    record: Mutex<Record>,
}

impl Reloader {
    /// A reloader for `state`, whose config came from `source`.
    pub fn new(state: Arc<AppState>, source: ConfigSource) -> Reloader {
        let seen = source.loaded_digest;
        let seen_tls = tls_digest(&state.snapshot.load().config);
        Reloader {
            state,
            source,
            one_at_a_time: Mutex::new(()),
            record: Mutex::new(Record { seen, seen_tls, last: None }),
        }
    }

    /// The config file, `None` for the built-in config.
    pub fn source_path(&self) -> Option<&std::path::Path> {
        self.source.path.as_deref()
    }

    /// The config file, or `built-in`.
    pub fn source_label(&self) -> String {
        self.source.path.as_ref().map_or_else(|| "built-in".to_string(), |p| p.display().to_string())
    }

    /// The last reload's outcome (`null` before the first).
    pub fn last_outcome(&self) -> Value {
        self.record.lock().last.clone().unwrap_or(Value::Null)
    }

    /// How often to poll the file, when watching it: `None` for the
    /// built-in config or `[reload] watch = false`.
    pub fn watch_interval(&self) -> Option<Duration> {
        self.source.path.as_ref()?;
        let reload = self.state.snapshot.load().config.reload;
        reload.watch.then_some(reload.interval)
    }

    /// The model store to poll and how often, with whether the running
    /// generation was built while it was unreachable (`None`: no store, no
    /// polling, or no file to reload).
    pub fn store_poll(&self) -> Option<(Duration, Arc<ModelStore>, bool)> {
        self.source.path.as_ref()?;
        let snap = self.state.snapshot.load();
        let store = snap.config.store.as_ref()?;
        let resolved = store.resolved.as_ref()?;
        Some((store.poll_interval?, Arc::clone(&resolved.store), resolved.from_cache))
    }

    /// The digest of the file's contents now, when they differ from those
    /// last read (`None`: unchanged, unreadable, or no file).
    pub fn file_changed(&self) -> Option<blake3::Hash> {
        let now = self.file_digest()?;
        (self.record.lock().seen != Some(now)).then_some(now)
    }

    /// Whether the certificate, key or client-CA files of the listeners'
    /// TLS changed since the last reload read them (a rotation to apply;
    /// always false without a config file).
    pub fn tls_files_changed(&self) -> bool {
        self.source.path.is_some() && self.tls_digest() != self.record.lock().seen_tls
    }

    /// The digest of the TLS files the running config names, as they are
    /// now (`None`: no listener has TLS).
    pub fn tls_digest(&self) -> Option<blake3::Hash> {
        tls_digest(&self.state.snapshot.load().config)
    }

    /// The digest of the file's contents now (`None`: unreadable or no file).
    pub fn file_digest(&self) -> Option<blake3::Hash> {
        let path = self.source.path.as_ref()?;
        std::fs::read(path).ok().map(|bytes| blake3::hash(&bytes))
    }

    /// [`Self::reload`] on tokio's blocking pool (it may build sessions).
    pub async fn reload_async(self: &Arc<Self>, trigger: Trigger) -> ReloadResult {
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || this.reload(trigger)).await.unwrap_or_else(|e| {
            ReloadResult::Rejected(
                json!({ "status": "rejected", "error": format!("reload task failed: {e}") }),
            )
        })
    }

    /// Rereads the file and swaps in its snapshot (see the module docs).
    /// Blocking; waits for a reload already running.
    pub fn reload(&self, trigger: Trigger) -> ReloadResult {
        let _one = self.one_at_a_time.lock();
        let Some(path) = &self.source.path else {
            tracing::warn!(trigger = trigger.as_str(), "{NO_SOURCE}");
            return ReloadResult::NoSource;
        };
        let started = Instant::now();
        let current = self.state.snapshot.load_full();
        let tls_before = tls_digest(&current.config);
        let (digest, parsed) = read_config_file(path);
        if digest.is_some() {
            self.record.lock().seen = digest;
        }
        let built = parsed.and_then(|mut config| {
            self.source.overrides.apply(&mut config);
            build::next_snapshot_with(config, &current, &self.state.rollouts)
        });
        let result = match built {
            Ok(built) => {
                if let Err(e) = built.snapshot.repo.start_idle_reaper() {
                    tracing::warn!(error = %e, "idle-unload thread not started for the new models");
                }
                let doc = applied_doc(trigger, &built, started.elapsed());
                self.state.snapshot.store(Arc::new(built.snapshot));
                tracing::info!(trigger = trigger.as_str(), outcome = %doc, "config reloaded");
                ReloadResult::Applied(doc)
            }
            Err(issues) => {
                for issue in &issues {
                    tracing::warn!(trigger = trigger.as_str(), path = %issue.path, message = %issue.message,
                        "config reload rejected");
                }
                ReloadResult::Rejected(rejected_doc(trigger, &issues, current.generation))
            }
        };
        if let ReloadResult::Applied(doc) | ReloadResult::Rejected(doc) = &result {
            let mut record = self.record.lock();
            record.last = Some(doc.clone());
            record.seen_tls = tls_before;
        }
        result
    }
}

/// A digest of the paths and contents of every TLS file `config` names
/// (an unreadable file counts as empty); `None` when no listener has TLS.
fn tls_digest(config: &Config) -> Option<blake3::Hash> {
    let mut hasher = blake3::Hasher::new();
    let mut any = false;
    for (listener, tls) in config.server.tls.each() {
        any = true;
        hasher.update(listener.as_bytes());
        let files = &tls.files;
        for path in [Some(&files.cert), Some(&files.key), files.client_ca.as_ref()].into_iter().flatten() {
            let bytes = std::fs::read(path).unwrap_or_default();
            hasher.update(path.as_os_str().as_encoded_bytes());
            hasher.update(&(bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
        }
    }
    any.then(|| hasher.finalize())
}

fn applied_doc(trigger: Trigger, built: &build::Built, took: Duration) -> Value {
    let report = &built.report;
    json!({
        "status": "applied",
        "generation": built.snapshot.generation,
        "trigger": trigger.as_str(),
        "duration_ms": u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        "models": {
            "reused": report.reused,
            "changed": report.changed.iter()
                .map(|(name, why)| json!({ "name": name, "why": format!("{why:?}") }))
                .collect::<Vec<_>>(),
            "loaded": report.loaded.iter()
                .map(|(name, took)| json!({ "name": name, "cold_start_ms": took.as_millis() as u64 }))
                .collect::<Vec<_>>(),
            "removed": report.removed,
            "still_failed": report.still_failed.iter()
                .map(|(name, why)| json!({ "name": name, "error": why }))
                .collect::<Vec<_>>(),
        },
        "restart_pending": built.snapshot.restart_pending,
    })
}

fn rejected_doc(trigger: Trigger, issues: &[ConfigIssue], kept: u64) -> Value {
    json!({
        "status": "rejected",
        "error": format!("config rejected with {} problem(s); generation {kept} keeps serving", issues.len()),
        "generation": kept,
        "trigger": trigger.as_str(),
        "issues": issues.iter().map(|i| json!({ "path": i.path, "message": i.message })).collect::<Vec<_>>(),
    })
}
