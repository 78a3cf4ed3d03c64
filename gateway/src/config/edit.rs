//! Edits of a route's tunables written into the config file's own text:
//! the cascade `policy.threshold`, the default `budget_ms` and the cache
//! `ttl_s`. The console ([`crate::admin::config_edit`]) uses it so that the
//! file stays the source of truth: the edit keeps every comment, key order
//! and layout of the operator's file (`toml_edit`) and changes only the
//! values asked for, adding the key where the route has none.
//!
//! Only the TOML is edited here; whether the result is a valid config is
//! decided by [`super::parse`], as for any file.

use super::ConfigIssue;
use serde::Deserialize;
use toml_edit::{value, DocumentMut, InlineTable, Item, TableLike, Value};

/// The values to change on one route; `None` leaves a value as it is.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteEdit {
    /// The route's name.
    pub route: String,
    /// The cascade policy's confidence threshold (cascade routes only).
    pub threshold: Option<f64>,
    /// The default latency budget in milliseconds (`budget_ms.default`).
    pub budget_ms: Option<u64>,
    /// The route's L1 cache time to live in seconds (`cache.ttl_s`).
    pub ttl_s: Option<u64>,
}

impl RouteEdit {
    /// True when the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        self.threshold.is_none() && self.budget_ms.is_none() && self.ttl_s.is_none()
    }
}

/// `text` with `edit` applied, or the problem with the path of the field
/// it concerns (unknown route, threshold on a route without a cascade,
/// a file that is not TOML).
pub fn edit_route(text: &str, edit: &RouteEdit) -> Result<String, ConfigIssue> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| ConfigIssue::new("(syntax)", format!("the config file is not TOML: {e}")))?;
    let (index, route) = find_route(&mut doc, &edit.route)?;
    let at = |field: &str| format!("routes[{index}].{field}");
    if let Some(threshold) = edit.threshold {
        let policy = route
            .get_mut("policy")
            .and_then(Item::as_table_like_mut)
            .filter(|p| p.get("type").and_then(Item::as_str) == Some("cascade"))
            .ok_or_else(|| {
                ConfigIssue::new(
                    at("policy"),
                    format!("route {:?} has no cascade policy: it has no threshold", edit.route),
                )
            })?;
        set(policy, "threshold", value(threshold), &at("policy.threshold"))?;
    }
    if let Some(ms) = edit.budget_ms {
        let ms = to_i64(ms, &at("budget_ms"))?;
        match route.get_mut("budget_ms") {
            Some(item) if item.is_integer() => *item = value(ms),
            Some(item) => {
                let budget = item
                    .as_table_like_mut()
                    .ok_or_else(|| ConfigIssue::new(at("budget_ms"), "is neither a number nor a table"))?;
                set(budget, "default", value(ms), &at("budget_ms.default"))?;
            }
            None => insert_inline(route, "budget_ms", "default", ms, &at("budget_ms"))?,
        }
    }
    if let Some(ttl) = edit.ttl_s {
        let ttl = to_i64(ttl, &at("cache.ttl_s"))?;
        match route.get_mut("cache").and_then(Item::as_table_like_mut) {
            Some(cache) => set(cache, "ttl_s", value(ttl), &at("cache.ttl_s"))?,
            None => insert_inline(route, "cache", "ttl_s", ttl, &at("cache"))?,
        }
    }
    Ok(doc.to_string())
}

/// The route named `name` with its index in `routes`, whether the file
/// writes routes as `[[routes]]` tables or as an inline array.
fn find_route<'d>(
    doc: &'d mut DocumentMut,
    name: &str,
) -> Result<(usize, &'d mut dyn TableLike), ConfigIssue> {
    let named = |t: &dyn TableLike| t.get("name").and_then(Item::as_str) == Some(name);
    let missing = || ConfigIssue::new("routes", format!("no route is named {name:?}"));
    let routes = doc.get_mut("routes").ok_or_else(missing)?;
    if routes.is_array_of_tables() {
        let tables = routes.as_array_of_tables_mut().ok_or_else(missing)?;
        let (i, table) = tables.iter_mut().enumerate().find(|(_, t)| named(*t)).ok_or_else(missing)?;
        return Ok((i, table));
    }
    let array = routes.as_array_mut().ok_or_else(missing)?;
    let (i, table) = array
        .iter_mut()
        .filter_map(Value::as_inline_table_mut)
        .enumerate()
        .find(|(_, t)| named(*t))
        .ok_or_else(missing)?;
    Ok((i, table))
}

