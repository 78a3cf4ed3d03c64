//! The part of an inference call that every front end shares: the REST
//! handler ([`crate::handlers::infer`]) and the gRPC service
//! ([`crate::grpc`]) each decode their wire format into a
//! [`DecodedRequest`], then hand it here, so that one place decides the
//! checks against the model's signature, the latency budget, the cache,
//! routing and the shape of the outputs. Each front end then encodes the
//! [`Answered`] (or writes the event stream) in its own format.
//!
//! Order, as for every request: [`decode_limits`] before decoding (rows and
//! elements bounded by the route), [`check_decoded`] after it, then
//! [`run`]: budget -> cache plan -> stream, or routing through the cache ->
//! outputs shaped and bounded by `server.max_response_bytes`. Tenant
//! limits are taken here too: the request limits before the cache
//! ([`admit`]), the compute limits only when a model runs for the call
//! ([`crate::tenants`]).

pub mod row_path;
pub mod statistics;
pub mod views;

use crate::cache::rows::RowsServed;
use crate::cache::{CachePlan, CacheStatus};
use crate::error::GatewayError;
use crate::record::line::Ending;
use crate::record::TrafficRecord;
use crate::request_limits as limits;
use crate::routing::{self, budget, RouteRequest, Strategy};
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::stream::{self, produce::Job, respond::EventStream};
use crate::target::Target;
use crate::telemetry;
use crate::tenants::{Admitted, Fleet};
use http::HeaderMap;
use std::sync::Arc;
use std::time::Instant;
use switchyard_protocol::answer::Answer;
use switchyard_protocol::v2::{self, DecodeLimits, DecodedRequest, InferResponseParts, ResponseParameters};
use switchyard_runtime::{InferenceRequest, ModelSignature};

/// The bounds a request to `target` is decoded under, and the signature
/// its inputs are checked against ([`check_decoded`]).
pub fn decode_limits(
    state: &AppState,
    snap: &Snapshot,
    target: &Target,
) -> Result<(DecodeLimits, Arc<ModelSignature>), GatewayError> {
    let config = &snap.config;
    let signature = state.catalog(snap).shared_signature(&target.models)?;
    let limits = DecodeLimits {
        max_elements: config.server.limits.max_request_elements,
        max_rows: limits::row_limit(config, target, &signature),
        ..DecodeLimits::default()
    };
    Ok((limits, signature))
}

/// Checks a decoded request against the model's signature, reshapes
/// column inputs, and refuses (413) a request whose answer could exceed
/// `server.max_response_bytes` before anything runs.
pub fn check_decoded(
    snap: &Snapshot,
    target: &Target,
    signature: &ModelSignature,
    decoded: &mut DecodedRequest,
) -> Result<(), GatewayError> {
    v2::check_signature(decoded, &target.public_name, signature)?;
    v2::reshape_columns(decoded, signature)?;
    limits::check_planned_response(snap.config.server.limits.max_response_bytes, signature, decoded)
}

/// One decoded inference call, as every front end hands it over.
pub struct Call<'h> {
    /// The route or model addressed.
    pub target: Target,
    /// The decoded, checked request ([`check_decoded`]).
    pub decoded: DecodedRequest,
    /// The request's headers (gRPC: its metadata): the budget header and
    /// cache control.
    pub headers: &'h HeaderMap,
    /// The authenticated caller ([`crate::auth`]); it scopes the cache.
    pub tenant: Option<&'h str>,
    /// When the request arrived; the budget counts from here.
    pub received: Instant,
    /// Answer with an event stream (draft then final) instead of one answer.
    pub stream: bool,
    /// Record this call in its route's traffic sample ([`crate::record`];
    /// drawn by the front end with [`crate::record::Recorders::draw`]).
    pub sampled: bool,
    /// `rest`, `grpc` or `openai`, as the traffic sample records it.
    pub protocol: &'static str,
}

