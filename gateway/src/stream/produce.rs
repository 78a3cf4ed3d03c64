//! The producing side of a stream: runs the request through the cache and
//! the draft-then-final orchestration, and emits encoded events on a
//! channel that [`super::respond`] writes out.
//!
//! 1. The cache answers first ([`crate::cache::ResponseCache::answer`], the
//!    same key as a plain request): a hit is one `final` event, sent at
//!    once. Identical requests in flight are computed once; a stream that
//!    joins one gets its final only.
//! 2. On a miss, routing runs the call ([`crate::routing::execute`] with
//!    [`Strategy::DraftThenFinal`]): a route with a cheap/heavy pair sends
//!    its draft (emitted as it comes) then its final; any other target
//!    answers once and gets one `final` event. Routing decides, shadows
//!    and counts; this module only emits.
//! 3. The final answer is stored by the cache (drafts never are), then
//!    emitted; an error is emitted instead of a final.
//!
//! Events are emitted as V2 response parts; the front end encodes them
//! (SSE in [`super::respond`], gRPC in `crate::grpc::stream`).

use crate::cache::{CachePlan, CacheStatus};
use crate::config::RouteConfig;
use crate::error::GatewayError;
use crate::metrics::streams::{StreamCount, StreamCounters};
use crate::routing::draft::{Finished, Ran};
use crate::routing::{self, Answer, RouteRequest, Strategy};
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::target::Target;
use parking_lot::Mutex;
use router_policies::Budget;
use serde_json::Value;
use std::time::Instant;
use switchyard_protocol::v2::{DecodedRequest, InferResponseParts, ResponseParameters};
use switchyard_runtime::InferenceRequest;
use tokio::sync::mpsc::UnboundedSender;

/// Everything a stream needs, owned (nothing borrows the HTTP session).
pub struct Job {
    /// The route or model addressed.
    pub target: Target,
    /// The decoded request (its inputs moved into `request`).
    pub decoded: DecodedRequest,
    /// Inputs and requested outputs.
    pub request: InferenceRequest,
    /// What the cache does.
    pub plan: CachePlan,
    /// The request's budget, resolved by the handler.
    pub budget: Budget,
    /// When the request arrived.
    pub received: Instant,
    /// Whether the answering model batches (classification needs it).
    pub batched: bool,
    /// The tenant's compute limits, held while the stream runs.
    pub computing: crate::tenants::Computing,
    /// The route's sticky draw for this client, if any.
    pub draw: Option<router_policies::Draw>,
    /// The request's priority class.
    pub class: u8,
}

/// The event stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The cheap model's answer.
    Draft,
    /// The answer that stands.
    Final,
}

impl Stage {
    /// The SSE event name and `parameters.stage`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Draft => "draft",
            Stage::Final => "final",
        }
    }
}

/// What the producer hands the writer.
#[derive(Debug)]
pub enum Emitted {
    /// An event; `cache` is the `x-cache` value it implies when it is the
    /// first thing written. Each front end encodes it in its format (SSE:
    /// [`super::respond`]; gRPC: `crate::grpc::stream`).
    Event {
        /// Draft or final.
        stage: Stage,
        /// The V2 response of this stage (outputs shaped, `parameters`
        /// saying the stage; outputs JSON or raw as the call asked, see `encode_event`).
        parts: Box<InferResponseParts>,
        /// `x-cache` for the response header.
        cache: CacheStatus,
    },
    /// The request failed: a status reply if nothing was sent yet, else
    /// an `error` event.
    Failed(GatewayError),
}

/// Extra `parameters` of one event.
struct EventInfo {
    stage: Stage,
    confidence: Option<f32>,
    ran: Option<Ran>,
    from_draft: Option<bool>,
    cache: Option<CacheStatus>,
}

