//! `POST /admin/config/edit`: change a route's cascade threshold, default
//! budget or cache TTL — first as a preview, then for real. The console
//! ([`super::console`]) drives it; scripts may too.
//!
//! The body is JSON: `{"route": "digits", "threshold": 0.7, "budget_ms":
//! 80, "ttl_s": 60, "apply": false, "base": "<digest>"}` (any of the three
//! values). The edit is written into the config file's own text
//! ([`crate::config::edit`]: comments and layout kept) and the result is
//! checked as a reload would check it. The answer carries the candidate
//! text, a unified diff against the file and the file's digest (`base`):
//!
//! - `apply: false` (the default): nothing else happens. The console then
//!   posts `candidate` to `/admin/replay` to show what the change would do.
//! - `apply: true`: the file is replaced (a temporary file of its own
//!   name renamed over it, so a reader never sees half a file) and
//!   reloaded through the usual reload path (trigger `console`). Applies
//!   run one at a time, from reading the file to the end of the reload, so
//!   concurrent applies without `base` each edit the file as the previous
//!   one left it and the last one told "applied" is the one in force.
//!   When `base` is given and the file changed since, nothing is written
//!   (409). When the reload rejects the new file, the old text is put back
//!   and the old config keeps serving (422, with the reload's issues).
//!
//! The config file stays the source of truth: a gateway on its built-in
//! config, or whose file is read-only (no write permission bit: the file
//! is replaced by a rename, which its folder's permissions allow, so the
//! file's own bits are checked first) or cannot be written (a read-only
//! ConfigMap mount), answers 409 with the diff to apply where the config
//! is kept.

use super::AdminCall;
use crate::config::edit::{edit_route, RouteEdit};
use crate::config::{self, ConfigIssue};
use crate::reload::{ReloadResult, Trigger};
use crate::reply::Reply;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Held by an apply from reading the config file to the end of its
/// reload: applies are serialised, previews are not.
static APPLYING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Numbers the temporary files of this process, so that no two writers
/// ever share one.
static NEXT_TEMPORARY: AtomicU64 = AtomicU64::new(0);

/// The request body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditRequest {
    route: String,
    threshold: Option<f64>,
    budget_ms: Option<u64>,
    ttl_s: Option<u64>,
    #[serde(default)]
    apply: bool,
    base: Option<String>,
}

/// The config text an edit starts from, and where it lives.
struct Source {
    text: String,
    /// The file (its real path, links followed), `None` for the built-in config.
    file: Option<PathBuf>,
    /// Where relative paths in the config start.
    base_dir: PathBuf,
    label: String,
}

