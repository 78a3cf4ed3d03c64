//! `POST /v2/models/{m}[/versions/{v}]/infer`: decode, run, encode.

use super::Request;
use crate::cache::ReplayParts;
use crate::error::GatewayError;
use crate::reply::Reply;
use crate::request_limits as limits;
use crate::routing::{self, budget, RouteRequest};
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::stream::{self, produce::Job, Response};
use crate::target::resolve;
use crate::telemetry;
use crate::v2::{self, DecodeLimits, InferResponseParts};
use http::HeaderMap;
use switchyard_runtime::InferenceRequest;

/// Triton's header giving the JSON part's length in a binary request.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// Runs one inference request and encodes the answer; a request asking
/// for a stream ([`crate::endpoint::wants_stream`]) gets an event stream instead.
/// `tenant` is the authenticated caller's ([`crate::auth`]); it scopes the
/// cache.
pub async fn infer<'a>(
    state: &'a AppState,
    snap: &'a Snapshot,
    name: &str,
    version: Option<&str>,
    req: Request<'_>,
    tenant: Option<&str>,
) -> Result<Response<'a>, GatewayError> {
    let Request { headers, body, received, .. } = req;
    let config = &snap.config;
    let catalog = state.catalog(snap);
    let target = resolve(config, &catalog, name, version)?;
    let header_len = header_length(headers)?;
    // Every check that can fail this request alone comes before the cache
    // and coalescing, so no cached or shared answer hides it and it never
    // reaches an identical request. Replay answers from the raw body,
    // which does not cover the budget header: that is checked first.
    let route_budget = budget::route_budget(target.route(config));
    budget::check_header(route_budget, headers)?;
    let replay_key = state.cache.replay_key(
        config,
        &target,
        headers,
        ReplayParts {
            generation: snap.generation,
            name: &target.public_name,
            version,
            tenant,
            header_length: headers.get(HEADER_LENGTH).map(|v| v.as_bytes()),
            body: &body,
        },
    );
    if let Some(entry) = match &replay_key {
        Some(key) => state.cache.replay(key).await,
        None => None,
    } {
        if let Some(id) = &entry.request_id {
            telemetry::adopt_request_id(id);
        }
        return Ok(entry.reply.clone().into());
    }
    let max_response = config.server.limits.max_response_bytes;
    let mut decoded = telemetry::spans::parse().in_scope(|| -> Result<_, GatewayError> {
        let signature = catalog.shared_signature(&target.models)?;
        let limits = DecodeLimits {
            max_elements: config.server.limits.max_request_elements,
            max_rows: limits::row_limit(config, &target, &signature),
            ..DecodeLimits::default()
        };
        let mut decoded = v2::decode_infer_request(body, header_len, &limits)?;
        v2::check_signature(&decoded, &target.public_name, &signature)?;
        v2::reshape_columns(&mut decoded, &signature)?;
        limits::check_planned_response(max_response, &signature, &decoded)?;
        Ok(decoded)
    })?;
    if let Some(id) = &decoded.id {
        telemetry::adopt_request_id(id);
    }
    let budget = budget::resolve(route_budget, headers, &decoded.parameters)?.budget;
    let plan = state.cache.plan(config, &target, tenant, &decoded, headers);
    let requested: Vec<String> = decoded.outputs.iter().map(|o| o.name.clone()).collect();
    let request = InferenceRequest {
        inputs: std::mem::take(&mut decoded.inputs),
        outputs: if requested.is_empty() { None } else { Some(requested) },
    };
    let batched = catalog.batching(&target.models).is_some_and(|b| b.enabled());
    if crate::endpoint::wants_stream(headers, &decoded.parameters)? {
        let job = Job { target, decoded, request, plan, budget, received, batched };
        return Ok(Response::Events(stream::start(state, snap, job)));
    }
    let compute =
        routing::execute(state.routing(snap), RouteRequest { target: &target, request, budget, received });
    let (answer, cache_status) = state.cache.answer(&plan, budget.total, compute).await?;
    let parts = InferResponseParts {
        model_name: target.public_name.clone(),
        model_version: Some(target.version.to_string()),
        id: decoded.id.clone(),
        parameters: answer.explain(),
        outputs: v2::shape_outputs(&decoded, answer.outputs.clone(), batched)?,
    };
    limits::check_response(max_response, &parts.outputs)?;
    let encoded = v2::encode_infer_response(&parts);
    let mut reply = Reply::json(200, encoded.body);
    reply.content_type = encoded.content_type;
    if let Some(len) = encoded.header_len {
        reply = reply.with_header(HEADER_LENGTH, len.to_string());
    }
    let reply = reply
        .with_header("x-cache", cache_status.as_str())
        .with_header("x-switchyard-model", answer.model.clone())
        .with_header("x-switchyard-device", answer.device.clone())
        .with_header("x-switchyard-reason", answer.reason.clone())
        .with_header("x-switchyard-budget-ms", answer.budget_ms.to_string());
    if let Some(key) = replay_key {
        state.cache.remember(key, &plan, &answer, &reply, decoded.id.clone()).await;
    }
    Ok(reply.into())
}

/// Reads `Inference-Header-Content-Length`, if present.
fn header_length(headers: &HeaderMap) -> Result<Option<usize>, GatewayError> {
    let Some(value) = headers.get(HEADER_LENGTH) else { return Ok(None) };
    let text = value.to_str().map_err(|_| bad_length("not ASCII"))?;
    text.trim().parse::<usize>().map(Some).map_err(|_| bad_length("not a non-negative integer"))
}

fn bad_length(message: &str) -> GatewayError {
    GatewayError::BadHeader { name: "Inference-Header-Content-Length", message: message.to_string() }
}
