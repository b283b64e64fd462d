//! Bad input gets a clear error and loses nothing, whatever the input. One file is
//! mutated at random — bits flipped, bytes cut or inserted, lines dropped or swapped, a
//! JSON value anywhere replaced by one of another type or size — and handed to stateval:
//!
//! - an input of the core project (a dataset, a recording, a tool manifest or the
//!   pipeline) to `stateval validate`, then, when that accepts it, to `stateval run`:
//!   `validate` exits 0 or 2 and `run` 0, 1 or 2, and a refused run leaves no report;
//! - a foreign trace of `fixtures/traces` to `stateval import`: it exits 0 or 2 (a
//!   response or content block that was a string in a stream made it panic).
//!
//! None may panic or die by a signal, and every refusal names the file, line and
//! column it is about.

mod common;

use common::Project;
use proptest::prelude::*;
use serde_json::{Value, json};

/// The files a mutation picks from, relative to the project: what `pipeline/ci.toml` of
/// the core project reads.
fn inputs(p: &Project) -> Vec<String> {
    let mut files = vec!["pipeline/ci.toml".to_string()];
    files.extend(common::CORE_DATASETS.iter().map(|s| s.to_string()));
    for dir in ["fixtures/recordings", "fixtures/tools"] {
        for path in common::files_in(&p.join(dir)) {
            if path.parent() == Some(p.join(dir).as_path()) {
                files.push(path.strip_prefix(p.path()).expect("in the project").to_string_lossy().replace('\\', "/"));
            }
        }
    }
    files
}

/// Values of every JSON type and of awkward sizes and spellings.
fn weird(i: usize) -> Value {
    let values = [
        Value::Null,
        json!(true),
        json!(-1),
        json!(9_007_199_254_740_993_u64),
        json!(1e308),
        json!(-0.0),
        json!(""),
        json!("\u{0}\u{1f}\u{2028}"),
        json!("x".repeat(5000)),
        json!([]),
        json!({}),
        json!([[[[[[[[[[[]]]]]]]]]]]),
        json!({"a": {"b": {"c": null}}}),
        json!("../../../etc/passwd"),
        json!("**/*.jsonl"),
        json!("(["),
        json!("é\u{301}\u{1F600}"),
        json!("tool_use"),
        json!("function"),
        json!("assistant"),
        json!("{\"a\":"),
    ];
    values[i % values.len()].clone()
}

