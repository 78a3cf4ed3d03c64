//! One inference on an upstream model, within the request's budget.
//!
//! 1. The model's signature must be known and compatible with its routes,
//!    else the model is unavailable (503; the route falls back).
//! 2. The request is encoded once ([`super::v2_codec`]): binary tensors to
//!    a server with Triton's extension, JSON tensors to one without.
//! 3. An address is chosen ([`super::select`]: health, breaker, P2C over
//!    peak-EWMA) among those not tried yet.
//! 4. The attempt's timeouts are the upstream's, cut to the budget left:
//!    no attempt or retry outlives the request's deadline.
//! 5. Outcome: an answer is decoded and checked ([`super::v2_check`]:
//!    datatypes, shapes, one row per request row); a refused connection, a
//!    broken one, a timeout, a 5xx, a 429 or a garbled answer tries the
//!    next address (inference is idempotent) while budget remains; a 4xx
//!    is the request's fault and is returned at once.
//! 6. Out of addresses or budget: the last failure, an [`UpstreamError`]
//!    whose [`UpstreamFailure`] gives the client 503 (unreachable), 502
//!    (bad answer), 504 (time) or 429.
//!
//! The answer is the outputs; routing's backend says which model, pool
//! and device they are (`routing::mixed_backend`).

use super::address::Attempt;
use super::client::{Exchange, ExchangeLimits, TransportError};
use super::metadata::model_path;
use super::observe::{attempt_finished, AttemptRecord, Outcome, Via};
use super::registry::{RemoteModel, SignatureState, Upstream};
use super::select::choose;
use super::v2_check::Expected;
use super::v2_codec::{decode_response, encode_request, encode_request_json, EncodedRequest};
use crate::telemetry::propagation::trace_headers;
use crate::telemetry::spans::{self, UpstreamCall};
use crate::upstream_error::{UpstreamError, UpstreamFailure};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use switchyard_protocol::v2::{CONTENT_TYPE_BINARY, CONTENT_TYPE_JSON, INFERENCE_HEADER_CONTENT_LENGTH};
use switchyard_runtime::{InferenceRequest, Tensor};
use tracing::Span;

/// Largest V2 response body accepted from an upstream.
pub const MAX_RESPONSE_BYTES: usize = 256 << 20;

/// What one call needs, fixed across its attempts.
struct Call<'a> {
    upstream: &'a Upstream,
    model: &'a RemoteModel,
    encoded: EncodedRequest,
    path: String,
    /// What the answer must fit: outputs asked for, signature, rows.
    expected: Expected<'a>,
}

/// A failed attempt: the error, and whether another address may succeed.
struct Failure {
    error: UpstreamError,
    retry: bool,
}

/// Runs `request` on `model` of `upstream` before `deadline` (steps
/// above); returns the outputs asked for.
pub async fn infer(
    upstream: &Upstream,
    model: &RemoteModel,
    request: InferenceRequest,
    deadline: Instant,
) -> Result<Vec<(String, Tensor)>, UpstreamError> {
    let signature = match model.state() {
        SignatureState::Known(sig) => sig,
        SignatureState::Unknown(why) | SignatureState::Incompatible(why) => {
            return Err(error(upstream, model, UpstreamFailure::ModelUnavailable, why))
        }
    };
    let encoded = if upstream.sends_binary_tensors() {
        encode_request(&request)
    } else {
        encode_request_json(&request).map_err(|why| error(upstream, model, UpstreamFailure::Rejected, why))?
    };
    let call = Call {
        upstream,
        model,
        encoded,
        path: model_path(&model.config, "/infer"),
        expected: Expected::for_request(&request, &signature),
    };
    let mut tried = Vec::new();
    let mut last = None;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            let why = format!("the latency budget ran out after {} attempt(s)", tried.len());
            return Err(error(upstream, model, UpstreamFailure::TimedOut, why));
        }
        let Some((index, attempt)) = choose(&upstream.addresses, &tried) else { break };
        tried.push(index);
        match call.attempt(attempt, remaining).await {
            Ok(outputs) => return Ok(outputs),
            Err(Failure { error, retry }) => {
                last = Some(error);
                if !retry {
                    break;
                }
            }
        }
    }
    Err(last.unwrap_or_else(|| {
        let why = "no address can take requests (health checks failing or breakers open)".to_string();
        error(upstream, model, UpstreamFailure::Unavailable, why)
    }))
}

