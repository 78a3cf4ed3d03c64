//! Upstream servers: other V2 inference servers (Triton, KServe, MLServer,
//! another Switchyard) whose models are route members, and plain HTTP
//! apps behind prefix routes ([`crate::proxy`]).
//!
//! - [`registry`]: the upstreams of a config, their addresses and models.
//! - [`address`], [`ewma`], [`select`]: per-address health, breaker and
//!   peak-EWMA latency; power-of-two-choices address selection.
//! - [`health`]: active health checks (`pingora-load-balancing`).
//! - [`client`], [`v2_codec`], [`v2_check`], [`v2_call`], [`metadata`]:
//!   the gateway's own V2 calls (binary tensors over a pooled HTTP/1.1
//!   client; answers checked against the request and the signature), with
//!   retries on other addresses inside the request's budget.
//! - [`catalog`]: model lookups for the V2 handlers.
//! - [`startup`]: reading upstream signatures at start-up.
//! - [`observe`]: the one place every upstream attempt is recorded.
//! - [`peer_tls`]: TLS of an `https://` upstream's Pingora peers.

pub mod address;
pub mod catalog;
pub mod client;
pub mod ewma;
pub mod health;
pub mod metadata;
pub mod observe;
pub mod peer_tls;
pub mod registry;
pub mod select;
pub mod startup;
pub mod stats;
pub mod v2_call;
pub mod v2_check;
pub mod v2_codec;

pub use catalog::Catalog;
pub use registry::{Upstream, Upstreams};
