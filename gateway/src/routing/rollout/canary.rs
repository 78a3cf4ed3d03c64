//! A canary: a candidate with `serve = true` answers the step's share of
//! the route's calls ([`crate::routing::execute`] draws them: from the
//! route's `sticky` key when it has one, so a client is answered by one
//! model for a whole step, else at random).
//!
//! Per canary call ([`Rollouts::after_canary`]):
//! 1. the candidate's call is counted: an answer with its latency and cost
//!    (served latencies on both sides: the live side's are the calls the
//!    live models answered, [`Rollouts::after_call`]), or an error (the
//!    call was then answered by the live models, and counted there);
//! 2. when the live model that answered the route's last live call (else
//!    the route's first model) has an idle pool and the CPU is below the
//!    ceiling, it runs the same inputs in the background, and its rows are
//!    compared with the candidate's answer, as a mirror's would be.
//!
//! The gate, promotion and rollback are the mirrored plan's: a failing
//! step puts the route back on its live models at once (a reload).

use super::{compare, upstream, Rollouts};
use crate::config::candidate_section::CandidateConfig;
use crate::routing::calibration::ShadowModels;
use std::sync::Arc;
use std::time::Duration;
use switchyard_runtime::{InferenceRequest, Tensor};

/// One call the canary drew, once the candidate ran it.
pub struct CanaryOutcome<'a> {
    /// The route.
    pub route: &'a str,
    /// Its candidate in force.
    pub candidate: &'a CandidateConfig,
    /// The candidate's outputs; `None` when it failed.
    pub answer: Option<&'a [(String, Tensor)]>,
    /// Whether the candidate is a text model (embeddings compare by cosine).
    pub text: bool,
    /// How long the candidate's call took.
    pub latency: Duration,
    /// The compute cost of one candidate run ([`super::cost::pair_cost`]).
    pub cost: f64,
    /// The route's live models (the first is the comparison's reference
    /// until a live call has been answered).
    pub live_models: &'a [String],
    /// The call's inputs (shared buffers).
    pub inputs: &'a [(String, Tensor)],
}

impl Rollouts {
    /// Counts one canary call and, when there is room, compares it with a
    /// background run of the live model (module docs). Returns at once.
    pub fn after_canary<M: ShadowModels>(self: &Arc<Self>, call: CanaryOutcome<'_>, repo: &Arc<M>) {
        let reference = self.with_record(call.route, call.candidate, |r| {
            for c in [&mut r.total, &mut r.at_step] {
                c.candidate.calls += 1;
                match call.answer {
                    Some(_) => {
                        c.candidate.latency.add(call.latency.as_secs_f64() * 1e6);
                        c.candidate.cost += call.cost;
                    }
                    None => c.candidate.errors += 1,
                }
            }
            r.last_live.clone()
        });
        let Some(outputs) = call.answer else { return };
        let Some(live) = reference.or_else(|| call.live_models.first().cloned()) else { return };
        let remote = self.upstream_of(&live);
        let idle = match &remote {
            Some(upstreams) => upstream::idle(upstreams, &live),
            None => repo.idle(&live),
        };
        if !self.may_run_in_background(call.route, call.candidate, idle) {
            return;
        }
        let run = LiveRun {
            route: call.route.to_string(),
            candidate: call.candidate.clone(),
            live,
            served: outputs.to_vec(),
            text: call.text,
            request: InferenceRequest {
                inputs: call.inputs.to_vec(),
                outputs: Some(outputs.iter().map(|(n, _)| n.clone()).collect()),
            },
        };
        let (this, repo) = (Arc::clone(self), Arc::clone(repo));
        tokio::spawn(async move { this.compare_with_live(repo.as_ref(), remote, run).await });
    }

    /// Step 2: the live model's background run and the comparison.
    async fn compare_with_live<M: ShadowModels>(
        &self,
        repo: &M,
        remote: Option<Arc<crate::upstream::Upstreams>>,
        run: LiveRun,
    ) {
        let result = match &remote {
            Some(upstreams) => upstream::run(upstreams, &run.live, run.request).await,
            None => repo.shadow_run(&run.live, run.request).await.map_err(|e| e.to_string()),
        };
        match result {
            Ok(live) => {
                let rows = compare::agreement(&live, &run.served, &run.candidate.compare, run.text);
                self.with_record(&run.route, &run.candidate, |r| {
                    for c in [&mut r.total, &mut r.at_step] {
                        c.rows += rows.len() as u64;
                        c.agreeing += rows.iter().filter(|a| **a).count() as u64;
                    }
                });
            }
            // The live model's background run is not a live call: its
            // failure leaves the comparison without these rows.
            Err(e) => {
                tracing::debug!(route = %run.route, live = %run.live, error = %e, "canary's live comparison run failed")
            }
        }
    }
}

/// One canary call's live comparison run, owned (it outlives the request).
struct LiveRun {
    route: String,
    candidate: CandidateConfig,
    live: String,
    served: Vec<(String, Tensor)>,
    text: bool,
    request: InferenceRequest,
}