/// Replace the value `picks` leads to (a child chosen at each step while there are
/// children and picks) with `with`.
fn replace_within(value: &mut Value, picks: &[u32], with: Value) {
    let Some((&pick, rest)) = picks.split_first() else {
        *value = with;
        return;
    };
    match value {
        Value::Object(map) if !map.is_empty() => {
            let key = map.keys().nth(pick as usize % map.len()).expect("in range").clone();
            // one pick in four removes the member instead
            if rest.is_empty() && pick % 4 == 0 {
                map.remove(&key);
            } else {
                replace_within(map.get_mut(&key).expect("present"), rest, with);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let at = pick as usize % items.len();
            replace_within(&mut items[at], rest, with);
        }
        _ => *value = with,
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    /// Flip one bit of the byte at (this fraction of) the file.
    Flip(u32, u8),
    /// Cut up to 32 bytes there.
    Cut(u32, u8),
    /// Insert a piece of JSON or TOML syntax there.
    Insert(u32, u8),
    /// Drop a line, or swap two.
    Lines(u32, u32, bool),
    /// Replace a value somewhere in one JSON line (or the whole JSON file).
    Value(u32, Vec<u32>, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<u32>(), any::<u8>()).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        (any::<u32>(), any::<u8>()).prop_map(|(at, n)| Mutation::Cut(at, n)),
        (any::<u32>(), any::<u8>()).prop_map(|(at, what)| Mutation::Insert(at, what)),
        (any::<u32>(), any::<u32>(), any::<bool>()).prop_map(|(i, j, swap)| Mutation::Lines(i, j, swap)),
        (any::<u32>(), prop::collection::vec(any::<u32>(), 0..6), any::<u8>())
            .prop_map(|(line, picks, with)| Mutation::Value(line, picks, with)),
    ]
}

/// `at` as a position within `len` (inclusive when `end`).
fn within(at: u32, len: usize, end: bool) -> usize {
    let n = len + usize::from(end);
    if n == 0 { 0 } else { at as usize % n }
}

fn apply(bytes: &[u8], path: &str, m: &Mutation) -> Vec<u8> {
    let mut out = bytes.to_vec();
    match *m {
        Mutation::Flip(at, bit) if !out.is_empty() => {
            let i = within(at, out.len(), false);
            out[i] ^= 1 << (bit % 8);
        }
        Mutation::Cut(at, n) if !out.is_empty() => {
            let i = within(at, out.len(), false);
            let end = (i + 1 + usize::from(n % 32)).min(out.len());
            out.drain(i..end);
        }
        Mutation::Insert(at, what) => {
            const PIECES: [&[u8]; 14] =
                [b"\"", b"{", b"}", b"[", b"]", b",", b":", b"\\", b"\n", b"\xff", b"\xc3", b"-", b"e9999", b"= ["];
            let i = within(at, out.len(), true);
            out.splice(i..i, PIECES[usize::from(what) % PIECES.len()].iter().copied());
        }
        Mutation::Lines(i, j, swap) => {
            let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
            if lines.len() > 1 {
                let (i, j) = (within(i, lines.len(), false), within(j, lines.len(), false));
                if swap {
                    lines.swap(i, j);
                } else {
                    lines.remove(i);
                }
                out = lines.join(&b'\n');
            }
        }
        Mutation::Value(line, ref picks, with) if !path.ends_with(".toml") => {
            let text = String::from_utf8_lossy(bytes).into_owned();
            if path.ends_with(".jsonl") {
                let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
                let at = within(line, lines.len(), false);
                if let Some(Ok(mut value)) = lines.get(at).map(|l| serde_json::from_str::<Value>(l)) {
                    replace_within(&mut value, picks, weird(usize::from(with)));
                    lines[at] = value.to_string();
                }
                out = (lines.join("\n") + "\n").into_bytes();
            } else if let Ok(mut value) = serde_json::from_str::<Value>(&text) {
                replace_within(&mut value, picks, weird(usize::from(with)));
                out = serde_json::to_vec_pretty(&value).expect("a value serialises");
            }
        }
        _ => {}
    }
    out
}

/// Every `error:` line is `error: FILE:LINE:COLUMN: message`.
fn located(stderr: &str) -> bool {
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    !errors.is_empty()
        && errors.iter().all(|l| {
            let parts: Vec<&str> = l["error: ".len()..].split(':').collect();
            // PATH (which may hold colons itself), then LINE, COLUMN and the message
            (1..parts.len().saturating_sub(2)).any(|j| {
                !parts[..j].concat().is_empty()
                    && number(parts[j])
                    && number(parts[j + 1])
                    && parts[j + 2].starts_with(' ')
            })
        })
}

proptest! {
    // each case copies the project and runs the binary once or twice
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_input_is_refused_with_its_place_or_run_never_a_panic(
        pick in any::<u32>(),
        mutations in prop::collection::vec(mutation(), 1..3),
    ) {
        let p = Project::new();
        let files = inputs(&p);
        let file = &files[pick as usize % files.len()];
        let mut bytes = p.read_bytes(file);
        for m in &mutations {
            bytes = apply(&bytes, file, m);
        }
        p.write(file, &bytes);

        let checked = p.stateval(&["validate", "pipeline/ci.toml"]);
        let said = format!("{file} mutated by {mutations:?}\n--- stderr\n{}", checked.stderr);
        prop_assert!(!checked.stderr.contains("panicked"), "validate panicked: {said}");
        prop_assert!(checked.code == 0 || checked.code == 2, "validate exited {}: {said}", checked.code);
        if checked.code == 2 {
            prop_assert!(located(&checked.stderr), "a refusal without file, line and column: {said}");
            return Ok(());
        }

        let ran = p.stateval(&["run", "pipeline/ci.toml", "--quiet"]);
        let said = format!("{file} mutated by {mutations:?}\n--- stderr\n{}", ran.stderr);
        prop_assert!(!ran.stderr.contains("panicked"), "run panicked: {said}");
        prop_assert!([0, 1, 2].contains(&ran.code), "run exited {}: {said}", ran.code);
        if ran.code == 2 {
            prop_assert!(located(&ran.stderr), "a refusal without file, line and column: {said}");
            prop_assert!(!p.exists("reports/report.json"), "a refused run left a report: {said}");
        }
    }
}

/// The foreign traces an import mutation picks from (JSON and JSONL; the zipped Inspect
/// log is left to its own tests).
fn traces() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/traces");
    common::files_in(&root).into_iter().filter(|p| p.extension().is_some_and(|e| e == "json" || e == "jsonl")).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_trace_is_imported_or_refused_with_its_place_never_a_panic(
        pick in any::<u32>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let traces = traces();
        prop_assert!(traces.len() >= 20, "fixtures/traces has its traces");
        let trace = &traces[pick as usize % traces.len()];
        let name = trace.file_name().expect("a file").to_string_lossy().into_owned();
        let mut bytes = std::fs::read(trace).expect("read the trace");
        for m in &mutations {
            bytes = apply(&bytes, &name, m);
        }
        let p = Project::empty();
        p.write(&name, &bytes);
        let out = p.stateval(&["import", &name, "-o", "out/"]);
        let said = format!("{name} mutated by {mutations:?}\n--- stderr\n{}", out.stderr);
        prop_assert!(!out.stderr.contains("panicked"), "import panicked: {said}");
        prop_assert!(out.code == 0 || out.code == 2, "import exited {}: {said}", out.code);
        if out.code == 2 {
            prop_assert!(located(&out.stderr), "a refusal without file, line and column: {said}");
        }
    }
}

