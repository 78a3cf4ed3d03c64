//! What the gateway does to its listening sockets that the standard
//! library cannot: keep a deep accept queue, see how many connections wait
//! in it, and stop new connections from joining it while those already
//! there stay (the first step of a graceful close, see
//! [`super::listener`]).
//!
//! Why a socket filter: closing a listening socket resets every connection
//! still in its accept queue, although the kernel completed their
//! handshakes and their clients may already have sent a request. A classic
//! BPF filter that drops pure SYN segments stops new handshakes; the
//! queued connections (and handshakes already past their SYN) are not
//! touched, so the server can accept all of them before it closes the
//! socket. A client whose SYN was dropped retransmits it, finds the socket
//! closed and gets "connection refused": it never was accepted.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// The accept queue the listeners ask for (as Pingora's own listeners
/// do; the kernel caps it at `net.core.somaxconn`).
pub const BACKLOG: i32 = 65_535;

/// `SO_ATTACH_FILTER` (26 on every Linux architecture; not exported by
/// the `libc` crate for every target).
const SO_ATTACH_FILTER: libc::c_int = 26;

/// The TCP flag bits the filter looks at.
const TCP_SYN: u32 = 0x02;
const TCP_ACK: u32 = 0x10;

/// Byte offset of the flags in the TCP header (a socket filter on a TCP
/// socket sees the segment from its TCP header on).
const TCP_FLAGS_OFFSET: u32 = 13;

/// Sets the accept queue of the listening socket `socket` to [`BACKLOG`]
/// (`listen` again on a listening socket only changes its backlog).
pub fn deepen_backlog(socket: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor the caller owns.
    if unsafe { libc::listen(socket.as_raw_fd(), BACKLOG) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Connections in the accept queue of the listening socket `fd`: their
/// handshake is complete and nobody has accepted them yet.
pub fn queued_connections(fd: RawFd) -> io::Result<u32> {
    // SAFETY: tcp_info is plain data; zero is a valid value of every field.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::tcp_info>()).unwrap_or(0);
    // SAFETY: `info` is writable for `len` bytes; the kernel writes at most that.
    let rc = unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, std::ptr::addr_of_mut!(info).cast(), &mut len)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // For a listening socket the kernel reports its accept queue's length here.
    Ok(info.tcpi_unacked)
}

/// Makes the listening socket `fd` drop every new connection's first
/// segment (a SYN without ACK); connections already queued or past their
/// SYN are kept. There is no undoing it: call it only when the listener
/// is about to close.
pub fn refuse_new_connections(fd: RawFd) -> io::Result<()> {
    let mut program = [
        // A = the flags byte of the TCP header.
        insn(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, 0, TCP_FLAGS_OFFSET),
        // A &= SYN | ACK.
        insn(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, 0, TCP_SYN | TCP_ACK),
        // A SYN without ACK (a new connection): drop; anything else: keep.
        insn(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 1, TCP_SYN),
        insn(libc::BPF_RET | libc::BPF_K, 0, 0),
        insn(libc::BPF_RET | libc::BPF_K, 0, u32::MAX),
    ];
    let fprog =
        libc::sock_fprog { len: u16::try_from(program.len()).unwrap_or(0), filter: program.as_mut_ptr() };
    let size = libc::socklen_t::try_from(std::mem::size_of::<libc::sock_fprog>()).unwrap_or(0);
    // SAFETY: `fprog` points at `program`, both alive for the call; the
    // kernel copies the program.
    let rc = unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, SO_ATTACH_FILTER, std::ptr::addr_of!(fprog).cast(), size)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One classic BPF instruction; a jump goes on with the next one when
/// true and skips `skip_if_false` when false.
fn insn(code: u32, skip_if_false: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code: u16::try_from(code).unwrap_or(u16::MAX), jt: 0, jf: skip_if_false, k }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    #[test]
    fn queued_connections_stay_and_new_ones_never_complete() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut queued: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
        for q in &mut queued {
            q.write_all(b"ping").unwrap();
        }
        assert_eq!(queued_connections(listener.as_raw_fd()).unwrap(), 3);

        refuse_new_connections(listener.as_raw_fd()).unwrap();
        // The kernel drops the SYN (and its retransmissions) while the filter is on:
        // the handshake cannot complete, however long the wait.
        let late = TcpStream::connect_timeout(&addr, Duration::from_millis(300));
        assert!(late.is_err(), "a new connection completed its handshake: {late:?}");
        assert_eq!(queued_connections(listener.as_raw_fd()).unwrap(), 3, "the queued ones are kept");
        for _ in 0..3 {
            let (mut accepted, _) = listener.accept().unwrap();
            let mut got = [0u8; 4];
            accepted.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"ping", "what the client sent before the filter is there");
        }
        assert_eq!(queued_connections(listener.as_raw_fd()).unwrap(), 0);
    }

    #[test]
    fn the_backlog_can_be_deepened() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        deepen_backlog(&listener).unwrap();
        assert!(TcpStream::connect(listener.local_addr().unwrap()).is_ok());
    }
}
