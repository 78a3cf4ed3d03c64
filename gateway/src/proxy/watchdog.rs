//! The response-head deadline of a proxied attempt, which Pingora cannot
//! enforce itself: its upstream read timeout restarts at every read, so an
//! upstream writing its head one byte per second never trips a 3 s
//! timeout and holds the client as long as it likes.
//!
//! A [`Watchdog`] per attempt holds a duplicate of the upstream socket
//! (taken while Pingora holds the connection, in `connected_to_upstream`;
//! the raw descriptor number is never used after that call) and a task
//! that sleeps until the current deadline. At the deadline it shuts the
//! socket down: Pingora's read in progress ends with an error, which the
//! proxy phases report as the timeout it is ([`Watchdog::expired`]).
//!
//! The deadline can move (the phases decide it: the total timeout from
//! the start, the first-byte timeout once the request is sent) and is
//! dropped with the watchdog when the head arrives. Dropping disarms it
//! under the same lock the task shuts the socket down under, so a
//! connection that goes back to Pingora's pool is never shut down.

use std::net::{Shutdown, TcpStream};
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Which timeout a deadline comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `timeouts.first_byte_ms`, counted from the end of the request.
    FirstByte(Duration),
    /// `timeouts.total_ms`, counted from the request's arrival.
    Total(Duration),
}

/// A deadline and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// When it passes.
    pub at: Instant,
    /// Its timeout.
    pub limit: Limit,
}

impl Deadline {
    /// The earlier of two optional deadlines.
    pub fn earliest(a: Option<Deadline>, b: Option<Deadline>) -> Option<Deadline> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.at < a.at { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

#[derive(Debug)]
struct State {
    /// The duplicate socket; `None` once shut down or disarmed.
    socket: Option<TcpStream>,
    deadline: Option<Deadline>,
    expired: Option<Deadline>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    wake: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Shuts an upstream connection down at its deadline (module docs).
#[derive(Debug)]
pub struct Watchdog {
    shared: Arc<Shared>,
}

impl Watchdog {
    /// Watches the connection whose descriptor Pingora passed to
    /// `connected_to_upstream`; must be called during that call, while
    /// Pingora holds the connection. Fails only when the descriptor
    /// cannot be duplicated.
    pub fn watch(fd: RawFd, deadline: Option<Deadline>) -> std::io::Result<Watchdog> {
        if fd < 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a descriptor"));
        }
        // SAFETY: `fd` is the descriptor of the upstream connection that
        // Pingora owns and keeps open for the whole `connected_to_upstream`
        // call this runs in; it is only borrowed here to be duplicated, and
        // the number is not kept.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = TcpStream::from(borrowed.try_clone_to_owned()?);
        let shared = Arc::new(Shared {
            state: Mutex::new(State { socket: Some(socket), deadline, expired: None }),
            wake: Notify::new(),
        });
        tokio::spawn(run(shared.clone()));
        Ok(Watchdog { shared })
    }

    /// Moves the deadline (`None`: none for now).
    pub fn set(&self, deadline: Option<Deadline>) {
        self.shared.lock().deadline = deadline;
        self.shared.wake.notify_one();
    }

    /// The deadline that shut the connection down, if one did.
    pub fn expired(&self) -> Option<Deadline> {
        self.shared.lock().expired
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Closes the duplicate; the task sees no socket and ends.
        self.shared.lock().socket = None;
        self.shared.wake.notify_one();
    }
}

/// The watchdog's task: sleeps until the deadline (or a change), then
/// shuts the socket down if the deadline still stands.
async fn run(shared: Arc<Shared>) {
    loop {
        let deadline = {
            let state = shared.lock();
            if state.socket.is_none() {
                return;
            }
            state.deadline
        };
        // A change made after the read above leaves a permit: no wake-up is lost.
        let changed = shared.wake.notified();
        match deadline {
            Some(d) => {
                tokio::select! {
                    () = changed => {}
                    () = tokio::time::sleep_until(tokio::time::Instant::from_std(d.at)) => {}
                }
            }
            None => changed.await,
        }
        let mut state = shared.lock();
        if let Some(due) = state.deadline.filter(|d| Instant::now() >= d.at) {
            if let Some(socket) = state.socket.take() {
                // Ends Pingora's pending read; an error here means it is already closed.
                let _ = socket.shutdown(Shutdown::Both);
                state.expired = Some(due);
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    fn in_ms(ms: u64, limit: Limit) -> Option<Deadline> {
        Some(Deadline { at: Instant::now() + Duration::from_millis(ms), limit })
    }

    #[tokio::test]
    async fn the_deadline_ends_a_pending_read() {
        let (client, _server) = pair();
        let limit = Limit::FirstByte(Duration::from_millis(50));
        let dog = Watchdog::watch(client.as_raw_fd(), None).unwrap();
        dog.set(in_ms(50, limit));
        let reader = std::thread::spawn(move || {
            let mut client = client;
            client.read(&mut [0u8; 16]).map_err(|e| e.kind())
        });
        let read = tokio::task::spawn_blocking(move || reader.join().unwrap()).await.unwrap();
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert_eq!(dog.expired().map(|d| d.limit), Some(limit));
    }

    #[tokio::test]
    async fn a_dropped_or_moved_watchdog_leaves_the_connection_alone() {
        let (mut client, mut server) = pair();
        let dog = Watchdog::watch(client.as_raw_fd(), in_ms(30, Limit::Total(Duration::ZERO))).unwrap();
        dog.set(in_ms(10_000, Limit::Total(Duration::ZERO)));
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert_eq!(dog.expired(), None, "moved later");
        drop(dog);
        tokio::time::sleep(Duration::from_millis(20)).await;
        std::io::Write::write_all(&mut server, b"x").unwrap();
        let mut byte = [0u8; 1];
        client.read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"x", "the connection still works");
    }

    #[test]
    fn earliest_picks_the_sooner() {
        let a = in_ms(10, Limit::Total(Duration::ZERO));
        let b = in_ms(20, Limit::FirstByte(Duration::ZERO));
        assert_eq!(Deadline::earliest(a, b), a);
        assert_eq!(Deadline::earliest(b, a), a);
        assert_eq!(Deadline::earliest(None, b), b);
        assert_eq!(Deadline::earliest(None, None), None);
    }
}
