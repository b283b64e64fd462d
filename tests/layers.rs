//! The library's top-level modules sit in four layers (docs/design.md §2) and import
//! only downward: a module may use its own layer's modules, without a circle, or any
//! layer below. This test reads every `src/**/*.rs`, collects the edges between
//! top-level modules from `use crate::…` lines and `crate::module::` paths in code
//! (comments and string literals are skipped), and checks them against [`LAYERS`]:
//! an edge up a layer fails, and so does a circle between modules of one layer, or
//! an edge [`FORBIDDEN`] names (the agent seam's neighbours). It also holds the
//! runner's files to [`ROOM_LINES`].
//!
//! `cli` is the binary's module, not the library's: it imports the library as
//! `stateval::…`, sits above every layer, and nothing in the library can reach it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// The layers, lowest first. docs/design.md §2 shows the same table.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "base",
        &[
            "atomic",
            "canon",
            "child_env",
            "containment",
            "diag",
            "interrupt",
            "isolation",
            "par",
            "schemas",
            "secrets",
            "text",
        ],
    ),
    ("data", &["dataset", "event", "evidence", "outcome", "pipeline"]),
    (
        "stages",
        &[
            "sandbox", "replay", "agent", "runtime", "external", "extract", "grade", "metrics", "golden", "gate",
            "import",
        ],
    ),
    ("drivers", &["runner", "report", "store", "synth"]),
];

/// Imports forbidden inside one layer, though no circle would show them: the agent
/// seam (`agent`: the `Agent` trait, the recorder, the tool boundary) stands beside
/// the built-in runtime, not inside it. Your own agent's module (`external`) reaches
/// the seam without the reference agent (`runtime`), neither of the two knows the
/// other, and the seam knows neither.
const FORBIDDEN: &[(&str, &str)] =
    &[("external", "runtime"), ("runtime", "external"), ("agent", "runtime"), ("agent", "external")];

/// One import of `to` by a file of `from`, where it stands.
#[derive(Debug, Clone)]
struct Site {
    file: String,
    line: usize,
}

