//! The rollout loop: judges every route's rollout plan
//! ([`crate::routing::rollout::Rollouts::evaluate`]) every [`TICK`] and
//! applies each move (next step, promotion, rollback) at once through a
//! config reload (trigger `rollout`), which puts the rollouts' wishes in
//! force over the file's config. A reload that is rejected (the file was
//! broken meanwhile) leaves the move wanted; the next reload applies it.

use super::{ReloadResult, Reloader, Trigger};
use crate::routing::rollout::{Status, Transition};
use std::sync::Arc;
use std::time::Duration;

/// How often plans are judged.
pub const TICK: Duration = Duration::from_millis(200);

/// Judges the plans forever (on the reload thread's runtime).
pub async fn run(reloader: Arc<Reloader>) {
    loop {
        tokio::time::sleep(TICK).await;
        let moves = reloader.state.rollouts.evaluate();
        if moves.is_empty() {
            continue;
        }
        moves.iter().for_each(log_move);
        if let ReloadResult::Rejected(doc) = reloader.reload_async(Trigger::Rollout).await {
            tracing::warn!(outcome = %doc, "the rollout's move waits for a config that reloads");
        }
    }
}

/// Logs one move: what will be in force once reloaded.
pub fn log_move(t: &Transition) {
    match &t.status {
        Status::Mirroring => tracing::info!(route = %t.route, candidate = %t.candidate, step = t.step,
            "rollout: gate held, mirroring the next share"),
        Status::Promoted { by } => tracing::info!(route = %t.route, candidate = %t.candidate, ?by,
            "rollout: candidate promoted, it now serves the route alone"),
        Status::RolledBack { by, reasons } => tracing::warn!(route = %t.route, candidate = %t.candidate, ?by,
            reasons = %reasons.join("; "), step = t.step,
            "rollout: candidate rolled back, the route serves its models from the config file without it"),
    }
}
