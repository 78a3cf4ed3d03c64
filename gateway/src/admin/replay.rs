//! `POST /admin/replay`: the live server's traffic sample replayed through
//! a candidate config posted as the body (TOML), beside the config in
//! force, the same as `switchyard replay` ([`crate::replay`]) does from the
//! command line. Nothing is applied: the answer is the report, one per
//! traffic file of the routes that record, as JSON.
//!
//! The candidate is checked first (400 with its field-path problems,
//! nothing run); its relative paths start where the config in force's do.
//! The replay prepares each config's models anew in a blocking thread, so
//! it takes the memory of those models for as long as it runs.
//!
//! One replay runs at a time: a call while one runs is answered 429 with
//! `Retry-After` at once (six at once took RSS from 156 to 664 MB). The
//! slot is held by the replay's thread, not by the call: a client that
//! goes away does not free it before its replay has ended.

use super::AdminCall;
use crate::config::{self, Config};
use crate::reply::Reply;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a replay is running in this process.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Seconds a refused call is told to wait before it tries again.
const RETRY_AFTER_S: u64 = 5;

/// The one replay slot, held while a replay runs; freed on drop.
struct Slot;

impl Slot {
    /// The slot, unless a replay holds it.
    fn take() -> Option<Slot> {
        RUNNING.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::Release);
    }
}

/// Replays the recorded routes' traffic through the posted candidate.
pub async fn replay(call: AdminCall) -> Reply {
    let text = match std::str::from_utf8(&call.body) {
        Ok(t) if !t.trim().is_empty() => t.to_string(),
        Ok(_) => return bad("post the candidate config (TOML) as the request body"),
        Err(_) => return bad("the body is not UTF-8 text"),
    };
    let base = call
        .reloader
        .source_path()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let candidate = match config::parse(&text, &base) {
        Ok(c) => c,
        Err(issues) => {
            let listed: Vec<_> =
                issues.iter().map(|i| json!({ "path": i.path, "message": i.message })).collect();
            return Reply::json_value(
                400,
                &json!({ "error": format!("the candidate config has {} problem(s); nothing was run", issues.len()), "issues": listed }),
            );
        }
    };
    let current: Config = call.state.snapshot.load().config.clone();
    let mut traffic: Vec<PathBuf> =
        current.routes.iter().filter_map(|r| r.record.as_ref().map(|c| c.path.clone())).collect();
    traffic.dedup();
    traffic.retain(|p| p.exists());
    if traffic.is_empty() {
        return Reply::json_value(
            409,
            &json!({ "error": "no route of the config in force has recorded traffic yet (routes[].record)" }),
        );
    }
    let Some(slot) = Slot::take() else {
        return Reply::json_value(
            429,
            &json!({ "error": "a replay is already running; one runs at a time (retry after it ends)" }),
        )
        .with_header(http::header::RETRY_AFTER, RETRY_AFTER_S.to_string());
    };
    let label = call.reloader.source_label();
    let ran = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        traffic
            .iter()
            .map(|file| {
                let configs =
                    vec![(label.clone(), current.clone()), ("candidate".to_string(), candidate.clone())];
                crate::replay::replay_loaded(configs, file, crate::replay::Pace::Fast)
            })
            .collect::<Result<Vec<_>, String>>()
    })
    .await;
    match ran {
        Ok(Ok(reports)) => Reply::json_value(200, &json!({ "reports": reports })),
        Ok(Err(message)) => Reply::json_value(422, &json!({ "error": message })),
        Err(e) => Reply::json_value(500, &json!({ "error": format!("the replay stopped: {e}") })),
    }
}

fn bad(message: &str) -> Reply {
    Reply::json_value(400, &json!({ "error": message }))
}
