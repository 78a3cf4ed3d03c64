//! A call's request body as it arrives, under two bounds:
//!
//! 1. **A deadline per message**, as a REST body is under
//!    `server.body_read_timeout_ms`: a message must arrive whole within
//!    that time of its first byte (a unary call's, of the call's start),
//!    or the call ends with `DEADLINE_EXCEEDED` and what was buffered of
//!    it is freed. Without it, a client that sends headers only, or a
//!    message one byte short of its declared length, holds the stream
//!    and its buffer for as long as the connection lives. Between
//!    messages of a stream there is no deadline here: a stream waiting
//!    for its next request is bounded by `crate::grpc::stream`'s idle
//!    timeout.
//! 2. **A receive budget** shared by the listener
//!    (`server.grpc_max_receiving_bytes`): a message of
//!    [`LARGE_MESSAGE`] bytes or more takes its declared length from the
//!    budget when its length prefix arrives and gives it back when it is
//!    complete (or abandoned). A large message that does not fit is
//!    refused at once with `RESOURCE_EXHAUSTED` (retry shortly), so
//!    clients that start many large messages and never finish them hold
//!    at most the budget, not their sum. Small messages never wait.
//!
//! The body follows gRPC's framing (a flag byte, a 4-byte big-endian
//! length, the message) only to know where messages start and end; the
//! bytes themselves pass through untouched.

use bytes::{Buf, Bytes};
use http_body::{Body, Frame};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tonic::Status;

/// Bytes before a gRPC message: the compression flag and the length.
const PREFIX_LEN: usize = 5;

/// Messages at least this long take their length from the receive budget.
pub const LARGE_MESSAGE: u32 = 64 << 10;

/// The bounds every call's body is under.
#[derive(Clone)]
pub struct IncomingLimits {
    /// `server.body_read_timeout_ms`.
    pub message_timeout: Duration,
    /// The listener's receive budget, in bytes.
    pub budget: Arc<Semaphore>,
    /// Its size (`server.grpc_max_receiving_bytes`).
    pub budget_bytes: usize,
}

/// `inner`, under [`IncomingLimits`] (module docs).
pub struct IncomingBody<B> {
    inner: B,
    limits: IncomingLimits,
    framing: Framing,
    /// Armed while a message is in progress.
    deadline: Option<Pin<Box<Sleep>>>,
    /// The budget the message in progress holds.
    held: Option<OwnedSemaphorePermit>,
    /// A refusal to return instead of the next frame.
    refused: Option<Status>,
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

impl<B> IncomingBody<B> {
    /// `inner` under `limits`; when `unary`, the first message's deadline
    /// runs from now (the headers alone started it).
    pub fn new(inner: B, limits: IncomingLimits, unary: bool) -> IncomingBody<B> {
        let deadline = unary.then(|| Box::pin(tokio::time::sleep(limits.message_timeout)));
        IncomingBody {
            inner,
            limits,
            framing: Framing::Prefix { have: 0, length: 0 },
            deadline,
            held: None,
            refused: None,
        }
    }

