//! The Rust types and server trait generated from `gateway/proto/grpc_service.proto`
//! (and the Triton model configuration it imports) by `gateway/build.rs`.

#![allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

tonic::include_proto!("inference");