/// A complete answer, ready to encode.
pub struct Answered {
    /// The response: names, `id`, the explain `parameters`, shaped outputs.
    pub parts: InferResponseParts,
    /// How it was reached. Its outputs are in `parts`: an answer that no
    /// cache entry shares gave them up (its `outputs` are then empty).
    pub answer: Arc<Answer>,
    /// Where it came from (`x-cache`).
    pub cache: CacheStatus,
    /// What the cache did; the REST exact-repeat cache keys on it.
    pub plan: CachePlan,
    /// For a request answered row by row ([`crate::cache::rows`]): how
    /// many rows came from the cache (`x-switchyard-cached-rows`).
    pub rows: Option<RowsServed>,
    /// The request `id`, kept for the exact-repeat cache.
    pub id: Option<String>,
    /// `RateLimit-Policy` / `RateLimit` of the caller's tenant limits
    /// ([`crate::tenants`]); empty without limits.
    pub ratelimit: Vec<(http::HeaderName, String)>,
}

/// What [`run`] gives back.
pub enum Outcome<'a> {
    /// One answer (boxed: it is five times the size of a stream's handle).
    Answered(Box<Answered>),
    /// An event stream (draft then final) the front end writes out.
    Events(EventStream<'a>),
}

/// The caller's tenant entry that sets its priority: the route's
/// `auth.tenants` entry when it sets `priority` or `max_priority`, else
/// the `[[tenants]]` entry.
fn tenant_entry<'c>(
    config: &'c crate::config::Config,
    target: &Target,
    tenant: Option<&str>,
) -> Option<&'c crate::config::tenant_section::TenantConfig> {
    let tenant = tenant?;
    let on_route = target.route(config).and_then(|r| r.auth.as_ref()).and_then(|a| {
        a.tenants.iter().find(|t| &*t.name == tenant && (t.priority.is_some() || t.max_priority.is_some()))
    });
    on_route.or_else(|| config.tenants.iter().find(|t| &*t.name == tenant))
}

/// Runs one call through the budget, the cache and routing (module docs).
pub async fn run<'a>(
    state: &'a AppState,
    snap: &'a Snapshot,
    call: Call<'_>,
) -> Result<Outcome<'a>, GatewayError> {
    let Call { target, mut decoded, headers, tenant, received, stream, sampled, protocol } = call;
    let config = &snap.config;
    if let Some(id) = &decoded.id {
        telemetry::adopt_request_id(id);
    }
    let route_budget = budget::route_budget(target.route(config));
    let draw = target
        .route(config)
        .and_then(|r| routing::sticky::draw(&r.name, r.sticky.as_ref()?, headers, tenant));
    let budget = budget::resolve(route_budget, headers, &decoded.parameters)?.budget;
    let class =
        routing::priority::resolve(headers, &decoded.parameters, tenant_entry(config, &target, tenant))?;
    let admitted = admit(state, snap, &target, tenant).await?;
    let batch_rows = decoded.inputs.first().and_then(|(_, t)| t.shape().first().copied()).unwrap_or(1);
    // A batch of independent rows is cached row by row (`cache::rows`);
    // a stream keeps the whole-request entry its final answer is stored in.
    let row_plan =
        if stream { None } else { state.cache.row_plan(config, &target, tenant, &decoded, headers) };
    let plan = match row_plan {
        Some(_) => CachePlan::Bypass,
        None => state.cache.plan(config, &target, tenant, &decoded, headers),
    };
    let requested: Vec<String> = decoded.outputs.iter().map(|o| o.name.clone()).collect();
    let request = InferenceRequest {
        inputs: std::mem::take(&mut decoded.inputs),
        outputs: if requested.is_empty() { None } else { Some(requested) },
    };
    let batched = state.catalog(snap).batching(&target.models).is_some_and(|b| b.enabled());
    if stream {
        if protocol != "grpc" {
            // An SSE event is text: every output as JSON data. (A gRPC
            // stream's responses carry raw tensors, as unary answers do.)
            decoded.binary_data_output = false;
            decoded.outputs.iter_mut().for_each(|o| o.binary = false);
        }
        // A stream holds its compute limits from the start (its cached
        // final, if any, is rare enough not to single out).
        let computing = admitted.compute(batch_rows)?;
        let job = Job { target, decoded, request, plan, budget, received, batched, computing, draw, class };
        return Ok(Outcome::Events(stream::start(state, snap, job)));
    }
    let record = sampled.then(|| target.route(config).and_then(|r| r.record.as_ref())).flatten();
    let capture = record.map(|_| Capture {
        inputs: request.inputs.clone(),
        outputs: request.outputs.clone().unwrap_or_default(),
        tenant: tenant.map(crate::record::line::hash_tenant),
    });
    let mut rows = None;
    let result = match &row_plan {
        None => {
            let req = RouteRequest { target: &target, request, budget, received, draw, class };
            let admitted = &admitted;
            let compute = async move {
                let _computing = admitted.compute(batch_rows)?;
                let finished = routing::execute(state.routing(snap), req, Strategy::Single).await?;
                Ok(finished.answer)
            };
            state.cache.answer(&plan, budget.total, Box::pin(compute)).await
        }
        Some(row_plan) => {
            let run = row_path::RowRun {
                routing: state.routing(snap),
                target: &target,
                request,
                budget,
                received,
                admitted: &admitted,
                draw,
                class,
            };
            let answered = state.cache.answer_rows(row_plan, budget.total, row_path::row_compute(run)).await;
            answered.map(|(answer, cache, served)| {
                rows = Some(served);
                (answer, cache)
            })
        }
    };
    if let (Some(record), Some(capture)) = (record, capture) {
        let ending = Ending::of(&result.as_ref().map(|(a, c)| (a.clone(), c.as_str())));
        let line = capture.finish(
            &target,
            &decoded,
            protocol,
            received,
            u64::try_from(budget.total.as_millis()).unwrap_or(u64::MAX),
            ending,
        );
        state.recorders.submit(record, line);
    }
    let (mut answer, cache) = result?;
    state.budget_misses.record(&target.public_name, received.elapsed(), budget.total);
    // An answer nothing else holds (no cache entry, no coalesced caller)
    // gives its outputs to the response; a shared one is copied.
    let outputs = match Arc::get_mut(&mut answer) {
        Some(only) => std::mem::take(&mut only.outputs),
        None => answer.outputs.clone(),
    };
    let parts = InferResponseParts {
        model_name: target.public_name.clone(),
        model_version: Some(target.version.to_string()),
        id: decoded.id.clone(),
        parameters: ResponseParameters::explaining(answer.explain()),
        outputs: v2::shape_outputs(&decoded, outputs, batched)?,
    };
    limits::check_response(config.server.limits.max_response_bytes, &parts.outputs)?;
    let ratelimit = admitted.headers();
    Ok(Outcome::Answered(Box::new(Answered { parts, answer, cache, plan, rows, id: decoded.id, ratelimit })))
}

