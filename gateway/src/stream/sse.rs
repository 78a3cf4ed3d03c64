//! The server-sent events wire format (WHATWG HTML, "Server-sent events"):
//! each event is `event: NAME` then one `data:` line per line of the
//! payload, closed by a blank line; a line starting with `:` is a comment
//! that clients ignore, used as a heartbeat.
//!
//! Payloads here are compact JSON (no raw newlines), so an event is one
//! `data:` line; a payload that does contain line breaks (CRLF, LF or a
//! lone CR, as clients split lines) is still framed correctly, one `data:`
//! line per line, so no payload can start a field of its own.

use bytes::{BufMut, Bytes, BytesMut};

/// The `Content-Type` of an event stream.
pub const CONTENT_TYPE: &str = crate::endpoint::EVENT_STREAM;

/// The heartbeat comment: keeps proxies and clients from timing out an
/// idle stream while the heavy model runs.
pub const HEARTBEAT: &[u8] = b": keep-alive\n\n";

/// One event named `name` carrying `data`.
pub fn event(name: &str, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(name.len() + data.len() + 16);
    out.put_slice(b"event: ");
    out.put_slice(name.as_bytes());
    out.put_u8(b'\n');
    for line in lines(data) {
        out.put_slice(b"data: ");
        out.put_slice(line);
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
    out.freeze()
}

/// `data` cut into lines where a client cuts it: at CRLF, LF or a lone CR
/// (a lone CR left inside a `data:` line would end it there and start a
/// field of the payload's choosing, e.g. `event:`).
fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.iter().position(|&b| b == b'\n' || b == b'\r') {
            None => {
                rest = None;
                Some(current)
            }
            Some(end) => {
                let skip = if current[end..].starts_with(b"\r\n") { 2 } else { 1 };
                rest = Some(&current[end + skip..]);
                Some(&current[..end])
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_payload_is_one_data_line() {
        assert_eq!(&event("draft", br#"{"a":1}"#)[..], b"event: draft\ndata: {\"a\":1}\n\n");
    }

    #[test]
    fn multi_line_payloads_get_a_data_line_each() {
        assert_eq!(&event("final", b"x\ny\r\nz")[..], b"event: final\ndata: x\ndata: y\ndata: z\n\n");
    }

    #[test]
    fn a_lone_carriage_return_cannot_start_a_field() {
        // Found by the sse fuzz target: a client ends a line at a lone CR.
        assert_eq!(
            &event("draft", b"a\revent: final\r\rdata: x")[..],
            b"event: draft\ndata: a\ndata: event: final\ndata: \ndata: data: x\n\n"
        );
    }

    #[test]
    fn heartbeat_is_a_comment() {
        assert!(HEARTBEAT.starts_with(b":") && HEARTBEAT.ends_with(b"\n\n"));
    }
}
