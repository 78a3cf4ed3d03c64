//! Fuzz targets for the parsers that take bytes from outside: the V2 JSON
//! request decoder, the binary tensor extension, the gRPC infer request
//! (protobuf, then its tensors), the TOML config loader
//! and validator, the SSE event framing, and the text bounding that runs
//! before tokenisation.
//!
//! Each target's `run(data)` feeds the bytes to the real gateway or
//! runtime function and panics when a property breaks: a panic inside the
//! parser, an error that would not be a 4xx, a decoded request outside its
//! limits, an SSE event a client would read back differently. The same
//! functions run two ways:
//!
//! - under AFL++ (coverage-guided, on stable Rust through `cargo afl`):
//!   `make fuzz-quick` (a minute per target) and `make fuzz` (long), the
//!   binaries in `src/bin/` built with the `afl` feature;
//! - as ordinary tests (`tests/corpus.rs`): every file of `corpus/<target>/`
//!   (seeds taken from the tests) and `regressions/<target>/` (inputs that
//!   once broke a property) is replayed by `cargo test`.

#![warn(missing_docs)]

pub mod targets;
