//! Reading request bodies and writing [`Reply`]s on a Pingora session;
//! shared by the V2 app and the admin app.

use crate::config::Limits;
use crate::error::GatewayError;
use crate::reply::Reply;
use bytes::{Bytes, BytesMut};
use pingora::http::ResponseHeader;
use pingora::prelude::Session;

/// Reads the whole body under the size limit and read timeout.
pub async fn read_body(session: &mut Session, limits: &Limits) -> Result<Bytes, GatewayError> {
    let max = limits.max_body_bytes;
    let declared = session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    if declared.is_some_and(|len| len > max) {
        return Err(GatewayError::BodyTooLarge { limit: max });
    }
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0).min(max));
    let read_all = async {
        loop {
            match session.read_request_body().await {
                Ok(Some(chunk)) => {
                    if buf.len() + chunk.len() > max {
                        return Err(GatewayError::BodyTooLarge { limit: max });
                    }
                    buf.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(GatewayError::BodyRead(e.to_string())),
            }
        }
    };
    match tokio::time::timeout(limits.body_read_timeout, read_all).await {
        Ok(result) => result.map(|()| buf.freeze()),
        Err(_) => Err(GatewayError::BodyTimeout(limits.body_read_timeout)),
    }
}

/// Writes a complete reply.
pub async fn write_reply(session: &mut Session, reply: Reply, head_only: bool) -> pingora::Result<()> {
    let mut header = ResponseHeader::build(reply.status, Some(reply.headers.len() + 2))?;
    header.insert_header("content-type", reply.content_type)?;
    header.insert_header("content-length", reply.body.len().to_string())?;
    for (name, value) in reply.headers {
        header.insert_header(name, value)?;
    }
    let no_body = head_only || reply.body.is_empty();
    session.write_response_header(Box::new(header), no_body).await?;
    if !no_body {
        session.write_response_body(Some(reply.body), true).await?;
    }
    Ok(())
}
