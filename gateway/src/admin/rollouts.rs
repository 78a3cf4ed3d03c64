//! Routes' candidates on the admin API ([`crate::routing::rollout`]):
//!
//! - `GET /admin/rollouts` (and `rollouts` in `/admin/stats`): per route,
//!   the rollout (candidate, plan, step, state with its reasons, the
//!   gate's verdict so far, the comparison of the whole rollout and of the
//!   step, its moves) and what the snapshot in force serves (`in_force`:
//!   its generation, the route's models and the candidate's share, `null`
//!   once promoted or rolled back) and `pending`: true while the state
//!   the rollout wants is not yet in force (its reload is running, or was
//!   rejected);
//! - `POST /admin/rollouts/{route}/promote`, `.../rollback`: an operator's
//!   move, applied at once through a config reload (trigger `rollout`);
//!   404 for a route without a candidate, 409 when the rollout is already
//!   promoted or rolled back.

use super::AdminCall;
use crate::config::candidate_section::CandidateSource;
use crate::error::GatewayError;
use crate::reload::{ReloadResult, Trigger};
use crate::reply::Reply;
use crate::routing::rollout::{RefusedMove, Status};
use crate::state::AppState;
use serde_json::{json, Value};

/// Every rollout with what is in force, keyed by route.
pub fn rollouts_json(state: &AppState) -> Value {
    let snap = state.snapshot.load();
    let mut all = serde_json::Map::new();
    for view in state.rollouts.views() {
        let route = snap.config.routes.iter().find(|r| r.name == view.route);
        let in_force_candidate = route.and_then(|r| r.candidate.as_ref());
        let pending = match &view.status {
            Status::Mirroring => in_force_candidate.is_none_or(|c| c.step != view.step),
            // A store version promoted serves under the model's name.
            Status::Promoted { .. } if view.source == CandidateSource::Store => in_force_candidate.is_some(),
            Status::Promoted { .. } => route.is_none_or(|r| r.models != [view.candidate.clone()]),
            Status::RolledBack { .. } => in_force_candidate.is_some(),
        };
        let in_force = json!({
            "generation": snap.generation,
            "models": route.map(|r| r.models.clone()),
            "candidate": route.and_then(|r| r.candidate.as_ref())
                .map(|c| json!({ "model": c.model, "share": c.share(), "step": c.step })),
        });
        let mut doc = serde_json::to_value(&view).unwrap_or_default();
        doc["in_force"] = in_force;
        doc["pending"] = pending.into();
        all.insert(view.route.clone(), doc);
    }
    all.into()
}

/// `POST /admin/rollouts/{route}/promote`
pub async fn promote(call: AdminCall) -> Reply {
    by_hand(call, true).await
}

/// `POST /admin/rollouts/{route}/rollback`
pub async fn roll_back(call: AdminCall) -> Reply {
    by_hand(call, false).await
}

async fn by_hand(call: AdminCall, promote: bool) -> Reply {
    let [route] = call.params.as_slice() else {
        return Reply::error(&GatewayError::NotFound("expected a route".into()));
    };
    let transition = match call.state.rollouts.by_hand(route, promote) {
        Ok(t) => t,
        Err(RefusedMove::NoRollout(route)) => {
            return Reply::error(&GatewayError::NotFound(format!("route {route:?} has no candidate")))
        }
        Err(RefusedMove::Finished(state)) => {
            return Reply::json_value(409, &json!({ "error": format!("the rollout is already {state}") }))
        }
    };
    crate::reload::rollout::log_move(&transition);
    let reload = match call.reloader.reload_async(Trigger::Rollout).await {
        ReloadResult::Applied(doc) | ReloadResult::Rejected(doc) => doc,
        ReloadResult::NoSource => Value::Null,
    };
    let rollout = rollouts_json(&call.state).get(route.as_str()).cloned().unwrap_or_default();
    Reply::json_value(200, &json!({ "route": route, "reload": reload, "rollout": rollout }))
}
