//! A route's `record = { ... }`: the traffic sample operators replay a
//! candidate config against (issue: record, replay, calibrate). Off unless
//! a route has the table; what is written and why is in
//! [`crate::record`].
//!
//! ```toml
//! [[routes]]
//! name = "digits"
//! record = { sample = 0.01, path = "traffic/digits.jsonl", max_bytes = "64MiB", files = 4, max_line_bytes = "4MiB" }
//! ```
//!
//! A call whose line would pass `max_line_bytes` is not recorded (it is
//! counted, `oversized`): no line is larger than a file may be, so the
//! files never take more than `max_bytes * files`.

use super::issue::Issues;
use super::schema_default::{some_u64, some_usize};
use super::size::ByteSize;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

/// Default size of one traffic file before it is rotated.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
/// Default number of files kept (the current one and rotated ones).
pub const DEFAULT_FILES: usize = 4;
/// Smallest `max_bytes`: one large record must fit.
pub const MIN_MAX_BYTES: u64 = 4 << 10;
/// Most files a route may keep.
pub const MAX_FILES: usize = 100;
/// Default largest line: 4 MiB, or `max_bytes` when smaller.
pub const DEFAULT_MAX_LINE_BYTES: u64 = 4 << 20;
/// Smallest `max_line_bytes`.
pub const MIN_MAX_LINE_BYTES: u64 = 1 << 10;
/// Largest `max_line_bytes`: a record must fit the writers' queue
/// ([`crate::record::held::QUEUE_BYTES`]) with room for others.
pub const MAX_MAX_LINE_BYTES: u64 = 16 << 20;

/// `record = { ... }` as written.
#[derive(Debug, Deserialize, JsonSchema, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawRecord {
    /// Share of the route's requests recorded, in `(0, 1]`.
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 1))]
    pub sample: f64,
    /// The traffic file (JSON lines); rotated files get `.1`, `.2`, ...
    pub path: String,
    /// Size at which the file is rotated; default 64 MiB.
    #[schemars(default = "some_u64::<DEFAULT_MAX_BYTES>", extend("minimum" = MIN_MAX_BYTES))]
    pub max_bytes: Option<ByteSize>,
    /// Files kept, the current one included; default 4.
    #[schemars(default = "some_usize::<DEFAULT_FILES>", range(min = 1, max = MAX_FILES))]
    pub files: Option<usize>,
    /// Largest line recorded; default 4 MiB (at most `max_bytes`).
    #[schemars(default = "some_u64::<DEFAULT_MAX_LINE_BYTES>", extend("minimum" = MIN_MAX_LINE_BYTES, "maximum" = MAX_MAX_LINE_BYTES))]
    pub max_line_bytes: Option<ByteSize>,
}

/// A route's recording settings, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordConfig {
    /// Share of requests recorded.
    pub sample: f64,
    /// The traffic file.
    pub path: PathBuf,
    /// Rotation size.
    pub max_bytes: u64,
    /// Files kept.
    pub files: usize,
    /// Largest line: a call whose line would be larger is not recorded.
    pub max_line_bytes: u64,
}