impl Call<'_> {
    /// One attempt on the attempt's address (steps 4-5), traced as an
    /// `upstream_call` span whose `traceparent` the request carries.
    async fn attempt(&self, attempt: Attempt, remaining: Duration) -> Result<Vec<(String, Tensor)>, Failure> {
        let addr = attempt.address().addr;
        let span = spans::upstream_call(
            spans::current_parent().as_ref(),
            &UpstreamCall {
                upstream: &self.upstream.config.name,
                addr,
                via: Via::V2.label(),
                route: None,
                model: Some(&self.model.config.name),
            },
        );
        let timeouts = self.upstream.config.timeouts;
        let limits = ExchangeLimits {
            first_byte: timeouts.first_byte.min(remaining),
            total: timeouts.total.unwrap_or(Duration::MAX).min(remaining),
            max_body: MAX_RESPONSE_BYTES,
        };
        let result = match self.request(addr, &span) {
            Ok(request) => self.upstream.client.exchange(request, limits).await,
            Err(e) => Err(TransportError::Broken(format!("cannot build the request: {e}"))),
        };
        let elapsed = attempt.started().elapsed();
        let status = result.as_ref().ok().map(|exchange| exchange.status.as_u16());
        let (outcome, verdict) = match result {
            Ok(exchange) => self.judge(exchange),
            Err(e) => (transport_outcome(&e), Err(self.transport_failure(e))),
        };
        attempt_finished(&AttemptRecord {
            upstream: &self.upstream.config.name,
            addr,
            via: Via::V2,
            outcome,
            status,
            elapsed,
            span: &span,
        });
        match outcome {
            o if o.is_address_failure() => attempt.failed(),
            Outcome::Ok | Outcome::ClientError => attempt.succeeded(elapsed),
            // 429: alive but busy; its fast refusal says nothing of its latency.
            _ => drop(attempt),
        }
        verdict.map_err(|e| e.with_address(addr))
    }

    /// The attempt's HTTP request: the encoded tensors (binary with their
    /// header length, or JSON), and the `traceparent` of `span` when it is
    /// traced.
    fn request(&self, addr: SocketAddr, span: &Span) -> http::Result<Request<Full<Bytes>>> {
        let mut request =
            Request::builder().method(Method::POST).uri(self.upstream.client.uri(addr, &self.path));
        request = match self.encoded.header_len {
            Some(header_len) => request
                .header(http::header::CONTENT_TYPE, CONTENT_TYPE_BINARY)
                .header(INFERENCE_HEADER_CONTENT_LENGTH, header_len),
            None => request.header(http::header::CONTENT_TYPE, CONTENT_TYPE_JSON),
        };
        for (name, value) in trace_headers(span) {
            request = request.header(name, value);
        }
        request.body(Full::new(self.encoded.body.clone()))
    }

    /// Classifies an answer and decodes a successful one.
    fn judge(&self, exchange: Exchange) -> (Outcome, Result<Vec<(String, Tensor)>, Failure>) {
        let status = exchange.status;
        let snippet = || String::from_utf8_lossy(&exchange.body[..exchange.body.len().min(300)]).to_string();
        let fail = |failure, retry, why: String| Failure { error: self.error(failure, why), retry };
        if status.is_success() {
            let header_len = exchange
                .headers
                .get(INFERENCE_HEADER_CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<usize>().ok());
            return match decode_response(exchange.body.clone(), header_len, &self.expected) {
                Ok(outputs) => (Outcome::Ok, Ok(outputs)),
                Err(bad) => {
                    (Outcome::BadResponse, Err(fail(UpstreamFailure::BadResponse, true, bad.to_string())))
                }
            };
        }
        let why = format!("answered {status}: {}", snippet());
        match status {
            StatusCode::TOO_MANY_REQUESTS => {
                (Outcome::Overloaded, Err(fail(UpstreamFailure::Overloaded, true, why)))
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                (Outcome::ServerError, Err(fail(UpstreamFailure::Unavailable, true, why)))
            }
            StatusCode::NOT_FOUND => {
                (Outcome::ServerError, Err(fail(UpstreamFailure::BadResponse, true, why)))
            }
            s if s.is_client_error() => {
                (Outcome::ClientError, Err(fail(UpstreamFailure::Rejected, false, why)))
            }
            _ => (Outcome::ServerError, Err(fail(UpstreamFailure::Failed, true, why))),
        }
    }

    fn transport_failure(&self, e: TransportError) -> Failure {
        let failure = match &e {
            TransportError::Connect(_) => UpstreamFailure::Unavailable,
            TransportError::FirstByteTimeout(_) | TransportError::TotalTimeout(_) => {
                UpstreamFailure::TimedOut
            }
            TransportError::Broken(_) | TransportError::TooLarge(_) => UpstreamFailure::Failed,
        };
        Failure {
            error: self.error(failure, e.to_string()),
            retry: !matches!(e, TransportError::TooLarge(_)),
        }
    }

    fn error(&self, failure: UpstreamFailure, why: String) -> UpstreamError {
        error(self.upstream, self.model, failure, why)
    }
}

impl Failure {
    /// Prefixes the message with the address, so the client's error says
    /// which one failed last.
    fn with_address(mut self, addr: SocketAddr) -> Failure {
        self.error.message = format!("{addr} {}", self.error.message);
        self
    }
}

fn transport_outcome(e: &TransportError) -> Outcome {
    match e {
        TransportError::Connect(_) => Outcome::ConnectError,
        TransportError::Broken(_) => Outcome::Broken,
        TransportError::FirstByteTimeout(_) | TransportError::TotalTimeout(_) => Outcome::Timeout,
        TransportError::TooLarge(_) => Outcome::BadResponse,
    }
}

fn error(upstream: &Upstream, model: &RemoteModel, failure: UpstreamFailure, why: String) -> UpstreamError {
    UpstreamError {
        model: model.config.name.clone(),
        upstream: upstream.config.name.clone(),
        failure,
        message: why,
    }
}