/// Sets `key` in a table or inline table, keeping the key's decoration.
fn set(table: &mut dyn TableLike, key: &str, new: Item, path: &str) -> Result<(), ConfigIssue> {
    if let Some(old) = table.get_mut(key) {
        let decor = old.as_value().map(|v| v.decor().clone());
        *old = new;
        if let (Some(decor), Some(v)) = (decor, old.as_value_mut()) {
            *v.decor_mut() = decor;
        }
        return Ok(());
    }
    table.insert(key, new);
    if table.contains_key(key) {
        Ok(())
    } else {
        Err(ConfigIssue::new(path, "could not be written into the file"))
    }
}

/// Adds `key = { field = number }` to the route.
fn insert_inline(
    route: &mut dyn TableLike,
    key: &str,
    field: &str,
    number: i64,
    path: &str,
) -> Result<(), ConfigIssue> {
    let mut inline = InlineTable::new();
    inline.insert(field, number.into());
    set(route, key, value(inline), path)
}

fn to_i64(n: u64, path: &str) -> Result<i64, ConfigIssue> {
    i64::try_from(n).map_err(|_| ConfigIssue::new(path, format!("{n} is too large")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"# tuned by hand
[[routes]]
name = "plain"
models = ["a"]

[[routes]]
name = "digits"   # the cascade
models = ["cheap", "heavy"]
budget_ms = { default = 50, max = 1000 }
policy = { type = "cascade", confidence_output = "probabilities", threshold = 0.8 }  # keep
cache = { ttl_s = 300 }
"#;

    fn edit(route: &str) -> RouteEdit {
        RouteEdit { route: route.into(), ..RouteEdit::default() }
    }

    #[test]
    fn changes_only_the_values_asked_for_and_keeps_comments() {
        let e = RouteEdit { threshold: Some(0.7), budget_ms: Some(80), ttl_s: Some(60), ..edit("digits") };
        let out = edit_route(FILE, &e).unwrap();
        assert!(out.contains("threshold = 0.7 }  # keep"), "{out}");
        assert!(out.contains("budget_ms = { default = 80, max = 1000 }"), "{out}");
        assert!(out.contains("cache = { ttl_s = 60 }"), "{out}");
        assert!(out.starts_with("# tuned by hand\n"));
        assert!(out.contains("name = \"digits\"   # the cascade"));
        let changed: Vec<_> = FILE.lines().zip(out.lines()).filter(|(a, b)| a != b).collect();
        assert_eq!(changed.len(), 3, "{changed:?}");
    }

    #[test]
    fn adds_budget_and_cache_where_the_route_has_none() {
        let e = RouteEdit { budget_ms: Some(20), ttl_s: Some(5), ..edit("plain") };
        let out = edit_route(FILE, &e).unwrap();
        let doc: toml::Value = toml::from_str(&out).unwrap();
        let plain = &doc["routes"][0];
        assert_eq!(plain["budget_ms"]["default"].as_integer(), Some(20));
        assert_eq!(plain["cache"]["ttl_s"].as_integer(), Some(5));
    }

    #[test]
    fn edits_sub_tables_and_inline_route_arrays() {
        let tables = "[[routes]]\nname = \"r\"\nmodels = [\"a\", \"b\"]\n[routes.policy]\ntype = \"cascade\"\nthreshold = 0.9\n";
        let out = edit_route(tables, &RouteEdit { threshold: Some(0.5), ..edit("r") }).unwrap();
        assert!(out.contains("threshold = 0.5\n"), "{out}");
        let inline = "routes = [{ name = \"r\", models = [\"a\"], budget_ms = 40 }]\n";
        let out = edit_route(inline, &RouteEdit { budget_ms: Some(70), ..edit("r") }).unwrap();
        assert!(out.contains("budget_ms = 70"), "{out}");
    }

    #[test]
    fn problems_name_the_field() {
        let e = edit_route(FILE, &RouteEdit { threshold: Some(0.5), ..edit("plain") }).unwrap_err();
        assert_eq!(e.path, "routes[0].policy");
        let e = edit_route(FILE, &RouteEdit { ttl_s: Some(1), ..edit("nope") }).unwrap_err();
        assert_eq!(e.path, "routes");
        assert!(e.message.contains("\"nope\""));
        let e = edit_route("routes = [", &edit("r")).unwrap_err();
        assert_eq!(e.path, "(syntax)");
    }
}
