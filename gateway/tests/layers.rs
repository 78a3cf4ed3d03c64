//! The gateway's layers, checked from its own source: every module of
//! `gateway/src` belongs to one layer of the table in
//! `gateway/ARCHITECTURE.md`, a module may use only modules of its own or
//! lower layers, and no two modules (nor two files inside one module) use
//! each other in a circle. A new import that runs up, or closes a circle,
//! fails this test with the files and the names that tie them.
//!
//! What counts as a use: `use` declarations and paths written in code
//! (`crate::cache::key::CacheKey`, `super::run::Routing`), not comments or
//! doc links, and not test code (`tests*.rs` files, `#[cfg(test)]` items).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file: its module path under the crate (`["cache", "key"]`),
/// and its code with comments, strings and test items removed.
struct Source {
    module: Vec<String>,
    rel: String,
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn read_sources() -> Vec<Source> {
    let mut files = Vec::new();
    collect(&src_dir(), &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(src_dir()).ok()?.to_string_lossy().replace('\\', "/");
            let name = path.file_stem()?.to_string_lossy().to_string();
            if name.starts_with("tests") || name.ends_with("_tests") || rel == "main.rs" || rel == "lib.rs" {
                return None;
            }
            let mut module: Vec<String> =
                rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).ok()?;
            Some(Source { module, rel, code: without_test_items(&strip_comments_and_strings(&text)) })
        })
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code with comments, string and char literals blanked out.
fn strip_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && is_char_literal(&chars, i) {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `'a'`, `'\n'`, `'\''` are char literals; `'a` (a lifetime) is not.
fn is_char_literal(chars: &[char], i: usize) -> bool {
    match chars.get(i + 1) {
        Some('\\') => true,
        Some(_) => chars.get(i + 2) == Some(&'\''),
        None => false,
    }
}

/// The code without items marked `#[cfg(test)]` (a `mod tests { ... }`,
/// a `mod tests_x;` declaration, a test-only `use` or function).
fn without_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        rest = skip_item(after);
    }
    out.push_str(rest);
    out
}

/// Skips one item: up to its `;` or its balanced `{ ... }`, whichever
/// comes first.
fn skip_item(code: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in code.char_indices() {
        match c {
            ';' if depth == 0 => return &code[i + 1..],
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &code[i + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}

/// Every path the code names that starts with `crate`, `super` or `self`,
/// as written (use trees expanded), e.g. `crate::cache::key::CacheKey`.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if starts_word(code, i, "use") {
            let end = code[i..].find(';').map_or(code.len(), |e| i + e);
            expand_use_tree(code[i + 3..end].trim(), &mut Vec::new(), &mut paths);
            i = end + 1;
            continue;
        }
        for root in ["crate", "super", "self"] {
            if starts_word(code, i, root) && code[i + root.len()..].starts_with("::") {
                let path = read_path(&code[i..]);
                i += path.iter().map(|s| s.len() + 2).sum::<usize>();
                paths.push(path);
                break;
            }
        }
        i += 1;
    }
    paths
}

fn starts_word(code: &str, i: usize, word: &str) -> bool {
    let before_ok =
        i == 0 || !code.as_bytes()[i - 1].is_ascii_alphanumeric() && code.as_bytes()[i - 1] != b'_';
    let after = code.as_bytes().get(i + word.len());
    before_ok
        && code[i..].starts_with(word)
        && after.is_none_or(|b| {
            !b.is_ascii_alphanumeric() && *b != b'_' && (word != "use" || b.is_ascii_whitespace())
        })
}

/// `a::b::c` at the start of `text`, as segments.
fn read_path(text: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        let len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if len == 0 {
            break;
        }
        segments.push(rest[..len].to_string());
        rest = &rest[len..];
        match rest.strip_prefix("::") {
            Some(r) if r.starts_with(|c: char| c.is_alphanumeric() || c == '_') => rest = r,
            _ => break,
        }
    }
    segments
}

