//! Benchmark tooling for Switchyard: the `loadgen` HTTP load generator,
//! and the closed loops over the runtime that the `runtime-bench` and
//! `device-bench` binaries measure with.

pub mod isolation_loops;
pub mod loadgen;
pub mod pin;
pub mod runtime_loops;
pub mod sse;
