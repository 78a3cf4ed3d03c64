//! A call's request body under a deadline per message, as a REST body is
//! under `server.body_read_timeout_ms`: a message must arrive whole within
//! that time of its first byte (a unary call's, of the call's start), or
//! the call ends with `DEADLINE_EXCEEDED` and what was buffered of it is
//! freed. Without it, a client that sends headers only, or a message one
//! byte short of its declared length, holds the stream and its buffer for
//! as long as the connection lives.
//!
//! Between messages of a stream there is no deadline here: a stream
//! waiting for its next request is bounded by `crate::grpc::stream`'s
//! idle timeout.
//!
//! The body follows gRPC's framing (a flag byte, a 4-byte big-endian
//! length, the message) only to know when a message is in progress; the
//! bytes themselves pass through untouched.

use bytes::{Buf, Bytes};
use http_body::{Body, Frame};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;
use tonic::Status;

/// Bytes before a gRPC message: the compression flag and the length.
const PREFIX_LEN: usize = 5;

/// `inner`, with a deadline on each message (module docs).
pub struct MessageDeadline<B> {
    inner: B,
    timeout: Duration,
    framing: Framing,
    /// Armed while a message is in progress.
    deadline: Option<Pin<Box<Sleep>>>,
}

/// Where the body is in gRPC's framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Reading a message's prefix: `have` of its bytes read so far, the
    /// length bytes among them collected in `length`.
    Prefix { have: usize, length: u32 },
    /// Reading a message's bytes: `left` of them still to come.
    Message { left: u64 },
}

impl<B> MessageDeadline<B> {
    /// `inner` with `timeout` per message; when `unary`, the first
    /// message's deadline runs from now (the headers alone started it).
    pub fn new(inner: B, timeout: Duration, unary: bool) -> MessageDeadline<B> {
        let deadline = unary.then(|| Box::pin(tokio::time::sleep(timeout)));
        MessageDeadline { inner, timeout, framing: Framing::Prefix { have: 0, length: 0 }, deadline }
    }

    /// Follows the framing over `data`, arming the deadline when a
    /// message starts and disarming it when it is complete.
    fn track(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            match &mut self.framing {
                Framing::Prefix { have, length } => {
                    if *have == 0 && self.deadline.is_none() {
                        self.deadline = Some(Box::pin(tokio::time::sleep(self.timeout)));
                    }
                    if *have > 0 {
                        *length = (*length << 8) | u32::from(data[0]);
                    }
                    *have += 1;
                    data = &data[1..];
                    if *have == PREFIX_LEN {
                        self.framing = Framing::Message { left: u64::from(*length) };
                    }
                }
                Framing::Message { left } => {
                    let take = usize::try_from(*left).unwrap_or(usize::MAX).min(data.len());
                    *left -= take as u64;
                    data = &data[take..];
                }
            }
            if self.framing == (Framing::Message { left: 0 }) {
                self.framing = Framing::Prefix { have: 0, length: 0 };
                self.deadline = None;
            }
        }
    }
}

impl<B> Body for MessageDeadline<B>
where
    B: Body<Data = Bytes, Error = Status> + Unpin,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.track(data.chunk());
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                let expired = this.deadline.as_mut().is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if !expired {
                    return Poll::Pending;
                }
                this.deadline = None;
                Poll::Ready(Some(Err(Status::deadline_exceeded(format!(
                    "the request message did not arrive within {} ms (server.body_read_timeout_ms)",
                    this.timeout.as_millis()
                )))))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// When a deadline armed now would fall (for tests).
#[cfg(test)]
fn armed_at(body: &MessageDeadline<tonic::body::Body>) -> Option<tokio::time::Instant> {
    body.deadline.as_ref().map(|d| d.deadline())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(unary: bool) -> MessageDeadline<tonic::body::Body> {
        MessageDeadline::new(tonic::body::Body::empty(), Duration::from_secs(30), unary)
    }

    #[tokio::test]
    async fn a_message_in_progress_is_under_its_deadline() {
        let mut b = body(false);
        assert!(armed_at(&b).is_none(), "a stream waits for its first message without a deadline");
        b.track(&[0, 0, 0]);
        assert!(armed_at(&b).is_some(), "a message started");
        b.track(&[0, 3, b'a', b'b']);
        assert!(armed_at(&b).is_some(), "one byte still to come");
        b.track(&[b'c', 0]);
        assert!(armed_at(&b).is_some(), "the next message started in the same chunk");
        b.track(&[0, 0, 0, 0]);
        assert!(armed_at(&b).is_none(), "an empty message is complete after its prefix");
    }

    #[tokio::test]
    async fn a_unary_call_is_under_its_deadline_from_the_start() {
        let mut b = body(true);
        assert!(armed_at(&b).is_some());
        b.track(&[0, 0, 0, 0, 1, 7]);
        assert!(armed_at(&b).is_none());
    }
}
