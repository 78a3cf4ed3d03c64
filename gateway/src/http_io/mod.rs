//! Reading request bodies and writing [`Reply`]s on a Pingora session;
//! shared by the V2 app and the admin app. Also the request-head checks
//! every request gets before it is served ([`check_head`]), and the V2
//! API's content codings: compressed request bodies
//! ([`content_coding`]) and compressed responses ([`compress`]).

mod compress;
mod content_coding;

pub use compress::encode_reply;
pub use content_coding::{request_coding, Coding};

use crate::config::Limits;
use crate::error::GatewayError;
use crate::reply::{static_value, Reply};
use bytes::{Bytes, BytesMut};
use content_coding::Inflater;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::Session;

/// Checks what RFC 9112 requires of every request head: an HTTP/1.1
/// request has exactly one `Host` (else 400), and no request has two.
pub fn check_head(header: &RequestHeader) -> Result<(), GatewayError> {
    let hosts = header.headers.get_all(http::header::HOST).iter().count();
    let bad = |message: &str| GatewayError::BadHeader { name: "Host", message: message.to_string() };
    match hosts {
        0 if header.version == http::Version::HTTP_11 => {
            Err(bad("an HTTP/1.1 request must carry a Host header"))
        }
        0 | 1 => Ok(()),
        _ => Err(bad("more than one Host header")),
    }
}

/// Whether the client waits for `100 Continue` before sending its body
/// (`Expect: 100-continue` on HTTP/1.1); any other expectation is a 417.
fn expects_continue(header: &RequestHeader) -> Result<bool, GatewayError> {
    let Some(value) = header.headers.get(http::header::EXPECT) else { return Ok(false) };
    if value.as_bytes().eq_ignore_ascii_case(b"100-continue") {
        return Ok(header.version == http::Version::HTTP_11);
    }
    Err(GatewayError::ExpectationFailed(String::from_utf8_lossy(value.as_bytes()).chars().take(64).collect()))
}

/// Reads the whole body as sent under the size limit and read timeout
/// ([`read_decoded_body`] with [`Coding::Identity`]).
pub async fn read_body(session: &mut Session, limits: &Limits) -> Result<Bytes, GatewayError> {
    read_decoded_body(session, limits, Coding::Identity).await
}

/// Reads the whole body under the size limit and read timeout, decoding
/// it from `coding` as it arrives: the limit then bounds both the bytes
/// sent and the decoded body ([`content_coding`]). A client that sent
/// `Expect: 100-continue` gets `100 Continue` first, unless the body it
/// announced is too large: then the 413 comes without reading it (and the
/// connection is not reused, as its body was never read).
pub async fn read_decoded_body(
    session: &mut Session,
    limits: &Limits,
    coding: Coding,
) -> Result<Bytes, GatewayError> {
    let max = limits.max_body_bytes;
    let declared = session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let wants_continue =
        expects_continue(session.req_header()).inspect_err(|_| session.set_keepalive(None))?;
    if declared.is_some_and(|len| len > max) {
        if wants_continue {
            session.set_keepalive(None);
        }
        return Err(GatewayError::BodyTooLarge { limit: max });
    }
    if wants_continue && declared != Some(0) {
        session.write_continue_response().await.map_err(|e| GatewayError::BodyRead(e.to_string()))?;
    }
    // A body that arrives as one chunk (most do) is kept as it came;
    // only a second chunk starts a buffer, sized for the declared length.
    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    let mut inflater = Inflater::new(coding, max);
    let mut received = 0usize;
    let read_all = async {
        loop {
            match session.read_request_body().await {
                Ok(Some(chunk)) => {
                    received = received.saturating_add(chunk.len());
                    if received > max {
                        return Err(GatewayError::BodyTooLarge { limit: max });
                    }
                    if let Some(inflater) = inflater.as_mut() {
                        inflater.push(&chunk)?;
                        continue;
                    }
                    if first.is_none() && buf.is_empty() {
                        first = Some(chunk);
                        continue;
                    }
                    if let Some(held) = first.take() {
                        buf.reserve(declared.unwrap_or(0).min(max).max(held.len() + chunk.len()));
                        buf.extend_from_slice(&held);
                    }
                    buf.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(GatewayError::BodyRead(e.to_string())),
            }
        }
    };
    match tokio::time::timeout(limits.body_read_timeout, read_all).await {
        Ok(Err(e)) => Err(e),
        Ok(Ok(())) => match inflater {
            Some(inflater) => inflater.finish(),
            None => Ok(first.unwrap_or_else(|| buf.freeze())),
        },
        Err(_) => Err(GatewayError::BodyTimeout(limits.body_read_timeout)),
    }
}

/// Writes a complete reply. The head is built as `http` parts and handed
/// to Pingora whole: its own header setters parse and copy every name and
/// value again (and keep a second map of their spelling), which made up a
/// third of the allocations of a cache hit.
pub async fn write_reply(session: &mut Session, reply: Reply, head_only: bool) -> pingora::Result<()> {
    let (mut parts, ()) = http::Response::new(()).into_parts();
    parts.status = http::StatusCode::from_u16(reply.status)
        .map_err(|_| pingora::Error::explain(pingora::ErrorType::InvalidHTTPHeader, "invalid status"))?;
    parts.headers.reserve(reply.headers.len() + 2);
    let content_type = static_value(reply.content_type).map_err(|_| {
        pingora::Error::explain(pingora::ErrorType::InvalidHTTPHeader, "invalid content type")
    })?;
    parts.headers.insert(http::header::CONTENT_TYPE, content_type);
    parts.headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(reply.body.len()));
    for (name, value) in reply.headers {
        parts.headers.insert(name, value);
    }
    let no_body = head_only || reply.body.is_empty();
    session.write_response_header(Box::new(ResponseHeader::from(parts)), no_body).await?;
    if !no_body {
        session.write_response_body(Some(reply.body), true).await?;
    }
    Ok(())
}
