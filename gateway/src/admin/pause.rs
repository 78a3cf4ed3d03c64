//! `POST /admin/models/{model}/pools/{pool}/pause` and `.../resume` on the
//! admin listener: hold a pool's workers between batches, or let them go
//! on ([`switchyard_runtime::ModelRepository::set_paused`]).
//!
//! While a pool is paused routing sends new requests to other pools and
//! models where it can (the fleet view marks the pool `paused`); requests
//! that still wait in its queue give up at their deadline with 503
//! (`RuntimeError::Paused`), and those whose client goes away meanwhile
//! are skipped (counted as `cancelled`) when it resumes. Operators use it
//! to take a device out of service; tests use it to hold a heavy run "not
//! yet started" deterministically. A pause is
//! not kept across restarts or reloads that replace the model; an unknown
//! model or pool is a 404.

use super::AdminCall;
use crate::error::GatewayError;
use crate::reply::Reply;

/// `.../pause`
pub async fn pause(call: AdminCall) -> Reply {
    set(&call, true)
}

/// `.../resume`
pub async fn resume(call: AdminCall) -> Reply {
    set(&call, false)
}

fn set(call: &AdminCall, paused: bool) -> Reply {
    let [model, pool] = call.params.as_slice() else {
        return Reply::error(&GatewayError::NotFound("expected a model and a pool".into()));
    };
    let repo = call.state.snapshot.load().repo.clone();
    match repo.set_paused(model, pool, paused) {
        Ok(()) => {
            tracing::info!(%model, %pool, paused, "pool pause state changed");
            Reply::json_value(200, &serde_json::json!({ "model": model, "pool": pool, "paused": paused }))
        }
        Err(e) => Reply::error(&GatewayError::Runtime(e)),
    }
}
