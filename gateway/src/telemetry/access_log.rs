//! The access log: one line per request (`target: switchyard::access`),
//! written by hand into the log buffer ([`super::log_sink`]) when it can
//! be, through `tracing` otherwise.
//!
//! Why by hand: the line is written for every request, and `tracing`'s
//! formatter builds it through `fmt::Debug` visitors, a fresh timestamp
//! conversion and a second buffer for the request id, about a tenth of a
//! small inference request's CPU time (issue 42). The hand-written line
//! is byte for byte what `tracing`'s formatter writes (text or JSON; the
//! tests compare them), so nothing reading the logs can tell.
//!
//! The hand path is taken when the line is enabled by `RUST_LOG`, the
//! logs are neither coloured (a terminal) nor traced (with trace export
//! on, a request's line carries its span and trace id: `tracing` writes
//! those). Otherwise the same fields go through `tracing::info!`.

use super::log_sink::LogSink;
use super::request::with_current_request_id;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// One request's access-log fields.
pub struct AccessLine<'a> {
    /// The request's method.
    pub method: &'a str,
    /// Its path.
    pub path: &'a str,
    /// The status answered (or logged, 499 for a client gone).
    pub status: u16,
    /// The error label, empty for a success.
    pub error: &'a str,
    /// Body bytes read (HTTP; gRPC lines have none).
    pub request_bytes: Option<usize>,
    /// From the head's arrival to the end of the answer.
    pub duration_us: u64,
    /// The trace id of a traced request.
    pub trace_id: Option<opentelemetry::trace::TraceId>,
}

/// How the hand path writes: the buffer and the line format.
struct HandWriter {
    sink: LogSink,
    json: bool,
}

static HAND: OnceLock<HandWriter> = OnceLock::new();

/// Lets the access log write its lines by hand into `sink` (called once,
/// by [`super::logging::init`], when the logs are plain and untraced).
pub fn write_by_hand_into(sink: LogSink, json: bool) {
    let _ = HAND.set(HandWriter { sink, json });
}

/// Writes the access-log line of a request; call it inside the request's
/// scope (`RequestObs::in_scope`), so the line carries its request id.
pub fn log(line: &AccessLine<'_>) {
    if !tracing::enabled!(target: "switchyard::access", tracing::Level::INFO) {
        return;
    }
    match HAND.get() {
        Some(hand) if line.trace_id.is_none() && !super::enabled() => LINE.with(|buf| {
            // Nothing logs while a line is formatted, so the buffer is free.
            let mut out = buf.take();
            out.clear();
            format_line(&mut out, line, SystemTime::now(), hand.json);
            hand.sink.append(out.as_bytes());
            buf.replace(out);
        }),
        _ => through_tracing(line),
    }
}

thread_local! {
    /// The line being formatted, reused by each request on this thread.
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The same line as a `tracing` event (its formatter adds the request id).
fn through_tracing(line: &AccessLine<'_>) {
    let trace_id = line.trace_id.map(tracing::field::display);
    match line.request_bytes {
        Some(request_bytes) => tracing::info!(
            target: "switchyard::access",
            method = %line.method,
            path = %line.path,
            status = line.status,
            error = line.error,
            request_bytes,
            duration_us = line.duration_us,
            trace_id,
        ),
        None => tracing::info!(
            target: "switchyard::access",
            method = %line.method,
            path = %line.path,
            status = line.status,
            error = line.error,
            duration_us = line.duration_us,
            trace_id,
        ),
    }
}

/// Formats `line` at time `now` as `tracing`'s text or JSON formatter
/// would, with the current request id.
fn format_line(out: &mut String, line: &AccessLine<'_>, now: SystemTime, json: bool) {
    let request_id = |out: &mut String| {
        with_current_request_id(|id| {
            out.push_str(if json { ",\"request_id\":\"" } else { " request_id=" });
            if json {
                push_json_escaped(out, id);
                out.push('"');
            } else {
                out.push_str(id);
            }
        })
    };
    if json {
        out.push_str("{\"timestamp\":\"");
        push_timestamp(out, now);
        out.push_str("\",\"level\":\"INFO\",\"fields\":{\"method\":\"");
        push_json_escaped(out, line.method);
        out.push_str("\",\"path\":\"");
        push_json_escaped(out, line.path);
        let _ = write!(out, "\",\"status\":{},\"error\":\"", line.status);
        push_json_escaped(out, line.error);
        out.push('"');
        if let Some(bytes) = line.request_bytes {
            let _ = write!(out, ",\"request_bytes\":{bytes}");
        }
        let _ = write!(out, ",\"duration_us\":{}}},\"target\":\"switchyard::access\"", line.duration_us);
        request_id(out);
        out.push_str("}\n");
    } else {
        push_timestamp(out, now);
        let _ = write!(
            out,
            "  INFO switchyard::access: method={} path={} status={} error=",
            line.method, line.path, line.status
        );
        let _ = write!(out, "{:?}", line.error);
        if let Some(bytes) = line.request_bytes {
            let _ = write!(out, " request_bytes={bytes}");
        }
        let _ = write!(out, " duration_us={}", line.duration_us);
        request_id(out);
        out.push('\n');
    }
}

/// `2026-11-27T22:11:52.488475Z`, UTC, microseconds: the default timer's
/// format. The date and time up to the second are formatted once per
/// second per thread.
fn push_timestamp(out: &mut String, now: SystemTime) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    SECOND.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.0 != secs || cached.1.is_empty() {
            cached.1.clear();
            push_utc_second(&mut cached.1, secs);
            cached.0 = secs;
        }
        out.push_str(&cached.1);
    });
    let _ = write!(out, ".{:06}Z", since.subsec_micros());
}

