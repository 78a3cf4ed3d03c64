//! `POST /v2/models/{m}[/versions/{v}]/infer`: the exact-repeat
//! cache, decode (JSON or Triton's binary tensors), [`crate::inference`]
//! (shared with gRPC), encode.

use super::Request;
use crate::cache::RepeatParts;
use crate::error::GatewayError;
use crate::header_names as names;
use crate::inference::{self, Answered, Outcome};
use crate::reply::Reply;
use crate::routing::budget;
use crate::snapshot::Snapshot;
use crate::state::AppState;
use crate::stream::Response;
use crate::target::resolve;
use crate::telemetry;
use http::HeaderMap;
use switchyard_protocol::v2;

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
    // reaches an identical request. The exact-repeat cache answers from the raw body,
    // which does not cover the budget header: that is checked first.
    let route_budget = budget::route_budget(target.route(config));
    budget::check_header(route_budget, headers)?;
    // A sampled request skips the exact-repeat fast path, so its traffic
    // record has its decoded inputs (a repeat is then an L1 hit).
    let sampled = state.recorders.draw(target.route(config).and_then(|r| r.record.as_ref()));
    let repeat_key = if sampled {
        None
    } else {
        state.cache.repeat_key(
            config,
            &target,
            headers,
            RepeatParts {
                generation: snap.generation,
                name: &target.public_name,
                version,
                tenant,
                header_length: headers.get(HEADER_LENGTH).map(|v| v.as_bytes()),
                body: &body,
            },
        )
    };
    if let Some(entry) = match &repeat_key {
        Some(key) => state.cache.remembered(key).await,
        None => None,
    } {
        // A hit spends the tenant's request limits as any call does
        // (`crate::tenants`); a miss is admitted by `inference::run`.
        let admitted = inference::admit(state, snap, &target, tenant).await?;
        if let Some(id) = &entry.request_id {
            telemetry::adopt_request_id(id);
        }
        return Ok(with_headers(entry.reply.clone(), admitted.headers()).into());
    }
    let (limits, signature) = inference::decode_limits(state, snap, &target)?;
    // REST decodes straight from the body's text: check each input against
    // the model before its data is decoded.
    let signature_limit =
        v2::SignatureLimit { model: target.public_name.clone(), signature: signature.clone() };
    let limits = v2::DecodeLimits { signature: Some(signature_limit), ..limits };
    let decoded = telemetry::spans::parse().in_scope(|| -> Result<_, GatewayError> {
        let mut decoded = v2::decode_infer_request(body, header_len, &limits)?;
        inference::check_decoded(snap, &target, &signature, &mut decoded)?;
        Ok(decoded)
    })?;
    let stream = crate::endpoint::wants_stream(headers, &decoded.parameters)?;
    let call =
        inference::Call { target, decoded, headers, tenant, received, stream, sampled, protocol: "rest" };
    let answered = match inference::run(state, snap, call).await? {
        Outcome::Events(events) => return Ok(Response::Events(events)),
        Outcome::Answered(answered) => *answered,
    };
    let Answered { parts, answer, cache, plan, rows, id, ratelimit } = answered;
    let encoded = v2::encode_infer_response(&parts);
    let mut reply = Reply::json(200, encoded.body);
    reply.content_type = encoded.content_type;
    if let Some(len) = encoded.header_len {
        reply = reply.with_header(names::INFERENCE_HEADER_CONTENT_LENGTH, len.to_string());
    }
    let reply = reply
        .with_static_header(names::X_CACHE, cache.as_str())
        .with_header(names::X_SWITCHYARD_MODEL, answer.model.clone())
        .with_static_header(names::X_SWITCHYARD_DEVICE, answer.device.as_str())
        .with_static_header(names::X_SWITCHYARD_REASON, answer.reason.as_str())
        .with_header(names::X_SWITCHYARD_BUDGET_MS, answer.budget_ms.to_string());
    let reply = match rows {
        Some(rows) => reply.with_header(names::X_SWITCHYARD_CACHED_ROWS, rows.header_value()),
        None => reply,
    };
    if let Some(key) = repeat_key {
        state.cache.remember(key, &plan, &answer, &reply, id).await;
    }
    // After `remember`: a repeat gets its own figures, not these.
    Ok(with_headers(reply, ratelimit).into())
}

/// `reply` with `headers` added.
fn with_headers(reply: Reply, headers: Vec<(http::HeaderName, String)>) -> Reply {
    headers.into_iter().fold(reply, |reply, (name, value)| reply.with_header(name, value))
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
