//! Unit tests of the crate, one file per concept, sharing fixtures.

mod budget;
mod cascade;
mod config;
mod device_choice;
mod fixed;
mod fixtures;
mod latency_budget;
mod paused;
mod predict;
mod pressure;
mod simulation;
mod weighted;