thread_local! {
    /// The last second formatted on this thread, and its text.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((0, String::new())) };
}

/// `YYYY-MM-DDTHH:MM:SS` of the Unix time `secs` (UTC).
fn push_utc_second(out: &mut String, secs: u64) {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let in_day = secs % 86_400;
    let (year, month, day) = civil_date(days);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        in_day / 3600,
        in_day / 60 % 60,
        in_day % 60
    );
}

/// The proleptic Gregorian date of `days` since 1970-01-01: counted in
/// 400-year eras of 146,097 days, years starting in March so the leap day
/// falls at a year's end.
fn civil_date(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468; // days from 0000-03-01
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, u32::try_from(month).unwrap_or(1), u32::try_from(day).unwrap_or(1))
}

/// `text` inside a JSON string, escaped as `serde_json` escapes it.
fn push_json_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::log_format::RequestIdFormat;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    /// A `MakeWriter` into a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    /// The line `tracing`'s formatter writes for `line`, as the gateway
    /// configures it (see `logging`), in a request scope with id `id`.
    fn by_tracing(line: &AccessLine<'_>, json: bool, id: &str) -> String {
        let out = Captured::default();
        let mut headers = http::HeaderMap::new();
        headers.insert("x-request-id", http::HeaderValue::from_str(id).unwrap());
        let obs = super::super::RequestObs::start(&http::Method::POST, line.path, &headers);
        let layer = tracing_subscriber::fmt::layer().with_writer(out.clone()).with_ansi(false);
        if json {
            let subscriber =
                tracing_subscriber::registry().with(layer.json().map_event_format(RequestIdFormat::json));
            tracing::subscriber::with_default(subscriber, || obs.in_scope(|| through_tracing(line)));
        } else {
            let subscriber =
                tracing_subscriber::registry().with(layer.map_event_format(RequestIdFormat::text));
            tracing::subscriber::with_default(subscriber, || obs.in_scope(|| through_tracing(line)));
        }
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text
    }

    /// The hand-written line for `line` at `now` with request id `id`.
    fn by_hand(line: &AccessLine<'_>, json: bool, id: &str, now: SystemTime) -> String {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-request-id", http::HeaderValue::from_str(id).unwrap());
        let obs = super::super::RequestObs::start(&http::Method::POST, line.path, &headers);
        let mut out = String::new();
        obs.in_scope(|| format_line(&mut out, line, now, json));
        out
    }

    /// Splits a line's timestamp from the rest (text: the first word; JSON:
    /// the `timestamp` value).
    fn without_timestamp(line: &str, json: bool) -> (String, String) {
        if json {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let stamp = value["timestamp"].as_str().unwrap().to_string();
            (stamp.clone(), line.replacen(&stamp, "", 1))
        } else {
            let (stamp, rest) = line.split_once(' ').unwrap();
            (stamp.to_string(), rest.to_string())
        }
    }

    fn sample<'a>(path: &'a str, error: &'a str, request_bytes: Option<usize>) -> AccessLine<'a> {
        AccessLine {
            method: "POST",
            path,
            status: 429,
            error,
            request_bytes,
            duration_us: 1234,
            trace_id: None,
        }
    }

    #[test]
    fn hand_lines_equal_tracings_lines_but_for_the_clock() {
        let lines = [
            sample("/v2/models/digits-cheap/infer", "", Some(341)),
            sample("/v2/models/m/infer", "too_many_requests", Some(0)),
            sample("/inference.GRPCInferenceService/ModelInfer", "invalid_argument", None),
            sample("/odd/\"quoted\"\\path", "", Some(7)),
        ];
        for json in [false, true] {
            for line in &lines {
                let traced = by_tracing(line, json, "req-1\"x");
                let hand = by_hand(line, json, "req-1\"x", SystemTime::now());
                let (traced_stamp, traced_rest) = without_timestamp(&traced, json);
                let (hand_stamp, hand_rest) = without_timestamp(&hand, json);
                assert_eq!(hand_rest, traced_rest, "json={json}");
                assert_eq!(hand_stamp.len(), traced_stamp.len(), "{hand_stamp} vs {traced_stamp}");
                assert!(hand.ends_with('\n'));
            }
        }
    }

    #[test]
    fn timestamps_are_tracings_format() {
        let cases = [
            (0, 0, "1970-01-01T00:00:00.000000Z"),
            (951_782_400, 5_000, "2000-02-29T00:00:00.000005Z"),
            (1_709_251_199, 42_000, "2024-02-29T23:59:59.000042Z"),
            (1_764_201_600 + 86_399, 999_999_999, "2025-11-27T23:59:59.999999Z"),
            (4_107_542_400, 0, "2100-03-01T00:00:00.000000Z"),
        ];
        for (secs, nanos, expected) in cases {
            let mut out = String::new();
            push_timestamp(&mut out, UNIX_EPOCH + std::time::Duration::new(secs, nanos));
            assert_eq!(out, expected);
        }
    }

    #[test]
    fn json_escapes_match_serde_json() {
        let text = "a\"b\\c\nd\u{1}e\u{7f}é\t";
        let mut out = String::new();
        push_json_escaped(&mut out, text);
        assert_eq!(format!("\"{out}\""), serde_json::to_string(text).unwrap());
    }
}
