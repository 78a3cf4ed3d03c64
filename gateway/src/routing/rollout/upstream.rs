//! An upstream model as a route's candidate: mirrored calls go to its
//! upstream server over V2 ([`crate::upstream::v2_call`]), on idle
//! capacity only, as for a local candidate.
//!
//! "Idle" for an upstream is what this gateway can see of it: an address
//! that may take a request (health checks pass, breaker closed) and has
//! none of this gateway's requests in flight. A mirrored call ends by the
//! upstream's `timeouts.total` (else [`MIRROR_TIMEOUT`]), its addresses
//! tried as for a live call; its failure counts as a candidate error.

use crate::upstream::select::eligible;
use crate::upstream::{v2_call, Upstreams};
use std::time::{Duration, Instant};
use switchyard_runtime::{InferenceRequest, Tensor};

/// Longest mirrored call to an upstream without `timeouts.total`.
pub const MIRROR_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether upstream model `model` can take a mirrored call now (module
/// docs); false for a name that is not an upstream model.
pub fn idle(upstreams: &Upstreams, model: &str) -> bool {
    let Some((upstream, _)) = upstreams.model(model) else { return false };
    let ok = eligible(&upstream.addresses, Instant::now());
    upstream.addresses.iter().zip(ok).any(|(a, ok)| ok && a.snapshot().in_flight == 0)
}

/// Runs `request` on upstream model `model`; the outputs, or why not.
pub async fn run(
    upstreams: &Upstreams,
    model: &str,
    request: InferenceRequest,
) -> Result<Vec<(String, Tensor)>, String> {
    let Some((upstream, remote)) = upstreams.model(model) else {
        return Err(format!("{model:?} is not an upstream model"));
    };
    let deadline = Instant::now() + upstream.config.timeouts.total.unwrap_or(MIRROR_TIMEOUT);
    v2_call::infer(upstream, remote, request, deadline).await.map_err(|e| e.to_string())
}
