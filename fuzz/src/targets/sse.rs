//! The SSE event framing of draft-then-final streams
//! (`switchyard::sse_event`), checked against a reader written
//! from the WHATWG rules: whatever bytes the payload holds, a client reads
//! back one event with the same name and the payload's lines.
//!
//! Input layout: the first byte picks the event name; the rest is the
//! payload.

use switchyard::sse_event as event;

const NAMES: [&str; 4] = ["draft", "final", "error", "message"];

/// Frames `data` and reads it back as a browser would.
pub fn run(data: &[u8]) {
    let Some((&pick, payload)) = data.split_first() else { return };
    let name = NAMES[usize::from(pick) % NAMES.len()];
    let framed = event(name, payload);
    let events = read_events(&framed);
    assert_eq!(events.len(), 1, "one event framed, {} read: {framed:?}", events.len());
    let (read_name, read_data) = &events[0];
    assert_eq!(read_name, name, "event name changed: {framed:?}");
    assert_eq!(read_data, &lines(payload).join(&b'\n'), "payload changed: {framed:?}");
}

/// The payload's lines as an SSE client splits them: at CRLF, LF or CR.
fn lines(payload: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut i = 0;
    while i < payload.len() {
        match payload[i] {
            b'\r' => {
                if payload.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                out.push(Vec::new());
            }
            b'\n' => out.push(Vec::new()),
            b => out.last_mut().map_or((), |l| l.push(b)),
        }
        i += 1;
    }
    out
}

/// The events of a stream, per the WHATWG event-stream interpretation:
/// `(event type, data)` for every blank-line-terminated block with data.
fn read_events(stream: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut events = Vec::new();
    let (mut name, mut data, mut has_data) = (String::new(), Vec::<u8>::new(), false);
    for line in lines(stream) {
        if line.is_empty() {
            if has_data {
                events.push((if name.is_empty() { "message".into() } else { name.clone() }, data.clone()));
            }
            (name, data, has_data) = (String::new(), Vec::new(), false);
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        match field {
            b"event" => name = String::from_utf8_lossy(value).into_owned(),
            b"data" => {
                if has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                has_data = true;
            }
            _ => {}
        }
    }
    events
}