type Graph = BTreeMap<(String, String), Vec<Site>>;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The library's top-level modules, as `lib.rs` declares them.
fn modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).expect("src/lib.rs");
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ").or_else(|| l.trim().strip_prefix("mod ")))
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text with comments, string and char literals blanked to spaces (newlines kept,
/// so line numbers hold). Lifetimes are left alone.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && !b[..i].last().is_some_and(|p| p.is_alphanumeric() || *p == '_')
            && raw_string_start(&b, i + usize::from(c == 'b') + 1).is_some()
        {
            // r"…", r#"…"#, br"…": ends at a quote followed by as many hashes.
            let start = i + usize::from(c == 'b') + 1;
            let hashes = raw_string_start(&b, start).unwrap_or(0);
            let body = start + hashes + 1;
            out.extend(b[i..body].iter().map(|&c| blank(c)));
            i = body;
            while i < b.len() {
                if b[i] == '"' && (1..=hashes).all(|h| b.get(i + h) == Some(&'#')) {
                    out.extend(std::iter::repeat_n(' ', hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(blank(b[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                let step = if b[i] == '\\' { 2 } else { 1 };
                for k in 0..step {
                    if let Some(&c) = b.get(i + k) {
                        out.push(blank(c));
                    }
                }
                i += step;
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || b.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\u{1F600}'); `'a` alone is a lifetime.
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '\'' {
                let step = if b[i] == '\\' { 2 } else { 1 };
                out.extend(std::iter::repeat_n(' ', step));
                i += step;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// At `i`: `#…#"` opens a raw string; how many hashes.
fn raw_string_start(b: &[char], i: usize) -> Option<usize> {
    let hashes = b[i.min(b.len())..].iter().take_while(|&&c| c == '#').count();
    (b.get(i + hashes) == Some(&'"')).then_some(hashes)
}

fn ident_at(b: &[char], i: usize) -> String {
    b[i.min(b.len())..].iter().take_while(|c| c.is_alphanumeric() || **c == '_').collect()
}

fn skip_space(b: &[char], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// The top-level names a `crate::` path at `i` (just after the `::`) reaches: one
/// name, or every first name of a `{…}` group, each with the offset it stands at.
fn reached(b: &[char], i: usize) -> Vec<(String, usize)> {
    let i = skip_space(b, i);
    if b.get(i) != Some(&'{') {
        return vec![(ident_at(b, i), i)];
    }
    let mut names = Vec::new();
    let (mut depth, mut j, mut expect_name) = (0usize, i, true);
    while j < b.len() {
        match b[j] {
            '{' => {
                depth += 1;
                expect_name = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => expect_name = true,
            c if expect_name && depth == 1 && (c.is_alphabetic() || c == '_') => {
                names.push((ident_at(b, j), j));
                expect_name = false;
            }
            _ => {}
        }
        j += 1;
    }
    names
}

/// Every edge from one file of module `from` to another top-level module, and every
/// `super::` chain that climbs to the crate root (which would hide an edge).
fn scan(from: &str, file: &str, depth: usize, text: &str, modules: &BTreeSet<String>) -> (Graph, Vec<String>) {
    let code: Vec<char> = code_only(text).chars().collect();
    let line_of = |at: usize| 1 + code[..at].iter().filter(|&&c| c == '\n').count();
    let mut graph = Graph::new();
    let mut climbs = Vec::new();
    let word_start = |at: usize| at == 0 || !(code[at - 1].is_alphanumeric() || code[at - 1] == '_');
    // Inline modules (`mod tests { … }`) open at these brace depths; each one adds a
    // level `super::` climbs out of.
    let (mut braces, mut inline) = (0usize, Vec::new());
    let mut i = 0;
    while i < code.len() {
        if code[i] == '{' {
            braces += 1;
            i += 1;
        } else if code[i] == '}' {
            if inline.last() == Some(&braces) {
                inline.pop();
            }
            braces = braces.saturating_sub(1);
            i += 1;
        } else if word_start(i) && code[i..].starts_with(&['m', 'o', 'd', ' ']) {
            let name_at = skip_space(&code, i + 4);
            let after = skip_space(&code, name_at + ident_at(&code, name_at).len());
            if code.get(after) == Some(&'{') {
                inline.push(braces + 1);
            }
            i += 4;
        } else if word_start(i) && code[i..].starts_with(&['c', 'r', 'a', 't', 'e', ':', ':']) {
            for (name, at) in reached(&code, i + 7) {
                if name != from && modules.contains(&name) {
                    let site = Site { file: file.to_string(), line: line_of(at) };
                    graph.entry((from.to_string(), name)).or_default().push(site);
                }
            }
            i += 7;
        } else if word_start(i) && code[i..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
            let mut supers = 0;
            while code[i..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
                supers += 1;
                i += 7;
            }
            if supers >= depth + inline.len() {
                climbs.push(format!("{file}:{}: `super::` reaches the crate root; write `crate::`", line_of(i)));
            }
        } else {
            i += 1;
        }
    }
    (graph, climbs)
}

/// The edges between the library's top-level modules, with every place each is made.
fn graph() -> Graph {
    let modules = modules();
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph = Graph::new();
    let mut climbs = Vec::new();
    for path in files {
        let rel = path.strip_prefix(&src).unwrap();
        let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        let top = parts[0].trim_end_matches(".rs").to_string();
        if !modules.contains(&top) {
            continue; // lib.rs, main.rs and the binary's cli/
        }
        // src/x.rs and src/x/mod.rs are module x (depth 1); src/x/y.rs is x::y.
        let depth = parts.len() - usize::from(parts.last().is_some_and(|p| p == "mod.rs"));
        let text = std::fs::read_to_string(&path).unwrap();
        let shown = format!("src/{}", parts.join("/"));
        let (edges, found) = scan(&top, &shown, depth, &text, &modules);
        climbs.extend(found);
        for (edge, sites) in edges {
            graph.entry(edge).or_default().extend(sites);
        }
    }
    assert!(climbs.is_empty(), "paths the layer check cannot follow:\n{}", climbs.join("\n"));
    graph
}

fn layer_of(module: &str) -> Option<(usize, &'static str)> {
    LAYERS.iter().enumerate().find(|(_, (_, ms))| ms.contains(&module)).map(|(i, (name, _))| (i, *name))
}

fn describe(graph: &Graph, from: &str, to: &str) -> String {
    let sites = &graph[&(from.to_string(), to.to_string())];
    let more = if sites.len() > 1 { format!(", +{} more", sites.len() - 1) } else { String::new() };
    format!("{from} → {to} ({}:{}{more})", sites[0].file, sites[0].line)
}

/// A path `from` ⇝ `to` over the edges, as the modules it visits.
fn path(edges: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> Option<Vec<String>> {
    let mut came: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = VecDeque::from([from.to_string()]);
    while let Some(at) = queue.pop_front() {
        if at == to {
            let mut route = vec![to.to_string()];
            while let Some(prev) = came.get(route.last().unwrap()) {
                route.push(prev.clone());
                if prev == from {
                    break;
                }
            }
            route.reverse();
            return Some(route);
        }
        for next in edges.get(&at).into_iter().flatten() {
            if !came.contains_key(next) && next != from {
                came.insert(next.clone(), at.clone());
                queue.push_back(next.clone());
            }
        }
    }
    None
}

/// The graph as adjacency: the modules each module imports.
fn adjacency(graph: &Graph) -> BTreeMap<String, BTreeSet<String>> {
    let mut next: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in graph.keys() {
        next.entry(from.clone()).or_default().insert(to.clone());
    }
    next
}

#[test]
fn every_top_level_module_sits_in_exactly_one_layer() {
    let modules = modules();
    assert!(modules.len() > 10, "lib.rs declares too few modules to be read right: {modules:?}");
    let mut problems = Vec::new();
    for m in &modules {
        let count = LAYERS.iter().filter(|(_, ms)| ms.contains(&m.as_str())).count();
        if count != 1 {
            problems.push(format!("`{m}` is in {count} layers of LAYERS; give it exactly one"));
        }
    }
    for (_, ms) in LAYERS {
        for m in *ms {
            if !modules.contains(*m) {
                problems.push(format!("LAYERS names `{m}`, which src/lib.rs does not declare"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let graph = graph();
    let mut up = Vec::new();
    for (from, to) in graph.keys() {
        let (Some((lf, nf)), Some((lt, nt))) = (layer_of(from), layer_of(to)) else { continue };
        if lt > lf {
            up.push(format!("{} imports up, from {nf} to {nt}", describe(&graph, from, to)));
        }
    }
    assert!(up.is_empty(), "imports against the layers of docs/design.md §2:\n{}", up.join("\n"));
}

#[test]
fn no_circle_between_top_level_modules() {
    let graph = graph();
    let edges = adjacency(&graph);
    let mut circles = BTreeSet::new();
    for (from, tos) in &edges {
        for to in tos {
            if let Some(route) = path(&edges, to, from) {
                // Start each circle at its smallest module so one circle is named once.
                let mut ring: Vec<String> =
                    std::iter::once(from.clone()).chain(route[..route.len() - 1].iter().cloned()).collect();
                let start = ring.iter().enumerate().min_by_key(|(_, m)| m.as_str()).map(|(i, _)| i).unwrap();
                ring.rotate_left(start);
                circles.insert(ring);
            }
        }
    }
    let shown: Vec<String> = circles
        .iter()
        .map(|ring| {
            let steps: Vec<String> =
                (0..ring.len()).map(|i| describe(&graph, &ring[i], &ring[(i + 1) % ring.len()])).collect();
            format!("circle {} → {}:\n  {}", ring.join(" → "), ring[0], steps.join("\n  "))
        })
        .collect();
    assert!(shown.is_empty(), "top-level modules that import each other:\n{}", shown.join("\n"));
}

#[test]
fn the_scanner_sees_grouped_uses_and_paths_but_not_comments_or_strings() {
    let modules: BTreeSet<String> = ["canon", "event", "grade", "report", "store"].map(String::from).into();
    let text = r##"
use crate::{
    canon::digest,
    event::{Event, Kind},
};
// use crate::report::Old;
/* crate::store::x */
fn f<'a>(s: &'a str) -> char {
    let _ = "crate::store::y";
    let _ = r#"crate::store::"z""#;
    let q = '"';
    crate::grade::check(s);
    q
}
"##;
    let (graph, climbs) = scan("runner", "src/runner/mod.rs", 1, text, &modules);
    let found: Vec<(String, usize)> = graph.iter().map(|((_, to), s)| (to.clone(), s[0].line)).collect();
    assert_eq!(found, [("canon".to_string(), 3), ("event".to_string(), 4), ("grade".to_string(), 12)]);
    assert!(climbs.is_empty());
    let (_, climbs) = scan("runner", "src/runner/mod.rs", 1, "use super::store::Store;", &modules);
    assert_eq!(climbs.len(), 1, "super:: from src/runner/mod.rs reaches the root");
    let inline = "mod tests {\n    use super::*;\n}\nfn f() { super::x(); }";
    let (_, climbs) = scan("runner", "src/runner/mod.rs", 1, inline, &modules);
    assert_eq!(climbs, ["src/runner/mod.rs:4: `super::` reaches the crate root; write `crate::`"]);
}

#[test]
fn the_diagram_in_docs_design_shows_the_same_layers() {
    let doc = std::fs::read_to_string(repo().join("docs/design.md")).expect("docs/design.md");
    for (layer, modules) in LAYERS {
        let row = doc
            .lines()
            .find(|l| l.split_whitespace().next() == Some(layer) && l.contains(" · "))
            .unwrap_or_else(|| panic!("docs/design.md has no diagram row for the {layer} layer"));
        let shown: BTreeSet<&str> = row.split_whitespace().skip(1).filter(|w| *w != "·").collect();
        let mut expected: BTreeSet<&str> = modules.iter().copied().collect();
        if *layer == "drivers" {
            expected.insert("cli");
        }
        assert_eq!(shown, expected, "docs/design.md's {layer} row and LAYERS in tests/layers.rs differ");
    }
}

#[test]
fn the_agent_seam_stands_beside_the_runtime_not_inside_it() {
    let graph = graph();
    let found: Vec<String> = FORBIDDEN
        .iter()
        .filter(|(from, to)| graph.contains_key(&(from.to_string(), to.to_string())))
        .map(|(from, to)| describe(&graph, from, to))
        .collect();
    assert!(found.is_empty(), "imports the agent seam forbids (docs/design.md §5a):\n{}", found.join("\n"));
}

/// The runner stays in rooms (docs/design.md §2): plan, execute, case, conclude and the
/// parts beside them, none over [`ROOM_LINES`] lines, so no one file holds several of
/// its ideas again. Its test module (`runner/tests.rs`) is not a room.
const ROOM_LINES: usize = 600;

#[test]
fn no_room_of_the_runner_is_over_600_lines() {
    let mut files = Vec::new();
    rust_files(&repo().join("src/runner"), &mut files);
    assert!(files.len() >= 4, "src/runner has its rooms: {files:?}");
    let over: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).expect("read a room").lines().count();
            (lines > ROOM_LINES).then(|| format!("{}: {lines} lines", f.display()))
        })
        .collect();
    assert!(over.is_empty(), "runner rooms over {ROOM_LINES} lines (split the file by idea):\n{}", over.join("\n"));
}
