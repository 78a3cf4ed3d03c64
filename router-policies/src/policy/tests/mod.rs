//! Tests across the policies: parsing and validating `PolicyConfig`,
//! paused pools, and a small simulation of spill-over under load.

mod config;
mod paused;
mod simulation;