/// Admits a call of `tenant` to `target` under its tenant limits
/// ([`crate::tenants`]): the route x tenant and tenant request rates and
/// daily quotas. [`run`] calls it; the REST front end calls it for a hit
/// of its exact-repeat cache (which answers before decoding, without
/// [`run`]).
pub async fn admit(
    state: &AppState,
    snap: &Snapshot,
    target: &Target,
    tenant: Option<&str>,
) -> Result<Admitted, GatewayError> {
    let route = target.route(&snap.config).map(|r| r.name.as_str());
    let fleet = snap.config.fleet_limits.map(|settings| Fleet { settings, store: state.cache.fleet_store() });
    state.tenants.admit(&snap.tenants, route, tenant, fleet).await
}

/// What a sampled call keeps of its request for its traffic record (the
/// inputs' buffers are shared, not copied).
struct Capture {
    inputs: Vec<(String, switchyard_runtime::Tensor)>,
    outputs: Vec<String>,
    tenant: Option<String>,
}

impl Capture {
    /// The record of the call, now that it has ended.
    fn finish(
        self,
        target: &Target,
        decoded: &DecodedRequest,
        protocol: &'static str,
        received: Instant,
        budget_ms: u64,
        ending: Ending,
    ) -> TrafficRecord {
        let elapsed = received.elapsed();
        let arrived = std::time::SystemTime::now().checked_sub(elapsed).unwrap_or(std::time::UNIX_EPOCH);
        let arrived_ms = arrived.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        TrafficRecord {
            route: target.public_name.clone(),
            arrived_ms: u64::try_from(arrived_ms).unwrap_or(u64::MAX),
            protocol,
            id: decoded.id.clone(),
            tenant: self.tenant,
            inputs: self.inputs,
            outputs: self.outputs,
            parameters: decoded.parameters.clone(),
            budget_ms,
            latency_us: u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            ending,
        }
    }
}