/// Expands `a::{b, c::{d, e}}` into full paths.
fn expand_use_tree(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim().trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head: Vec<String> =
            tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
        let close = tree.rfind('}').unwrap_or(tree.len());
        let inner = &tree[open + 1..close];
        let depth_before = prefix.len();
        prefix.extend(head);
        for part in split_top_level(inner) {
            expand_use_tree(part, prefix, out);
        }
        prefix.truncate(depth_before);
    } else {
        let path = tree.split(" as ").next().unwrap_or("").trim();
        if path.is_empty() {
            return;
        }
        let mut full = prefix.clone();
        full.extend(path.split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string));
        if full.last().is_some_and(|s| s == "self") {
            full.pop();
        }
        out.push(full);
    }
}

fn split_top_level(inner: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The file a path names: the longest module prefix that is a file.
fn resolve(from: &[String], path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let mut absolute: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") | Some("self") => from.to_vec(),
        _ => return None,
    };
    let mut segments = path.iter().peekable();
    if path.first().is_some_and(|s| s == "crate") {
        segments.next();
    }
    while let Some(s) = segments.peek() {
        match s.as_str() {
            "super" => {
                absolute.pop();
                segments.next();
            }
            "self" => {
                segments.next();
            }
            _ => break,
        }
    }
    absolute.extend(segments.cloned());
    (1..=absolute.len()).rev().map(|n| absolute[..n].to_vec()).find(|m| modules.contains(m))
}

/// The layers table of ARCHITECTURE.md: module name -> layer number.
fn layers() -> BTreeMap<String, u32> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
        .expect("gateway/ARCHITECTURE.md with the layers table");
    let mut map = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(layer) = cells.get(1).and_then(|c| c.split_whitespace().next()?.parse::<u32>().ok()) else {
            continue;
        };
        let Some(modules) = cells.get(2) else { continue };
        for name in modules.split('`').skip(1).step_by(2) {
            assert!(map.insert(name.to_string(), layer).is_none(), "module `{name}` is in two layers");
        }
    }
    assert!(!map.is_empty(), "ARCHITECTURE.md has no layers table");
    map
}

/// file -> file edges, with the names that tie them.
type Edges = BTreeMap<(Vec<String>, Vec<String>), BTreeSet<String>>;

fn edges(sources: &[Source]) -> Edges {
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let mut edges = Edges::new();
    for s in sources {
        for path in named_paths(&s.code) {
            let Some(target) = resolve(&s.module, &path, &modules) else { continue };
            if target != s.module {
                let name = path.last().cloned().unwrap_or_default();
                edges.entry((s.module.clone(), target)).or_default().insert(name);
            }
        }
    }
    edges
}

fn show(module: &[String]) -> String {
    module.join("::")
}

