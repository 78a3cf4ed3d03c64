//! The routing [`Backend`] over local models and upstream models alike, so
//! that every policy (budget, cascade, weighted, fallbacks) and the cache
//! treat a model on another V2 server like a local one.
//!
//! In the fleet view (and in its answers) an upstream model is a candidate
//! with one pool, named after its upstream, on device `upstream`:
//! - available: its signature is known and compatible, and some address
//!   can take a request ([`crate::upstream::select::eligible`]: health checks pass,
//!   or all fail; breaker closed or probing);
//! - latency: one bucket with the lowest peak-EWMA latency among its
//!   usable addresses (what the address selection will most likely get;
//!   the estimate already rises with the upstream's load), `samples` and
//!   age from that address; none measured yet = the policy's prior;
//! - no queue of its own (`queue_depth`, `in_flight` 0, no capacity): the
//!   upstream queues, and its queueing shows in its latency;
//! - `cost` and `quality` from the upstream model's config, else the same
//!   route-position defaults as local models.

use super::backend::{Backend, BackendError, BackendResponse, RuntimeBackend};
use crate::snapshot::Snapshot;
use crate::upstream::registry::{RemoteModel, Upstream, Upstreams};
use crate::upstream::v2_call;
use router_policies::{CandidateModel, Device, FleetView, LatencyBucket, LatencyModel, PoolView};
use std::future::Future;
use std::time::Instant;
use switchyard_runtime::{InferenceRequest, Tensor};

/// Runs route members locally or on their upstream, within one request's
/// deadline.
pub struct MixedBackend<'a> {
    local: RuntimeBackend<'a>,
    upstreams: &'a Upstreams,
    deadline: Instant,
}

impl<'a> MixedBackend<'a> {
    /// The backend for one request under `snap`'s config and models and
    /// the running `upstreams`; upstream calls and their retries end by
    /// `deadline` (arrival + budget), and so does a local request's wait on
    /// a paused pool.
    /// A local request takes its place in a pool's queue by `class` and
    /// `deadline`.
    pub fn new(
        snap: &'a Snapshot,
        upstreams: &'a Upstreams,
        deadline: Instant,
        class: u8,
    ) -> MixedBackend<'a> {
        MixedBackend {
            local: RuntimeBackend { repo: &snap.repo, config: &snap.config, deadline: Some(deadline), class },
            upstreams,
            deadline,
        }
    }
}

impl Backend for MixedBackend<'_> {
    fn fleet(&self, models: &[String]) -> FleetView {
        let mut view = self.local.fleet(models);
        let mut now = None; // read once, and only for a route with upstream models
        for (position, (name, slot)) in models.iter().zip(view.candidates.iter_mut()).enumerate() {
            if let Some((upstream, model)) = self.upstreams.model(name) {
                *slot = candidate(position, upstream, model, *now.get_or_insert_with(Instant::now));
            }
        }
        view
    }

    fn has_output(&self, model: &str, output: &str) -> bool {
        match self.upstreams.model(model) {
            Some((_, remote)) => remote.signature().is_some_and(|s| s.output(output).is_some()),
            None => self.local.has_output(model, output),
        }
    }

    fn run(
        &self,
        model: &str,
        pool: Option<&str>,
        request: InferenceRequest,
    ) -> impl Future<Output = Result<BackendResponse, BackendError>> + Send {
        let remote = self.upstreams.model(model);
        async move {
            match remote {
                Some((upstream, remote)) => {
                    let rows = request.inputs.first().and_then(|(_, t)| t.shape().first().copied());
                    let outputs = v2_call::infer(upstream, remote, request, self.deadline).await?;
                    Ok(remote_response(upstream, remote, rows.unwrap_or(1), outputs))
                }
                None => self.local.run(model, pool, request).await,
            }
        }
    }
}

/// An upstream model's answer: on its upstream's one pool (see the module
/// docs), with the version its config names (1 when unset or not a
/// number), the request's rows as its batch.
fn remote_response(
    upstream: &Upstream,
    model: &RemoteModel,
    rows: usize,
    outputs: Vec<(String, Tensor)>,
) -> BackendResponse {
    BackendResponse {
        model: model.config.name.clone(),
        version: model.config.version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(1),
        pool: upstream.config.name.clone(),
        device: Device::Upstream,
        batch_size: rows,
        outputs,
    }
}

