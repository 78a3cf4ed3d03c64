//! Waiting for a queued request's result, within the caller's deadline
//! when the pool is paused.
//!
//! A pool that an operator paused ([`crate::ModelRepository::set_paused`])
//! runs nothing until it is resumed; routing avoids it, but a request that
//! had nowhere else to go, or was queued before the pause, waits there.
//! With a deadline, such a request gives up when the deadline has passed
//! and the pool is paused (at the deadline, or later, the moment it is
//! paused): the caller gets [`RuntimeError::Paused`] and the queued entry,
//! whose receiver is dropped, is skipped by the worker and counted as
//! cancelled. A pool that is not paused is waited for as before: a slow
//! queue still answers, late.

use std::time::Instant;

use crate::dispatch::Pending;
use crate::error::RuntimeError;
use crate::pause::PauseGate;
use crate::request::InferenceResponse;

/// Where a queued request waits: its model and pool, and the pool's gate.
#[derive(Clone, Copy)]
pub struct WaitOn<'a> {
    /// The model's name (for errors).
    pub model: &'a str,
    /// The pool's name (for errors).
    pub pool: &'a str,
    /// The pool's pause gate.
    pub gate: &'a PauseGate,
}

/// Waits for `pending`; with a `deadline`, gives up as described in the
/// module docs.
pub async fn wait(
    mut pending: Pending,
    on: WaitOn<'_>,
    deadline: Option<Instant>,
) -> Result<InferenceResponse, RuntimeError> {
    let stopped =
        || RuntimeError::Execution { model: on.model.to_string(), reason: "the worker stopped".into() };
    let Some(deadline) = deadline else {
        return pending.await.unwrap_or_else(|_| Err(stopped()));
    };
    tokio::select! {
        result = &mut pending => return result.unwrap_or_else(|_| Err(stopped())),
        () = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {}
    }
    let mut paused = on.gate.watch();
    loop {
        if *paused.borrow_and_update() {
            // Dropping `pending` tells the worker to skip the entry.
            return Err(RuntimeError::Paused { model: on.model.to_string(), pool: on.pool.to_string() });
        }
        tokio::select! {
            result = &mut pending => return result.unwrap_or_else(|_| Err(stopped())),
            changed = paused.changed() => {
                if changed.is_err() {
                    return pending.await.unwrap_or_else(|_| Err(stopped()));
                }
            }
        }
    }
}
