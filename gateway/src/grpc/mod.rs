//! The Open Inference Protocol over gRPC (`inference.GRPCInferenceService`,
//! as served by Triton and KServe), beside REST, for `tritonclient.grpc`,
//! `perf_analyzer -i grpc` and every client generated from the protocol.
//!
//! Off by default; `server.grpc_listen = "127.0.0.1:8001"` (or
//! `--grpc-listen`) starts it on its own port. A separate port, not h2c on
//! the REST port: Pingora's server answers HTTP/1.1 and HTTP/2 requests as
//! proxied HTTP, while gRPC needs trailers and streams in both directions
//! for `ModelStreamInfer`; tonic's HTTP/2 server does that natively, and
//! Triton's clients already expect gRPC on a port of its own (8001).
//!
//! One code path with REST: a call's protobuf is decoded into the same
//! [`switchyard_protocol::v2::DecodedRequest`] ([`decode`]) and run by
//! [`crate::inference`] (signature checks, budget, cache, routing, output
//! shaping), names are authorized by [`crate::auth`] from the call's
//! metadata, metadata and statistics calls send the REST documents ([`metadata`]), and
//! errors keep their REST meaning through one status mapping ([`status`]).
//!
//! - [`proto`]: the generated types (`gateway/proto/grpc_service.proto`).
//! - [`service`]: the calls; [`infer`]: one inference call; [`stream`]:
//!   `ModelStreamInfer` (draft then final); [`call`]: metadata, deadline,
//!   admission, metrics and log.
//! - [`decode`], [`encode`], [`params`]: the protocol's messages to and
//!   from the V2 request and response; [`codec`]: the wire codec, which
//!   counts a message's repeated fields ([`bounds`], [`wire`]) before
//!   decoding it.
//! - [`listener`]: the tonic server, as a Pingora background service.

pub mod bounds;
pub mod call;
pub mod codec;
pub mod conn;
pub mod decode;
pub mod edge;
pub mod encode;
pub mod incoming;
pub mod infer;
pub mod listener;
pub mod metadata;
pub mod params;
pub mod proto;
pub mod service;
pub mod status;
pub mod stream;
pub mod wire;

pub use listener::GrpcListener;