/// Checks a route's `record` (`path` is the route's, e.g. `routes[0]`).
pub fn check(raw: Option<&RawRecord>, path: &str, issues: &mut Issues) -> Option<RecordConfig> {
    let raw = raw?;
    if !(raw.sample > 0.0 && raw.sample <= 1.0) {
        issues.push(
            format!("{path}.record.sample"),
            format!("must be above 0 and at most 1, got {}", raw.sample),
        );
    }
    if raw.path.trim().is_empty() {
        issues.push(format!("{path}.record.path"), "must name a file");
    }
    let max_bytes = raw.max_bytes.map_or(DEFAULT_MAX_BYTES, |s| s.0);
    if max_bytes < MIN_MAX_BYTES {
        issues.push(
            format!("{path}.record.max_bytes"),
            format!("must be at least {MIN_MAX_BYTES} bytes, got {max_bytes}"),
        );
    }
    let files = raw.files.unwrap_or(DEFAULT_FILES);
    if !(1..=MAX_FILES).contains(&files) {
        issues
            .push(format!("{path}.record.files"), format!("must be between 1 and {MAX_FILES}, got {files}"));
    }
    // The default follows `max_bytes`; only a written value can be wrong.
    let max_line_bytes = match raw.max_line_bytes {
        None => DEFAULT_MAX_LINE_BYTES.min(max_bytes),
        Some(ByteSize(line)) => {
            if !(MIN_MAX_LINE_BYTES..=MAX_MAX_LINE_BYTES).contains(&line) {
                issues.push(
                    format!("{path}.record.max_line_bytes"),
                    format!(
                        "must be between {MIN_MAX_LINE_BYTES} and {MAX_MAX_LINE_BYTES} bytes, got {line}"
                    ),
                );
            } else if line > max_bytes {
                issues.push(
                    format!("{path}.record.max_line_bytes"),
                    format!("must be at most max_bytes ({max_bytes}), got {line}: a line must fit in a file"),
                );
            }
            line
        }
    };
    Some(RecordConfig {
        sample: raw.sample,
        path: PathBuf::from(&raw.path),
        max_bytes,
        files,
        max_line_bytes,
    })
}

/// `path.N`: the Nth rotated file of a traffic sample (the writer rotates
/// `path` -> `path.1` -> ...; the path checks cover every one).
pub fn rotated(path: &std::path::Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigIssue;

    fn checked(raw: RawRecord) -> Vec<ConfigIssue> {
        let mut issues = Issues::default();
        super::check(Some(&raw), "routes[2]", &mut issues);
        issues.into_vec()
    }

    fn raw(sample: f64, path: &str) -> RawRecord {
        RawRecord { sample, path: path.into(), max_bytes: None, files: None, max_line_bytes: None }
    }

    #[test]
    fn defaults_and_field_paths() {
        let mut issues = Issues::default();
        let cfg = super::check(Some(&raw(0.25, "t.jsonl")), "routes[0]", &mut issues).unwrap();
        assert!(issues.is_empty());
        assert_eq!((cfg.max_bytes, cfg.files), (DEFAULT_MAX_BYTES, DEFAULT_FILES));
        assert_eq!(cfg.max_line_bytes, DEFAULT_MAX_LINE_BYTES);
        assert!(super::check(None, "routes[0]", &mut issues).is_none());
        for bad in [0.0, -0.1, 1.5, f64::NAN] {
            let issues = checked(raw(bad, "t.jsonl"));
            assert_eq!(issues.len(), 1, "{bad}");
            assert_eq!(issues[0].path, "routes[2].record.sample");
        }
        assert_eq!(checked(raw(1.0, " "))[0].path, "routes[2].record.path");
        let small = RawRecord { max_bytes: Some(ByteSize(100)), files: Some(0), ..raw(1.0, "t") };
        let paths: Vec<_> = checked(small).into_iter().map(|i| i.path).collect();
        assert_eq!(paths, ["routes[2].record.max_bytes", "routes[2].record.files"]);
    }

    #[test]
    fn a_line_fits_in_a_file() {
        let mut issues = Issues::default();
        let small = RawRecord { max_bytes: Some(ByteSize(1 << 20)), ..raw(1.0, "t") };
        let cfg = super::check(Some(&small), "routes[0]", &mut issues).unwrap();
        assert_eq!(cfg.max_line_bytes, 1 << 20, "the default follows a smaller max_bytes");
        for (max_bytes, line) in [(1 << 20, 2 << 20), (64 << 20, 32 << 20), (64 << 20, 100)] {
            let raw = RawRecord {
                max_bytes: Some(ByteSize(max_bytes)),
                max_line_bytes: Some(ByteSize(line)),
                ..raw(1.0, "t")
            };
            let issues = checked(raw);
            assert_eq!(issues.len(), 1, "{max_bytes} {line}");
            assert_eq!(issues[0].path, "routes[2].record.max_line_bytes");
        }
    }
}