/// Every circle in `graph`: its strongly connected components of more
/// than one node (Tarjan's algorithm).
fn circles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct Walk<'g, N> {
        graph: &'g BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        on_stack: BTreeSet<N>,
        found: Vec<Vec<N>>,
    }
    impl<N: Ord + Clone> Walk<'_, N> {
        fn visit(&mut self, n: &N) {
            let i = self.index.len();
            self.index.insert(n.clone(), i);
            self.low.insert(n.clone(), i);
            self.stack.push(n.clone());
            self.on_stack.insert(n.clone());
            for m in self.graph.get(n).into_iter().flatten() {
                if !self.index.contains_key(m) {
                    self.visit(m);
                    let low = self.low[n].min(self.low[m]);
                    self.low.insert(n.clone(), low);
                } else if self.on_stack.contains(m) {
                    let low = self.low[n].min(self.index[m]);
                    self.low.insert(n.clone(), low);
                }
            }
            if self.low[n] == self.index[n] {
                let mut component = Vec::new();
                while let Some(m) = self.stack.pop() {
                    self.on_stack.remove(&m);
                    let done = &m == n;
                    component.push(m);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for n in graph.keys() {
        if !walk.index.contains_key(n) {
            walk.visit(n);
        }
    }
    walk.found
}

/// The edges inside `members`, with the names that tie them; only those
/// between modules when `across` is set.
fn ties(members: &[Vec<String>], edges: &Edges, across: bool) -> String {
    let inside = |m: &Vec<String>| members.contains(m);
    edges
        .iter()
        .filter(|((a, b), _)| inside(a) && inside(b) && (!across || a[0] != b[0]))
        .map(|((a, b), names)| format!("{} -> {}: {names:?}", show(a), show(b)))
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn every_module_has_a_layer_and_uses_only_its_own_or_lower_layers() {
    let sources = read_sources();
    let layers = layers();
    let mut problems = Vec::new();
    for s in &sources {
        if !layers.contains_key(&s.module[0]) {
            problems.push(format!("module `{}` ({}) is in no layer of ARCHITECTURE.md", s.module[0], s.rel));
        }
    }
    for ((from, to), names) in edges(&sources) {
        let (Some(a), Some(b)) = (layers.get(&from[0]), layers.get(&to[0])) else { continue };
        if b > a {
            problems.push(format!(
                "{} (layer {a}) uses {} (layer {b}), a higher layer: {:?}",
                show(&from),
                show(&to),
                names
            ));
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "layering violations:\n  {}", problems.join("\n  "));
}

#[test]
fn no_circles_between_modules_or_between_files_of_a_module() {
    let sources = read_sources();
    let edges = edges(&sources);
    let mut between_modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut inside: BTreeMap<String, BTreeMap<Vec<String>, BTreeSet<Vec<String>>>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        if from[0] != to[0] {
            between_modules.entry(from[0].clone()).or_default().insert(to[0].clone());
        } else {
            inside.entry(from[0].clone()).or_default().entry(from.clone()).or_default().insert(to.clone());
        }
    }
    let mut problems = Vec::new();
    for circle in circles(&between_modules) {
        let members: Vec<Vec<String>> =
            sources.iter().filter(|s| circle.contains(&s.module[0])).map(|s| s.module.clone()).collect();
        problems.push(format!(
            "modules in a circle: {} ({})",
            circle.join(", "),
            ties(&members, &edges, true)
        ));
    }
    for (module, graph) in &inside {
        for circle in circles(graph) {
            let files: Vec<String> = circle.iter().map(|m| show(m)).collect();
            problems.push(format!(
                "files of `{module}` in a circle: {} ({})",
                files.join(", "),
                ties(&circle, &edges, false)
            ));
        }
    }
    assert!(problems.is_empty(), "import circles:\n  {}", problems.join("\n  "));
}

#[test]
fn the_scanner_reads_use_trees_and_paths_but_not_comments() {
    let code = strip_comments_and_strings(
        "use crate::{a::b, c::{d, e as f}};\n// use crate::z;\nlet s = \"crate::y\";\nfn g() { crate::h::i(); super::j::K }",
    );
    let paths: Vec<String> = named_paths(&code).iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["crate::a::b", "crate::c::d", "crate::c::e", "crate::h::i", "super::j::K"]);
    let modules: BTreeSet<Vec<String>> =
        [vec!["cache".to_string()], vec!["cache".to_string(), "key".to_string()]].into_iter().collect();
    let from = vec!["cache".to_string(), "l1".to_string()];
    let path: Vec<String> = ["super", "key", "CacheKey"].iter().map(|s| s.to_string()).collect();
    assert_eq!(resolve(&from, &path, &modules), Some(vec!["cache".to_string(), "key".to_string()]));
    let tested = without_test_items("fn a() {}\n#[cfg(test)]\nmod tests { use crate::x; }\nfn b() {}");
    assert!(!tested.contains("crate::x") && tested.contains("fn b"));
}
