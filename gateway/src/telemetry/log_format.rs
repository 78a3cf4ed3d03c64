//! Adds the request id to every log line written while serving a request
//! (including its access-log line), read from the request's scope
//! ([`super::request`]) when the line is formatted.
//!
//! No per-request span is needed for this, so a request pays nothing for
//! it unless it actually logs. Text lines end with ` request_id=...`; JSON
//! lines get a top-level `"request_id"` key. Lines outside any request
//! (start-up, runtime worker threads) are written unchanged.

use super::request::with_current_request_id;
use std::fmt;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Wraps an event formatter (`Format<Full>` or `Format<Json>`) and appends
/// the current request's id.
pub struct RequestIdFormat<F> {
    inner: F,
    json: bool,
}

impl<F> RequestIdFormat<F> {
    /// Wraps a text formatter.
    pub fn text(inner: F) -> RequestIdFormat<F> {
        RequestIdFormat { inner, json: false }
    }

    /// Wraps a JSON formatter (one object per line).
    pub fn json(inner: F) -> RequestIdFormat<F> {
        RequestIdFormat { inner, json: true }
    }
}

impl<S, N, F> FormatEvent<S, N> for RequestIdFormat<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let in_request = with_current_request_id(|id| {
            // Formatted into a buffer (without colours) so the id can go
            // at the end of the line, inside the JSON object.
            LINE.with(|buf| match buf.try_borrow_mut() {
                Ok(mut line) => {
                    line.clear();
                    self.inner.format_event(ctx, Writer::new(&mut *line), event)?;
                    write_with_request_id(&mut writer, &line, id, self.json)
                }
                Err(_) => {
                    let mut line = String::new();
                    self.inner.format_event(ctx, Writer::new(&mut line), event)?;
                    write_with_request_id(&mut writer, &line, id, self.json)
                }
            })
        });
        match in_request {
            Some(result) => result,
            None => self.inner.format_event(ctx, writer, event),
        }
    }
}

thread_local! {
    /// The line being formatted, reused by each log call on this thread.
    static LINE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Writes `line` (one formatted line, newline-terminated) with `id`
/// added: at the end of a text line, as the last key of a JSON object.
fn write_with_request_id(out: &mut impl fmt::Write, line: &str, id: &str, json: bool) -> fmt::Result {
    let body = line.strip_suffix('\n').unwrap_or(line);
    if !json {
        out.write_str(body)?;
        out.write_str(" request_id=")?;
        out.write_str(id)?;
        return out.write_char('\n');
    }
    let Some(head) = body.strip_suffix('}') else {
        out.write_str(body)?;
        return out.write_char('\n');
    };
    out.write_str(head)?;
    out.write_str(if head.ends_with('{') { "\"request_id\":\"" } else { ",\"request_id\":\"" })?;
    // Ids are printable ASCII (see `request`): only `"` and `\` need escaping.
    for c in id.chars() {
        if c == '"' || c == '\\' {
            out.write_char('\\')?;
        }
        out.write_char(c)?;
    }
    out.write_str("\"}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_id(line: &str, id: &str, json: bool) -> String {
        let mut out = String::new();
        write_with_request_id(&mut out, line, id, json).unwrap();
        out
    }

    #[test]
    fn text_lines_end_with_the_id() {
        assert_eq!(with_id("INFO x: hello a=1\n", "r-1", false), "INFO x: hello a=1 request_id=r-1\n");
    }

    #[test]
    fn json_lines_get_a_top_level_key() {
        let line = "{\"level\":\"WARN\",\"fields\":{\"message\":\"m\"},\"target\":\"t\"}\n";
        let out = with_id(line, "we\"ird\\", true);
        assert!(out.ends_with("}\n"));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["request_id"], "we\"ird\\");
        assert_eq!(v["fields"]["message"], "m");
        assert_eq!(with_id("{}\n", "a", true), "{\"request_id\":\"a\"}\n");
    }
}
