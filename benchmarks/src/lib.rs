//! Benchmark tooling for Switchyard: the `loadgen` HTTP load generator (and
//! the runtime benchmarks, which live in their own binary).

pub mod loadgen;
pub mod sse;
