//! The answer to an inference request and how it was reached: the
//! outputs, and the model, pool, reason and budget behind them. What
//! routing returns, the cache stores, and every front end encodes; kept at
//! the bottom so each of them may use it.

use router_policies::{Device, Reason};
use switchyard_runtime::Tensor;

use crate::v2::Explanation;

/// The final answer to an inference request, and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The model that produced the outputs.
    pub model: String,
    /// Its version.
    pub version: u64,
    /// The device of the pool that ran it (a runtime pool's CPU or CUDA,
    /// or an upstream server); its label ([`Device::as_str`]) only at the
    /// edges, as the reason's.
    pub device: Device,
    /// The pool that ran it: an operator's name from the config (a runtime
    /// pool, or the upstream server), carried and shown, never parsed.
    pub pool: String,
    /// Why this model and pool were chosen; turned into its label
    /// ([`Reason::as_str`]) only where text goes out (headers, V2
    /// parameters, metrics, the L2 value, the traffic sample).
    pub reason: Reason,
    /// Rows in the batch that executed it.
    pub batch_size: usize,
    /// The requested outputs, in order.
    pub outputs: Vec<(String, Tensor)>,
    /// The request's latency budget in ms (route default or the client's
    /// ask, clamped to the route maximum).
    pub budget_ms: u64,
    /// True when the policy chose this answer under pressure and would
    /// have answered with another model without it (a tight budget, a
    /// busy or unavailable model; [`router_policies::PolicyConfig::is_degraded`]). Such an
    /// answer is never cached and is shared only with identical in-flight
    /// requests whose budget is no larger ([`crate::cache`]).
    pub degraded: bool,
    /// The cheap model's confidence when a cascade judged it (whichever
    /// model answered in the end); `None` otherwise. L1 keeps it with the
    /// answer; Redis does not store it (the value format stays as it is),
    /// so an L2 hit has none. The traffic sample records it
    /// ([`crate::record`]).
    pub confidence: Option<f32>,
}

impl Answer {
    /// How this answer was reached, for the V2 response's `parameters`
    /// (`switchyard_model`, `_device`, `_pool`, `_reason`, ...; written in
    /// place by the encoder, see [`crate::v2::ResponseParameters`]).
    pub fn explain(&self) -> Explanation {
        Explanation {
            model: self.model.clone(),
            version: self.version,
            device: self.device.as_str(),
            pool: self.pool.clone(),
            reason: self.reason.as_str(),
            batch_size: self.batch_size,
            budget_ms: self.budget_ms,
        }
    }
}
