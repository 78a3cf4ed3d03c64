//! `GET /admin/models`, `POST /admin/models/{m}/load` and `.../unload`,
//! acting on the snapshot in force. A model unloaded here is loaded again
//! by its next request (or by `load`).

use super::stats::model_json;
use super::AdminCall;
use crate::error::GatewayError;
use crate::reply::Reply;
use serde_json::{json, Value};

/// Every configured model: its spec (file, version, warm-up), the routes
/// that use it, and its live state and statistics.
pub fn list(call: &AdminCall) -> Reply {
    let snap = call.state.snapshot.load();
    let stats = snap.repo.stats();
    let models: Vec<Value> = snap
        .config
        .models
        .iter()
        .map(|spec| {
            let mut entry = stats.model(&spec.name).map(model_json).unwrap_or_else(|| json!({}));
            entry["name"] = spec.name.clone().into();
            entry["path"] = spec.path.display().to_string().into();
            entry["warmup"] = spec.warmup.into();
            entry["idle_unload_s"] = spec.idle_unload.map(|d| d.as_secs()).into();
            entry["routes"] = snap
                .config
                .routes
                .iter()
                .filter(|r| r.models.contains(&spec.name))
                .map(|r| r.name.clone())
                .collect::<Vec<_>>()
                .into();
            entry
        })
        .collect();
    Reply::json_value(200, &json!({ "generation": snap.generation, "models": models }))
}

fn model_param(call: &AdminCall) -> String {
    call.params.first().cloned().unwrap_or_default()
}

/// Loads the model's sessions now; 200 with the cold-start time and each
/// pool's outcome, 404 for an unknown model, the runtime's status when
/// the load fails.
pub async fn load(call: AdminCall) -> Reply {
    let name = model_param(&call);
    let repo = call.state.snapshot.load().repo.clone();
    match repo.load(&name).await {
        Ok(report) => {
            let pools: Vec<Value> = report
                .pools
                .iter()
                .map(|(pool, outcome)| json!({ "pool": pool, "ok": outcome.is_ok(), "error": outcome.as_ref().err() }))
                .collect();
            let cold_start_us = u64::try_from(report.cold_start.as_micros()).unwrap_or(u64::MAX);
            Reply::json_value(
                200,
                &json!({ "model": name, "state": "ready", "cold_start_us": cold_start_us, "pools": pools }),
            )
        }
        Err(e) => Reply::error(&GatewayError::from(e)),
    }
}

/// Drops the model's sessions (requests already queued complete).
pub async fn unload(call: AdminCall) -> Reply {
    let name = model_param(&call);
    let repo = call.state.snapshot.load().repo.clone();
    match repo.unload(&name) {
        Ok(()) => Reply::json_value(200, &json!({ "model": name, "state": "unloaded" })),
        Err(e) => Reply::error(&GatewayError::from(e)),
    }
}
