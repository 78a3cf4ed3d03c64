//! One keep-alive HTTP/1.1 connection that sends plain or streamed infer
//! calls and times them: the whole response for a plain call; the moment
//! the `draft` event and the `final` event are complete for a stream.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What one call measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Timing {
    /// A plain call: time to the whole response.
    Plain(Duration),
    /// A stream: time to the complete `draft` event (none when the final
    /// came first) and to the complete `final` event.
    Stream {
        /// Time to the draft.
        draft: Option<Duration>,
        /// Time to the final.
        last: Duration,
    },
}

/// A connection to the gateway.
pub struct Client {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Client {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr).await.with_context(|| format!("connect {addr}"))?;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Client { sender, host: addr.to_string() })
    }

    /// Sends one call to `path` with `body`; a stream when `stream` is set.
    pub async fn call(&mut self, path: &str, body: Bytes, stream: bool) -> anyhow::Result<Timing> {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("host", &self.host)
            .header("content-type", "application/json")
            .header("cache-control", "no-store");
        if stream {
            req = req.header("accept", "text/event-stream");
        }
        let req = req.body(Full::new(body))?;
        self.sender.ready().await?;
        let started = Instant::now();
        let resp = self.sender.send_request(req).await?;
        if !resp.status().is_success() {
            bail!("{path} answered {}", resp.status());
        }
        let mut body = resp.into_body();
        if !stream {
            body.collect().await?;
            return Ok(Timing::Plain(started.elapsed()));
        }
        let mut events = EventReader::default();
        let mut draft = None;
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else { continue };
            for name in events.push(&data) {
                match name.as_str() {
                    "draft" => draft = Some(started.elapsed()),
                    "final" => {
                        let last = started.elapsed();
                        while body.frame().await.is_some() {}
                        return Ok(Timing::Stream { draft, last });
                    }
                    other => bail!("stream ended with event {other:?}"),
                }
            }
        }
        bail!("stream ended without a final event")
    }
}

/// Splits received bytes into complete SSE events; returns their names.
#[derive(Default)]
struct EventReader {
    buffer: Vec<u8>,
}

impl EventReader {
    fn push(&mut self, data: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(data);
        let mut names = Vec::new();
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&block);
            if let Some(name) = text.lines().find_map(|l| l.strip_prefix("event: ")) {
                names.push(name.to_string());
            }
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_found_once_complete() {
        let mut r = EventReader::default();
        assert!(r.push(b": keep-alive\n\nevent: dra").is_empty());
        assert_eq!(r.push(b"ft\ndata: {}\n\nevent: final\ndata: {}\n"), ["draft"]);
        assert_eq!(r.push(b"\n"), ["final"]);
    }
}
