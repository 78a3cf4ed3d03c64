//! A route's candidate posted to the admin API ([`crate::routing::rollout`]):
//!
//! - `POST /admin/rollouts/{route}`: the body is a candidate table, as the
//!   route's `candidate = { ... }` in the config file (`model`, `share` or
//!   `steps`, `gate`, `min_rows`, `compare`), in JSON (an object) or TOML.
//!   It is checked as the file's would be, problems named by their field
//!   path as the route's candidate (`routes[2].candidate.steps[1]`), 400
//!   with all of them and nothing changed. A valid one replaces the
//!   route's candidate (the file's, or one posted before) through a config
//!   reload (trigger `rollout`) and starts a fresh rollout; the reload's
//!   own checks (the candidate's signature against the route's) reject it
//!   with 400 and restore what was in force. 404 for an unknown route, 409
//!   without a config file to reload.
//! - `DELETE /admin/rollouts/{route}`: withdraws a posted candidate (the
//!   file's, if any, is in force again), through a reload; 404 when none
//!   was posted.
//!
//! A posted candidate lasts until it is replaced or withdrawn, across
//! reloads of the file; a restart forgets it.

use super::rollouts::rollouts_json;
use super::AdminCall;
use crate::config::candidate_section::{self, CandidateConfig, CandidateSource, RawCandidate};
use crate::config::issue::Issues;
use crate::config::ConfigIssue;
use crate::error::GatewayError;
use crate::reload::{ReloadResult, Trigger};
use crate::reply::Reply;
use crate::routing::rollout::Undo;
use serde_json::{json, Value};
use std::collections::HashSet;

/// `POST /admin/rollouts/{route}`
pub async fn post(call: AdminCall) -> Reply {
    let [route] = call.params.as_slice() else {
        return Reply::error(&GatewayError::NotFound("expected a route".into()));
    };
    let candidate = {
        let snap = call.state.snapshot.load();
        let Some(index) = snap.config.routes.iter().position(|r| &r.name == route) else {
            return Reply::error(&GatewayError::NotFound(format!("no route named {route:?}")));
        };
        let path = format!("routes[{index}]");
        let raw = match parse(&call.body, &format!("{path}.candidate")) {
            Ok(raw) => raw,
            Err(issue) => return refused(&[issue]),
        };
        let upstream_models =
            snap.config.proxy.upstreams.iter().flat_map(|u| u.models.iter().map(|m| &m.name));
        let local: HashSet<String> =
            snap.config.models.iter().map(|m| &m.name).chain(upstream_models).cloned().collect();
        let mut issues = Issues::default();
        let checked = candidate_section::check(
            Some(&raw),
            &local,
            &snap.config.routes[index].models,
            &path,
            &mut issues,
        );
        match checked {
            Some(c) if issues.is_empty() => CandidateConfig { source: CandidateSource::Admin, ..c },
            _ => return refused(&issues.into_vec()),
        }
    };
    let undo = call.state.rollouts.post(route, candidate);
    reload(&call, route, undo).await
}

/// `DELETE /admin/rollouts/{route}`
pub async fn withdraw(call: AdminCall) -> Reply {
    let [route] = call.params.as_slice() else {
        return Reply::error(&GatewayError::NotFound("expected a route".into()));
    };
    let Some(undo) = call.state.rollouts.withdraw(route) else {
        return Reply::error(&GatewayError::NotFound(format!("route {route:?} has no posted candidate")));
    };
    reload(&call, route, undo).await
}

/// Applies a post or withdrawal through a reload; undone when the reload
/// is rejected (400 with its issues) or impossible (409).
async fn reload(call: &AdminCall, route: &str, undo: Undo) -> Reply {
    // The lock-free window between the change and the reload is harmless:
    // another reload meanwhile applies the change too, as this one would.
    match call.reloader.reload_async(Trigger::Rollout).await {
        ReloadResult::Applied(doc) => answer(call, route, doc),
        ReloadResult::Rejected(doc) => {
            call.state.rollouts.undo(undo);
            Reply::json_value(400, &doc)
        }
        ReloadResult::NoSource => {
            call.state.rollouts.undo(undo);
            Reply::json_value(409, &json!({ "error": NO_FILE }))
        }
    }
}

const NO_FILE: &str = "serving the built-in config (started without --config): a posted candidate needs a \
                       config file to reload; restart with --config FILE";

/// The body as a candidate table: a JSON object, or TOML; a problem is
/// named by its field path under `path`.
fn parse(body: &[u8], path: &str) -> Result<RawCandidate, ConfigIssue> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(ConfigIssue::new(path, "the body is not UTF-8"));
    };
    if text.trim().is_empty() {
        return Err(ConfigIssue::new(path, "the body is empty: post a candidate table (JSON or TOML)"));
    }
    let at = |field: String| {
        if field == "." || field.is_empty() {
            path.to_string()
        } else {
            format!("{path}.{field}")
        }
    };
    if text.trim_start().starts_with('{') {
        let mut de = serde_json::Deserializer::from_str(text);
        return serde_path_to_error::deserialize(&mut de)
            .map_err(|e| ConfigIssue::new(at(e.path().to_string()), e.inner().to_string()));
    }
    let de = toml::Deserializer::parse(text).map_err(|e| ConfigIssue::new(path, e.to_string()))?;
    serde_path_to_error::deserialize(de)
        .map_err(|e| ConfigIssue::new(at(e.path().to_string()), e.inner().to_string()))
}

fn refused(issues: &[ConfigIssue]) -> Reply {
    Reply::json_value(
        400,
        &json!({
            "error": format!("candidate rejected with {} problem(s); nothing changed", issues.len()),
            "issues": issues.iter().map(|i| json!({ "path": i.path, "message": i.message })).collect::<Vec<_>>(),
        }),
    )
}

fn answer(call: &AdminCall, route: &str, reload: Value) -> Reply {
    let rollout = rollouts_json(&call.state).get(route).cloned().unwrap_or_default();
    Reply::json_value(200, &json!({ "route": route, "reload": reload, "rollout": rollout }))
}
