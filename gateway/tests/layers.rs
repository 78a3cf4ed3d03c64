//! The workspace's layers, checked from its own source. Every member of
//! the workspace is in [`MEMBERS`]: a crate with a layers table in its
//! `ARCHITECTURE.md` (`gateway`, `gateway/protocol`, `runtime`,
//! `runtime/store`, `router-policies`), or a leaf consumer that nothing uses (`benchmarks`,
//! `fuzz`). In a tabled crate,
//! every module of `src` belongs to one layer of the table, a module may use
//! only modules of its own or lower layers, and no two modules (nor two
//! files inside one module) use each other in a circle. Between crates, a
//! crate names (in any dependencies section of its `Cargo.toml`) only
//! crates of a lower rank. A new import that runs up, or closes a circle,
//! fails this test with the files and the names that tie them.
//!
//! What counts as a use: `use` declarations and paths written in code
//! (`crate::cache::key::CacheKey`, `super::run::Routing`, and
//! `crate::ModelSpec` through the crate root's `pub use`), not comments or
//! doc links, and not test code (`tests*.rs` and `*_tests.rs` files, files
//! under a `tests` folder, a crate's shared `test_util.rs`, `#[cfg(test)]`
//! items).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// How this test covers a member of the workspace.
enum Cover {
    /// Its modules are checked against the layers table of this file
    /// (relative to the workspace root).
    Layers(&'static str),
    /// A leaf consumer: it uses the crates below it and nothing uses it,
    /// so it has no layers of its own to keep.
    LeafConsumer,
}

/// Every member of the workspace (folder), its rank among the crates (a
/// crate may depend only on crates of a lower rank) and how its modules
/// are checked. A member missing here fails
/// [`every_workspace_member_is_covered_and_depends_only_on_lower_crates`].
const MEMBERS: &[(&str, u32, Cover)] = &[
    ("router-policies", 1, Cover::Layers("router-policies/ARCHITECTURE.md")),
    ("runtime", 1, Cover::Layers("runtime/ARCHITECTURE.md")),
    ("runtime/store", 2, Cover::Layers("runtime/store/ARCHITECTURE.md")),
    ("gateway/protocol", 2, Cover::Layers("gateway/protocol/ARCHITECTURE.md")),
    ("gateway", 3, Cover::Layers("gateway/ARCHITECTURE.md")),
    ("benchmarks", 4, Cover::LeafConsumer),
    ("fuzz", 4, Cover::LeafConsumer),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One source file: its module path under the crate (`["cache", "key"]`),
/// and its code with comments, strings and test items removed.
struct Source {
    module: Vec<String>,
    rel: String,
    code: String,
}

impl Source {
    /// The file at `rel` (relative to the crate's `src`, `/`-separated)
    /// with contents `text`; `None` for test files and the crate root.
    fn new(rel: &str, text: &str) -> Option<Source> {
        let mut module: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
        let is_test = |m: &String| m.starts_with("tests") || m.ends_with("_tests") || m == "test_util";
        if module.iter().any(is_test) || rel == "main.rs" || rel == "lib.rs" {
            return None;
        }
        if module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        Some(Source {
            module,
            rel: rel.to_string(),
            code: without_test_items(&strip_comments_and_strings(text)),
        })
    }
}

/// A crate's source files, and what its library root (`lib.rs`)
/// re-exports: item name -> the module it comes from.
struct CrateSource {
    sources: Vec<Source>,
    reexports: BTreeMap<String, Vec<String>>,
}

fn read_crate(src: &Path) -> CrateSource {
    let mut files = Vec::new();
    collect(src, &mut files);
    let mut sources = Vec::new();
    let mut reexports = BTreeMap::new();
    for path in files {
        let Ok(rel) = path.strip_prefix(src) else { continue };
        let rel = rel.to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if rel == "lib.rs" {
            let code = without_test_items(&strip_comments_and_strings(&text));
            for path in named_paths(&code) {
                let Some((name, module)) = path.split_last() else { continue };
                if !module.is_empty() && !["crate", "self", "super"].contains(&module[0].as_str()) {
                    reexports.insert(name.clone(), module.to_vec());
                }
            }
        }
        sources.extend(Source::new(&rel, &text));
    }
    CrateSource { sources, reexports }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
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

/// The file a path names: the longest module prefix that is a file. A
/// path through the crate root's re-export (`crate::ModelSpec`) names the
/// module the item comes from.
fn resolve(
    from: &[String],
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
    reexports: &BTreeMap<String, Vec<String>>,
) -> Option<Vec<String>> {
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
    if let Some(origin) = absolute.first().and_then(|first| reexports.get(first)) {
        if !modules.contains(&absolute[..1].to_vec()) {
            absolute.splice(..0, origin.iter().cloned());
        }
    }
    (1..=absolute.len()).rev().map(|n| absolute[..n].to_vec()).find(|m| modules.contains(m))
}

/// The layers table of an ARCHITECTURE.md: module name -> layer number.
/// A table row is `| <layer number> | <modules in backticks> | ... |`.
fn layers_table(doc: &str) -> Result<BTreeMap<String, u32>, String> {
    let mut map = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(layer) = cells.get(1).and_then(|c| c.split_whitespace().next()?.parse::<u32>().ok()) else {
            continue;
        };
        let Some(modules) = cells.get(2) else { continue };
        for name in modules.split('`').skip(1).step_by(2) {
            if map.insert(name.to_string(), layer).is_some() {
                return Err(format!("module `{name}` is in two layers"));
            }
        }
    }
    if map.is_empty() {
        return Err("no layers table".into());
    }
    Ok(map)
}

/// file -> file edges, with the names that tie them.
type Edges = BTreeMap<(Vec<String>, Vec<String>), BTreeSet<String>>;

fn edges(krate: &CrateSource) -> Edges {
    let modules: BTreeSet<Vec<String>> = krate.sources.iter().map(|s| s.module.clone()).collect();
    let mut edges = Edges::new();
    for s in &krate.sources {
        for path in named_paths(&s.code) {
            let Some(target) = resolve(&s.module, &path, &modules, &krate.reexports) else { continue };
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

/// Modules in no layer, and uses of a higher layer.
fn layer_problems(krate: &CrateSource, layers: &BTreeMap<String, u32>) -> Vec<String> {
    let mut problems = Vec::new();
    for s in &krate.sources {
        if !layers.contains_key(&s.module[0]) {
            problems.push(format!("module `{}` ({}) is in no layer of ARCHITECTURE.md", s.module[0], s.rel));
        }
    }
    for ((from, to), names) in edges(krate) {
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
    problems
}

/// Circles between top-level modules, and between files of one module.
fn circle_problems(krate: &CrateSource) -> Vec<String> {
    let edges = edges(krate);
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
        let members: Vec<Vec<String>> = krate
            .sources
            .iter()
            .filter(|s| circle.contains(&s.module[0]))
            .map(|s| s.module.clone())
            .collect();
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
    problems
}

/// Checks the member in folder `member` against its layers table.
fn assert_layered(member: &str) {
    let Some((_, _, Cover::Layers(doc))) = MEMBERS.iter().find(|(m, ..)| *m == member) else {
        panic!("{member} has no layers table in MEMBERS");
    };
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let layers = layers_table(&text).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let krate = read_crate(&root.join(member).join("src"));
    assert!(!krate.sources.is_empty(), "{member}/src has no modules");
    let (layering, circles) = (layer_problems(&krate, &layers), circle_problems(&krate));
    assert!(
        layering.is_empty() && circles.is_empty(),
        "{member}: layering violations:\n  {}\n{member}: import circles:\n  {}",
        layering.join("\n  "),
        circles.join("\n  ")
    );
}

#[test]
fn the_gateway_keeps_its_layers_without_circles() {
    assert_layered("gateway");
}

#[test]
fn the_runtime_keeps_its_layers_without_circles() {
    assert_layered("runtime");
}

#[test]
fn the_store_keeps_its_layers_without_circles() {
    assert_layered("runtime/store");
}

#[test]
fn router_policies_keep_their_layers_without_circles() {
    assert_layered("router-policies");
}

#[test]
fn the_protocol_keeps_its_layers_without_circles() {
    assert_layered("gateway/protocol");
}

/// The values of `key = [ "a", "b" ]` in a TOML text (one array of plain
/// strings, on one line or several).
fn string_array(toml: &str, key: &str) -> Vec<String> {
    let Some(at) = toml.lines().position(|l| l.trim_start().starts_with(key)) else { return Vec::new() };
    let text: String = toml.lines().skip(at).collect::<Vec<_>>().join("\n");
    let (Some(open), Some(close)) = (text.find('['), text.find(']')) else { return Vec::new() };
    text[open + 1..close]
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A `Cargo.toml`'s package name and the names of everything it depends
/// on (normal, dev and build dependencies, any target).
fn package_and_dependencies(toml: &str) -> (String, BTreeSet<String>) {
    let (mut name, mut deps, mut section) = (String::new(), BTreeSet::new(), String::new());
    for line in toml.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.to_string();
            // `[dependencies.foo]`
            if let Some((_, dep)) = header.split_once("dependencies.") {
                deps.insert(dep.to_string());
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = key.trim();
        if section == "package" && key == "name" {
            name = value.trim().trim_matches('"').to_string();
        } else if section.ends_with("dependencies") {
            deps.insert(key.split('.').next().unwrap_or(key).trim().to_string());
        }
    }
    (name, deps)
}

#[test]
fn every_workspace_member_is_covered_and_depends_only_on_lower_crates() {
    let root = workspace_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = string_array(&manifest, "members");
    assert!(!members.is_empty(), "no workspace members found in Cargo.toml");
    let mut problems = Vec::new();
    let mut by_package = BTreeMap::new();
    for member in &members {
        let Some((_, rank, _)) = MEMBERS.iter().find(|(m, ..)| m == member) else {
            problems.push(format!("workspace member `{member}` is not in this test's MEMBERS"));
            continue;
        };
        let toml = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        let (package, deps) = package_and_dependencies(&toml);
        by_package.insert(package, (member.clone(), *rank, deps));
    }
    for (package, (member, rank, deps)) in &by_package {
        for dep in deps {
            let Some((dep_member, dep_rank, _)) = by_package.get(dep) else { continue };
            if dep_rank >= rank {
                problems.push(format!(
                    "{member} (`{package}`, rank {rank}) depends on {dep_member} (`{dep}`, rank {dep_rank}), \
                     not a lower crate"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "workspace crates:\n  {}", problems.join("\n  "));
}

#[test]
fn the_manifest_reader_finds_members_and_dependencies() {
    let root = "[workspace]\nmembers = [\n  \"a\",\n  \"b\" ]\nresolver = \"2\"";
    assert_eq!(string_array(root, "members"), ["a", "b"]);
    let member = "[package]\nname = \"a\"\nversion.workspace = true\n[dependencies]\nserde = \"1\"\n\
                  [dev-dependencies]\nb = { path = \"../b\" }\n[target.'cfg(unix)'.build-dependencies]\n\
                  c.workspace = true\n[dependencies.d]\nversion = \"1\"";
    let (name, deps) = package_and_dependencies(member);
    assert_eq!(name, "a");
    assert_eq!(deps.into_iter().collect::<Vec<_>>(), ["b", "c", "d", "serde"]);
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
    let no_reexports = BTreeMap::new();
    assert_eq!(
        resolve(&from, &path, &modules, &no_reexports),
        Some(vec!["cache".to_string(), "key".to_string()])
    );
    let reexports = BTreeMap::from([("CacheKey".to_string(), vec!["cache".to_string()])]);
    let path: Vec<String> = ["crate", "CacheKey"].iter().map(|s| s.to_string()).collect();
    assert_eq!(resolve(&from, &path, &modules, &reexports), Some(vec!["cache".to_string()]));
    let tested = without_test_items("fn a() {}\n#[cfg(test)]\nmod tests { use crate::x; }\nfn b() {}");
    assert!(!tested.contains("crate::x") && tested.contains("fn b"));
    assert!(Source::new("text/tests.rs", "").is_none() && Source::new("tests/fixtures.rs", "").is_none());
    assert!(Source::new("store/cache_tests.rs", "").is_none() && Source::new("lib.rs", "").is_none());
    assert!(Source::new("v2/tests/decode.rs", "").is_none());
    assert!(Source::new("cache/key/tests.rs", "").is_none());
    assert!(Source::new("test_util.rs", "").is_none() && Source::new("test_utility.rs", "").is_some());
}

/// A crate made of `(file, code)` pairs, whose root re-exports `Leaf`
/// from `leaf`.
fn synthetic(files: &[(&str, &str)]) -> CrateSource {
    let sources = files.iter().filter_map(|(rel, code)| Source::new(rel, code)).collect();
    CrateSource { sources, reexports: BTreeMap::from([("Leaf".to_string(), vec!["leaf".to_string()])]) }
}

#[test]
fn the_checks_name_an_upward_import_and_a_circle() {
    let layers =
        layers_table("| layer | modules |\n|---|---|\n| 1 | `leaf` |\n| 2 | `top`, `side` |").unwrap();
    let clean = synthetic(&[
        ("leaf.rs", "pub struct Leaf;"),
        ("top.rs", "use crate::leaf::Leaf; use crate::side::Side;"),
        ("side.rs", "pub struct Side(crate::Leaf);"),
    ]);
    assert_eq!(layer_problems(&clean, &layers), Vec::<String>::new());
    assert_eq!(circle_problems(&clean), Vec::<String>::new());

    // The leaf reaches up, through the crate root's re-export: both an
    // upward import and a circle.
    let upward = synthetic(&[
        ("leaf.rs", "pub struct Leaf; fn f() { crate::top::run() }"),
        ("top.rs", "use crate::Leaf; pub fn run() {}"),
    ]);
    let problems = layer_problems(&upward, &layers);
    assert_eq!(problems, ["leaf (layer 1) uses top (layer 2), a higher layer: {\"run\"}"]);
    let circles = circle_problems(&upward);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].starts_with("modules in a circle: leaf, top"), "{circles:?}");

    // Two files of one module that use each other, and a module in no layer.
    let inside = synthetic(&[
        ("top/mod.rs", "mod a; mod b;"),
        ("top/a.rs", "use super::b::B; pub struct A;"),
        ("top/b.rs", "use super::a::A; pub struct B;"),
        ("stray.rs", ""),
    ]);
    let circles = circle_problems(&inside);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].starts_with("files of `top` in a circle: top::a, top::b"), "{circles:?}");
    assert_eq!(
        layer_problems(&inside, &layers),
        ["module `stray` (stray.rs) is in no layer of ARCHITECTURE.md"]
    );
    assert!(layers_table("| 1 | `a` |\n| 2 | `a` |").is_err(), "a module in two layers");
    assert!(layers_table("no table").is_err());
}
