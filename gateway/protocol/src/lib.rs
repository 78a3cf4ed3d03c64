//! Switchyard's protocol types: what a request and its answer are on the
//! wire and in between, with no server in them.
//!
//! * [`v2`]: the Open Inference Protocol (KServe V2) REST codec with
//!   Triton's binary tensor data and classification extensions: bytes in,
//!   typed tensors out, and back; the metadata documents; every client
//!   error with its HTTP status ([`v2::V2Error`]).
//! * [`Answer`]: the final answer to an inference request and how it was
//!   reached (model, pool, device, reason, budget): what routing returns,
//!   the cache stores and every front end encodes.
//!
//! Why a crate of its own: these types have consumers besides the
//! gateway's REST handlers: the gRPC front end (which shares the binary
//! codec and `Answer`), the upstream V2 client, and the fuzz targets
//! (which drive the decoder alone). A consumer takes the codec without
//! Pingora, tonic, Redis or the runtime's pools. The crate names only the
//! runtime's tensor types and the policies' `Reason` and `Device`. The
//! benchmarks' load generator keeps its own request writer on purpose: a
//! client that shared the server's codec would hide the codec's bugs from
//! the benchmarks and the compatibility tests.

pub mod answer;
pub mod v2;

pub use answer::Answer;
