//! Decide and execute: which model, on which pool, answers an inference
//! request. [`execute`] is the one seam between the front ends (which
//! decode and encode) and everything that chooses and runs models, for a
//! plain call and a streamed one (draft then final) alike; the cache wraps
//! it.
//!
//! Per request: the handler resolves the budget ([`budget`]) before the
//! cache is consulted; then [`execute`] builds the fleet view ([`fleet`]),
//! lets the route's policy (`router-policies`) decide, executes the plan
//! with fallbacks ([`run`], [`placements`], [`cascade`]) or runs the route's
//! cheap/heavy pair ([`draft`]), shadows a calibrated route's call
//! ([`calibration`]), marks a degraded answer ([`judge`]), and counts the
//! decision ([`decisions`]).

pub mod backend;
pub mod budget;
pub mod budget_misses;
pub mod calibration;
pub mod cascade;
pub mod confidence;
pub mod decisions;
pub mod draft;
mod execute;
pub mod fleet;
pub mod mixed_backend;
pub mod placements;
pub mod priority;
pub mod rollout;
pub mod run;
pub mod sticky;

pub use execute::{execute, RouteRequest, RoutingContext, Strategy};
pub use switchyard_protocol::answer::Answer;