/// Runs `job` and emits its events on `tx` (steps in the module docs).
pub async fn produce(state: &AppState, snap: &Snapshot, job: Job, tx: UnboundedSender<Emitted>) {
    let config = &snap.config;
    let Job { target, decoded, request, plan, budget, received, batched, computing: _computing, draw, class } =
        job;
    let counters = &state.streams;
    let route = target.is_route.then(|| config.route(&target.public_name)).flatten();
    let computing =
        if matches!(plan, CachePlan::Lookup(..)) { CacheStatus::Miss } else { CacheStatus::Bypass };
    let max_response = config.server.limits.max_response_bytes;
    let encode = |answer: &Answer, info: EventInfo| {
        encode_event(&target, &decoded, (batched, max_response), answer, info)
    };
    let on_draft = |answer: &Answer, confidence: Option<f32>| {
        let info = EventInfo { stage: Stage::Draft, confidence, ran: None, from_draft: None, cache: None };
        match encode(answer, info) {
            Ok(parts) => {
                counters.bump(StreamCount::Draft);
                let _ = tx.send(Emitted::Event { stage: Stage::Draft, parts, cache: computing });
            }
            Err(e) => tracing::debug!(error = %e, "draft not encodable; the final will say why"),
        }
    };
    let note: Mutex<Option<Finished>> = Mutex::new(None);
    let compute = async {
        let req = RouteRequest { target: &target, request, budget, received, draw, class };
        let strategy = Strategy::DraftThenFinal { on_draft: &on_draft };
        let finished = routing::execute(state.routing(snap), req, strategy).await?;
        let answer = finished.answer.clone();
        *note.lock() = Some(finished);
        Ok(answer)
    };
    let outcome = state.cache.answer(&plan, budget.total, Box::pin(compute)).await;
    let note = note.into_inner();
    let emitted = outcome.and_then(|(answer, cache)| {
        count_final(counters, note.as_ref(), cache);
        let info = EventInfo {
            stage: Stage::Final,
            confidence: note
                .as_ref()
                .and_then(|n| n.confidence)
                .or_else(|| stated_confidence(route, &answer)),
            ran: note.as_ref().map(|n| n.ran),
            from_draft: Some(note.as_ref().is_some_and(|n| n.from_draft)),
            cache: Some(cache),
        };
        let parts = encode(&answer, info)?;
        Ok(Emitted::Event { stage: Stage::Final, parts, cache })
    });
    let _ = tx.send(emitted.unwrap_or_else(Emitted::Failed));
}

fn count_final(counters: &StreamCounters, note: Option<&Finished>, cache: CacheStatus) {
    counters.bump(StreamCount::Final);
    match note {
        Some(n) => {
            if n.from_draft {
                counters.bump(StreamCount::FinalFromDraft);
            }
            counters.bump(match n.ran {
                Ran::Parallel => StreamCount::Parallel,
                Ran::Sequential => StreamCount::Sequential,
                Ran::SequentialUnderLoad => StreamCount::SequentialUnderLoad,
                Ran::Single => StreamCount::Single,
            });
        }
        None if matches!(cache, CacheStatus::HitL1 | CacheStatus::HitL2) => {
            counters.bump(StreamCount::FinalCached)
        }
        None => {}
    }
}

/// The confidence a cached or coalesced final states, when the route has
/// a confidence output and the client asked for it.
fn stated_confidence(route: Option<&RouteConfig>, answer: &Answer) -> Option<f32> {
    let output = &route?.draft.pair.as_ref()?.confidence_output;
    let c = routing::confidence::confidence(&answer.outputs, output);
    (!c.is_nan()).then_some(c)
}

/// One event: the V2 response for `answer` (each output JSON or binary as
/// `decoded` asks: an SSE call asks for JSON, a gRPC stream's for raw
/// tensors) with the stage's `parameters`; 413 when it could exceed
/// `max_response` bytes (`server.max_response_bytes`).
fn encode_event(
    target: &Target,
    decoded: &DecodedRequest,
    (batched, max_response): (bool, usize),
    answer: &Answer,
    info: EventInfo,
) -> Result<Box<InferResponseParts>, GatewayError> {
    let mut parameters = ResponseParameters::explaining(answer.explain());
    parameters.insert("stage".into(), info.stage.as_str().into());
    parameters.insert("model".into(), answer.model.clone().into());
    parameters.insert("device".into(), answer.device.as_str().into());
    parameters.insert("confidence".into(), info.confidence.map_or(Value::Null, |c| f64::from(c).into()));
    if let Some(ran) = info.ran {
        parameters.insert("draft_mode".into(), ran.as_str().into());
    }
    if let Some(from_draft) = info.from_draft {
        parameters.insert("from_draft".into(), from_draft.into());
    }
    if let Some(cache) = info.cache {
        parameters.insert("cache".into(), cache.as_str().into());
    }
    let outputs = switchyard_protocol::v2::shape_outputs(decoded, answer.outputs.clone(), batched)?;
    crate::request_limits::check_response(max_response, &outputs)?;
    let parts = InferResponseParts {
        model_name: target.public_name.clone(),
        model_version: Some(target.version.to_string()),
        id: decoded.id.clone(),
        parameters,
        outputs,
    };
    Ok(Box::new(parts))
}