#[test]
fn the_mutations_change_what_they_say_and_the_location_check_can_fail() {
    let line = b"{\"a\":[1,{\"b\":\"c\"}]}\n";
    assert_eq!(apply(line, "x.jsonl", &Mutation::Flip(0, 0)), b"z\"a\":[1,{\"b\":\"c\"}]}\n");
    assert_eq!(apply(line, "x.jsonl", &Mutation::Cut(1, 3)), b"{[1,{\"b\":\"c\"}]}\n");
    assert_eq!(apply(line, "x.jsonl", &Mutation::Insert(0, 0)), b"\"{\"a\":[1,{\"b\":\"c\"}]}\n");
    // picks: member "a", its second item, its member "b" (4 % 1 = 0) replaced by null
    assert_eq!(apply(line, "x.jsonl", &Mutation::Value(0, vec![0, 1, 5], 0)), b"{\"a\":[1,{\"b\":null}]}\n");
    assert_eq!(apply(b"1\n2\n3", "x.toml", &Mutation::Lines(0, 2, true)), b"3\n2\n1");
    assert!(located("error: datasets/a.jsonl:3:14: expected a string\n"));
    assert!(located("error: pipeline/ci.toml:1:1: bad\nerror: fixtures/tools/x.json:2:5: bad\n"));
    assert!(located("error: ../elsewhere/rec:2:1: expected value\n"));
    assert!(!located("error: datasets/a.jsonl: cannot be read\n"));
    assert!(!located("error: a.jsonl:3: no column\n"));
    assert!(!located("error: no case matches the selection\n"));
    assert!(!located("stateval: fine\n"));
}