/// Previews or applies one route edit (module docs).
pub async fn edit(call: AdminCall) -> Reply {
    let request: EditRequest = match serde_json::from_slice(&call.body) {
        Ok(r) => r,
        Err(e) => return error(400, format!("the body is not a route edit: {e}"), None),
    };
    let route_edit = RouteEdit {
        route: request.route.clone(),
        threshold: request.threshold,
        budget_ms: request.budget_ms,
        ttl_s: request.ttl_s,
    };
    if route_edit.is_empty() {
        return error(400, "nothing to change: give threshold, budget_ms or ttl_s".into(), None);
    }
    let _turn = match request.apply {
        true => Some(APPLYING.lock().await),
        false => None,
    };
    let source = match read_source(&call) {
        Ok(s) => s,
        Err(message) => return error(500, message, None),
    };
    let base = blake3::hash(source.text.as_bytes()).to_hex().to_string();
    let candidate = match edit_route(&source.text, &route_edit) {
        Ok(c) => c,
        Err(issue) => return issues_reply("the edit cannot be made", &[issue]),
    };
    if let Err(issues) = config::parse(&candidate, &source.base_dir) {
        return issues_reply("the edited config is not valid; nothing was applied", &issues);
    }
    let diff = similar::TextDiff::from_lines(&source.text, &candidate)
        .unified_diff()
        .context_radius(2)
        .header(&source.label, "candidate")
        .to_string();
    let mut answer = json!({
        "route": request.route,
        "source": source.label,
        "base": base,
        "candidate": candidate,
        "diff": diff,
        "applied": false,
    });
    if !request.apply {
        return Reply::json_value(200, &answer);
    }
    let Some(file) = source.file else {
        answer["error"] = "the gateway serves its built-in config (started without --config): apply the diff to a config file and start with --config FILE".into();
        return Reply::json_value(409, &answer);
    };
    if request.base.as_ref().is_some_and(|b| *b != base) {
        answer["error"] = "the config file changed since the preview: preview the edit again".into();
        return Reply::json_value(409, &answer);
    }
    if let Err(e) = writable(&file).and_then(|()| replace_file(&file, &candidate)) {
        answer["error"] =
            format!("cannot write {}: {e}; apply the diff where the config is kept", file.display()).into();
        return Reply::json_value(409, &answer);
    }
    let reload = match call.reloader.reload_async(Trigger::Console).await {
        ReloadResult::Applied(doc) => {
            answer["applied"] = true.into();
            answer["reload"] = doc;
            return Reply::json_value(200, &answer);
        }
        ReloadResult::Rejected(doc) => doc,
        ReloadResult::NoSource => Value::Null,
    };
    answer["reload"] = reload;
    answer["error"] = match replace_file(&file, &source.text) {
        Ok(()) => "the reload rejected the edited file; the previous text is back and the old config keeps serving".into(),
        Err(e) => format!("the reload rejected the edited file and putting the previous text back failed: {e}; the old config keeps serving").into(),
    };
    Reply::json_value(422, &answer)
}

/// The config text in force: the file's current contents, or the built-in config.
fn read_source(call: &AdminCall) -> Result<Source, String> {
    let label = call.reloader.source_label();
    let Some(path) = call.reloader.source_path() else {
        return Ok(Source {
            text: config::DEFAULT_CONFIG.to_string(),
            file: None,
            base_dir: PathBuf::from("."),
            label,
        });
    };
    let file = std::fs::canonicalize(path).map_err(|e| format!("cannot find {}: {e}", path.display()))?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let base_dir = config::base_dir(path).to_path_buf();
    Ok(Source { text, file: Some(file), base_dir, label })
}

/// Refuses a file its owner marked read-only: replacing it by a rename
/// would go through, as only the folder's permissions rule a rename.
fn writable(file: &Path) -> std::io::Result<()> {
    match std::fs::metadata(file)?.permissions().readonly() {
        true => Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "the file is read-only")),
        false => Ok(()),
    }
}

/// Replaces `file`'s contents with `text` through a temporary file in the
/// same folder (named after the process and a counter, so concurrent
/// writers, in this process or another, never share one) renamed over
/// it, keeping the file's permissions.
fn replace_file(file: &Path, text: &str) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or_else(|| Path::new("."));
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = NEXT_TEMPORARY.fetch_add(1, Ordering::Relaxed);
    let temporary = dir.join(format!(".{name}.switchyard-edit-{}-{n}", std::process::id()));
    let permissions = std::fs::metadata(file)?.permissions();
    let written = (|| {
        let mut out = std::fs::OpenOptions::new().write(true).create_new(true).open(&temporary)?;
        std::io::Write::write_all(&mut out, text.as_bytes())?;
        out.sync_all()?;
        drop(out);
        std::fs::set_permissions(&temporary, permissions)?;
        std::fs::rename(&temporary, file)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

fn issues_reply(error_text: &str, issues: &[ConfigIssue]) -> Reply {
    let listed: Vec<Value> = issues.iter().map(|i| json!({ "path": i.path, "message": i.message })).collect();
    error(400, format!("{error_text}: {} problem(s)", issues.len()), Some(listed))
}

fn error(status: u16, message: String, issues: Option<Vec<Value>>) -> Reply {
    let mut body = json!({ "error": message });
    if let Some(issues) = issues {
        body["issues"] = issues.into();
    }
    Reply::json_value(status, &body)
}
