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
        let id = with_current_request_id(str::to_owned);
        let Some(id) = id else { return self.inner.format_event(ctx, writer, event) };
        // Formatted into a buffer (without colours) so the id can go at
        // the end of the line, inside the JSON object.
        let mut line = String::with_capacity(256);
        self.inner.format_event(ctx, Writer::new(&mut line), event)?;
        let body = line.strip_suffix('\n').unwrap_or(&line);
        writer.write_str(&with_request_id(body, &id, self.json))?;
        writer.write_char('\n')
    }
}

/// `line` (one formatted line without its newline) with `id` added.
fn with_request_id(line: &str, id: &str, json: bool) -> String {
    if !json {
        return format!("{line} request_id={id}");
    }
    match line.strip_suffix('}') {
        Some(head) => {
            let quoted = serde_json::Value::from(id).to_string();
            let sep = if head.ends_with('{') { "" } else { "," };
            format!("{head}{sep}\"request_id\":{quoted}}}")
        }
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_lines_end_with_the_id() {
        assert_eq!(with_request_id("INFO x: hello a=1", "r-1", false), "INFO x: hello a=1 request_id=r-1");
    }

    #[test]
    fn json_lines_get_a_top_level_key() {
        let line = r#"{"level":"WARN","fields":{"message":"m"},"target":"t"}"#;
        let out = with_request_id(line, "we\"ird", true);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["request_id"], "we\"ird");
        assert_eq!(v["fields"]["message"], "m");
        assert_eq!(with_request_id("{}", "a", true), r#"{"request_id":"a"}"#);
    }
}
