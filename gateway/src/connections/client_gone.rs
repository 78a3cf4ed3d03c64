//! Noticing that a client left while its request is being computed.
//!
//! A plain (non-streamed) infer call reads nothing from the client while
//! its model runs, so a client that gives up would go unnoticed and its
//! queued work would still be computed. [`client_gone`] looks at the
//! socket every [`CHECK_EVERY`] (a non-blocking peek, which consumes
//! nothing) and resolves once the client closed it or it failed; the
//! caller then drops the computation, and the runtime skips queued work
//! whose requester is gone. Requests answered within the first interval
//! never look at the socket.

use std::os::unix::io::RawFd;
use std::time::Duration;

/// How often a request in progress checks its client's socket.
pub const CHECK_EVERY: Duration = Duration::from_millis(20);

/// Resolves once the client of socket `fd` has closed the connection
/// (end-of-stream, including a half-close) or the socket failed. Never
/// resolves for a client that is still connected, also when it already
/// sent a pipelined request. `fd` must stay open while this is polled: it
/// is the request's own connection.
pub async fn client_gone(fd: RawFd) {
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        if peer_closed(fd) {
            return;
        }
    }
}

/// True when a peek at `fd` says the peer closed it or it failed.
fn peer_closed(fd: RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: `fd` is an open socket owned by the connection being served
    // (the caller's contract); the peek writes at most one byte into
    // `byte` and consumes nothing from the socket.
    let n = unsafe {
        libc::recv(fd, std::ptr::addr_of_mut!(byte).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
    };
    match n {
        0 => true,
        n if n > 0 => false,
        _ => {
            let err = std::io::Error::last_os_error();
            !matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::io::AsRawFd;

    #[tokio::test]
    async fn a_closed_client_is_noticed_and_a_connected_one_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let fd = server.as_raw_fd();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let waited = tokio::time::timeout(CHECK_EVERY * 5, client_gone(fd)).await;
        assert!(waited.is_err(), "pending bytes are not a departure");
        drop(client);
        // The unread request bytes come first; the close is seen once they are read.
        let mut buf = [0u8; 64];
        let _ = std::io::Read::read(&mut &server, &mut buf).unwrap();
        tokio::time::timeout(Duration::from_secs(2), client_gone(fd)).await.unwrap();
    }
}
