//! `POST /admin/models/{model}/pools/{pool}/pause` and `.../resume` on the
//! admin listener: hold a pool's workers between batches, or let them go
//! on ([`switchyard_runtime::ModelRepository::set_paused`]).
//!
//! While a pool is paused its requests wait in the queue, and those whose
//! client goes away meanwhile are skipped (counted as `cancelled`) when it
//! resumes. Operators use it to drain a device for maintenance; tests use
//! it to hold a heavy run "not yet started" deterministically. A pause is
//! not kept across restarts; an unknown model or pool is a 404.

use crate::error::GatewayError;
use crate::reply::Reply;
use crate::state::AppState;

/// Answers a `POST` under `/admin/models/`.
pub fn answer(state: &AppState, path: &str) -> Reply {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let (model, pool, paused) = match parts.as_slice() {
        ["", "admin", "models", model, "pools", pool, "pause"] => (*model, *pool, true),
        ["", "admin", "models", model, "pools", pool, "resume"] => (*model, *pool, false),
        _ => return Reply::error(&GatewayError::NotFound(format!("no admin endpoint at POST {path}"))),
    };
    match state.repo.set_paused(model, pool, paused) {
        Ok(()) => {
            tracing::info!(model, pool, paused, "pool pause state changed");
            Reply::json_value(200, &serde_json::json!({ "model": model, "pool": pool, "paused": paused }))
        }
        Err(e) => Reply::error(&GatewayError::Runtime(e)),
    }
}