    /// Follows the framing over `data`: a message's start arms the
    /// deadline, its length prefix takes budget, its end gives both back.
    fn track(&mut self, mut data: &[u8]) {
        while !data.is_empty() && self.refused.is_none() {
            match &mut self.framing {
                Framing::Prefix { have, length } => {
                    if *have == 0 && self.deadline.is_none() {
                        self.deadline = Some(Box::pin(tokio::time::sleep(self.limits.message_timeout)));
                    }
                    if *have > 0 {
                        *length = (*length << 8) | u32::from(data[0]);
                    }
                    *have += 1;
                    data = &data[1..];
                    if *have == PREFIX_LEN {
                        let length = *length;
                        self.framing = Framing::Message { left: u64::from(length) };
                        self.take_budget(length);
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
                self.held = None;
            }
        }
    }

    /// Takes a large message's `length` from the budget, or refuses it.
    /// A message longer than the whole budget is left for the codec's size
    /// limit to refuse (the budget is at least that limit).
    fn take_budget(&mut self, length: u32) {
        let fits_at_all = usize::try_from(length).is_ok_and(|l| l <= self.limits.budget_bytes);
        if length < LARGE_MESSAGE || !fits_at_all {
            return;
        }
        match self.limits.budget.clone().try_acquire_many_owned(length) {
            Ok(permit) => self.held = Some(permit),
            Err(_) => {
                self.refused = Some(Status::resource_exhausted(format!(
                    "too many large messages are being received at once (server.grpc_max_receiving_bytes = {}); retry shortly",
                    self.limits.budget_bytes
                )))
            }
        }
    }
}

impl<B> Body for IncomingBody<B>
where
    B: Body<Data = Bytes, Error = Status> + Unpin,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if let Some(refused) = this.refused.take() {
            return Poll::Ready(Some(Err(refused)));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.track(data.chunk());
                }
                match this.refused.take() {
                    Some(refused) => Poll::Ready(Some(Err(refused))),
                    None => Poll::Ready(Some(Ok(frame))),
                }
            }
            Poll::Pending => {
                let expired = this.deadline.as_mut().is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if !expired {
                    return Poll::Pending;
                }
                this.deadline = None;
                this.held = None;
                Poll::Ready(Some(Err(Status::deadline_exceeded(format!(
                    "the request message did not arrive within {} ms (server.body_read_timeout_ms)",
                    this.limits.message_timeout.as_millis()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(budget: usize) -> IncomingLimits {
        IncomingLimits {
            message_timeout: Duration::from_secs(30),
            budget: Arc::new(Semaphore::new(budget)),
            budget_bytes: budget,
        }
    }

    fn body(unary: bool, limits: IncomingLimits) -> IncomingBody<tonic::body::Body> {
        IncomingBody::new(tonic::body::Body::empty(), limits, unary)
    }

    fn prefix(length: u32) -> Vec<u8> {
        let mut p = vec![0];
        p.extend_from_slice(&length.to_be_bytes());
        p
    }

    #[tokio::test]
    async fn a_message_in_progress_is_under_its_deadline() {
        let mut b = body(false, limits(1 << 20));
        assert!(b.deadline.is_none(), "a stream waits for its first message without a deadline");
        b.track(&[0, 0, 0]);
        assert!(b.deadline.is_some(), "a message started");
        b.track(&[0, 3, b'a', b'b']);
        assert!(b.deadline.is_some(), "one byte still to come");
        b.track(&[b'c', 0]);
        assert!(b.deadline.is_some(), "the next message started in the same chunk");
        b.track(&[0, 0, 0, 0]);
        assert!(b.deadline.is_none(), "an empty message is complete after its prefix");
    }

    #[tokio::test]
    async fn a_unary_call_is_under_its_deadline_from_the_start() {
        let mut b = body(true, limits(1 << 20));
        assert!(b.deadline.is_some());
        b.track(&[0, 0, 0, 0, 1, 7]);
        assert!(b.deadline.is_none());
    }

    #[tokio::test]
    async fn large_messages_hold_the_budget_until_they_are_complete() {
        let shared = limits(200 << 10);
        let mut first = body(false, shared.clone());
        first.track(&prefix(150 << 10));
        assert_eq!(shared.budget.available_permits(), 50 << 10);
        let mut second = body(false, shared.clone());
        second.track(&prefix(100 << 10));
        assert!(second.refused.is_some(), "the budget cannot hold both");
        let mut small = body(false, shared.clone());
        small.track(&prefix(1000));
        assert!(small.refused.is_none() && small.held.is_none(), "small messages take no budget");
        first.track(&vec![0; 150 << 10]);
        assert_eq!(shared.budget.available_permits(), 200 << 10, "complete: given back");
        let mut abandoned = body(false, shared.clone());
        abandoned.track(&prefix(100 << 10));
        drop(abandoned);
        assert_eq!(shared.budget.available_permits(), 200 << 10, "dropped: given back");
        let mut oversized = body(false, shared.clone());
        oversized.track(&prefix(300 << 10));
        assert!(oversized.refused.is_none(), "left for the size limit");
    }
}