/// The fleet-view candidate of an upstream model (see the module docs).
pub fn candidate(position: usize, upstream: &Upstream, model: &RemoteModel, now: Instant) -> CandidateModel {
    let ok = crate::upstream::select::eligible(&upstream.addresses, now);
    let usable: Vec<_> = upstream.addresses.iter().zip(ok).filter(|(_, ok)| *ok).map(|(a, _)| a).collect();
    let best = usable.iter().filter_map(|a| a.latency(now)).min_by_key(|l| l.estimate);
    let latency = LatencyModel {
        buckets: best
            .map(|l| vec![LatencyBucket { max_batch: 1, latency: l.estimate, samples: l.samples }])
            .unwrap_or_default(),
        stats_age: best.map_or(std::time::Duration::ZERO, |l| now.saturating_duration_since(l.last)),
    };
    let pool = PoolView {
        name: upstream.config.name.as_str().into(),
        device: Device::Upstream,
        available: !usable.is_empty(),
        paused: false,
        workers: 1,
        queue_depth: 0,
        in_flight: 0,
        queue_capacity: None,
        max_batch_size: 1,
        relative_cost: 1.0,
        latency,
    };
    let position_u32 = u32::try_from(position).unwrap_or(u32::MAX);
    CandidateModel {
        name: model.config.name.as_str().into(),
        quality_rank: model.config.quality.unwrap_or(position_u32),
        relative_cost: model.config.cost.unwrap_or(1.0 + position as f64),
        available: model.signature().is_some() && pool.available,
        pools: vec![pool],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse, ProxyConfig};
    use std::path::Path;
    use std::time::Duration;
    use switchyard_runtime::{DataType, ModelSignature, TensorSpec};

    fn upstreams() -> Upstreams {
        let text = r#"
[[upstreams]]
name = "remote"
kind = "v2"
addrs = ["127.0.0.1:1", "127.0.0.1:2"]
breaker = { failures = 1, cool_down_ms = 60000 }
models = [{ name = "heavy", cost = 10.0, quality = 7 }]
"#;
        let config = parse(text, Path::new("/")).unwrap();
        Upstreams::new(&config.proxy)
    }

    fn signature() -> ModelSignature {
        let spec = TensorSpec { name: "X".into(), dtype: DataType::F32, shape: vec![-1, 4] };
        ModelSignature { inputs: vec![spec.clone()], outputs: vec![spec] }
    }

    #[test]
    fn upstream_candidates_carry_latency_cost_and_availability() {
        let ups = upstreams();
        let (upstream, model) = ups.model("heavy").unwrap();
        let now = Instant::now();
        let c = candidate(0, upstream, model, now);
        assert!(!c.available, "signature unknown: not usable");
        assert_eq!((c.relative_cost, c.quality_rank), (10.0, 7));
        assert_eq!(c.pools[0].device, Device::Upstream);
        assert!(c.pools[0].latency.buckets.is_empty(), "unmeasured: the policy's prior");

        model.record_fetch(Ok(signature()));
        upstream.addresses[0].begin(now).unwrap().succeeded(Duration::from_millis(30));
        upstream.addresses[1].begin(now).unwrap().succeeded(Duration::from_millis(8));
        let c = candidate(0, upstream, model, Instant::now());
        assert!(c.available);
        let best = c.pools[0].latency.buckets[0].latency;
        assert!(
            best > Duration::from_micros(7_990) && best <= Duration::from_millis(8),
            "the fastest: {best:?}"
        );

        upstream.addresses[1].begin(Instant::now()).unwrap().failed();
        let c = candidate(0, upstream, model, Instant::now());
        assert!(c.pools[0].latency.buckets[0].latency > Duration::from_millis(29), "broken address left out");
        upstream.addresses[0].begin(Instant::now()).unwrap().failed();
        let c = candidate(0, upstream, model, Instant::now());
        assert!(!c.available && !c.pools[0].available, "every breaker open");
    }

    #[test]
    fn an_empty_proxy_config_has_no_upstream_models() {
        let ups = Upstreams::new(&ProxyConfig::default());
        assert!(ups.model("heavy").is_none());
    }
}
