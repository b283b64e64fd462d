//! Typed events against every event log the repository ships (`goldens/`): each event's
//! data is held as the bytes its line has, its typed payload reads every member the
//! way a JSON tree reads it, and no kind carries a member its payload does not declare.
//! A payload that forgot a member, read one with the wrong type, or a reader that
//! changed a byte of the data fails here on real logs, not only on hand-made ones.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use stateval::event::payload::{self, Json};
use stateval::event::reader::read_log;
use stateval::event::writer::LogWriter;

fn logs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            logs(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

fn shipped_logs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    logs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("goldens"), &mut out);
    out.sort();
    assert!(out.len() >= 100, "expected the shipped goldens, found {}", out.len());
    out
}

/// What the tree gives for `name`, and the same through the typed member.
fn agree(tree: &Value, name: &str, member: Json<'_>) -> Result<(), String> {
    let expected = tree.get(name).cloned().unwrap_or(Value::Null);
    let checks = [
        ("value", format!("{}", member.value()), format!("{expected}")),
        ("as_str", format!("{:?}", member.as_str().as_deref()), format!("{:?}", expected.as_str())),
        ("as_u64", format!("{:?}", member.as_u64()), format!("{:?}", expected.as_u64())),
        ("as_i64", format!("{:?}", member.as_i64()), format!("{:?}", expected.as_i64())),
        ("as_f64", format!("{:?}", member.as_f64()), format!("{:?}", expected.as_f64())),
        ("as_bool", format!("{:?}", member.as_bool()), format!("{:?}", expected.as_bool())),
        ("is_null", format!("{}", member.is_null()), format!("{}", expected.is_null())),
    ];
    for (what, typed, tree) in checks {
        if typed != tree {
            return Err(format!("{name}.{what}: typed {typed}, tree {tree}"));
        }
    }
    Ok(())
}

#[test]
fn every_shipped_log_reads_typed_as_it_reads_as_trees_and_keeps_its_bytes() {
    let mut undeclared = BTreeMap::new();
    let (mut events, mut members) = (0usize, 0usize);
    for path in shipped_logs() {
        let bytes = std::fs::read(&path).expect("read");
        let log = read_log(&path).unwrap_or_else(|e| panic!("{e}"));
        // the data is the line's own bytes: re-chaining it writes the file again
        let mut writer = LogWriter::new(Vec::new());
        for e in &log.events {
            writer.append_data(e.turn, e.t, e.kind, e.data.clone());
        }
        let (written, head) = writer.finish().expect("in memory");
        assert!(written == bytes, "{}: re-chained from its data, the log is not its own bytes", path.display());
        assert_eq!(head, log.head);

        for e in &log.events {
            events += 1;
            let tree = e.data.tree();
            let declared = payload::members(e);
            for (name, member) in &declared {
                members += 1;
                agree(&tree, name, *member)
                    .unwrap_or_else(|m| panic!("{} seq {} ({}): {m}", path.display(), e.seq, e.kind));
            }
        }
        for (kind, keys) in common::undeclared_members(&path) {
            undeclared.entry(kind).or_insert_with(BTreeSet::new).extend(keys);
        }
    }
    assert!(undeclared.is_empty(), "members no payload declares: {undeclared:?}");
    assert!(events > 5_000 && members > 30_000, "{events} events, {members} members read");
}

/// `stateval schema event` is the format the logs are written in: every line of every
/// shipped log is valid against it, members per kind included. A line changed by hand
/// to carry a member its kind does not declare is refused, so the check is a real one.
#[test]
fn every_shipped_log_line_is_valid_against_the_published_event_schema() {
    let schema = &*stateval::schemas::EVENT_SCHEMA;
    let mut lines = 0usize;
    for path in shipped_logs() {
        let text = std::fs::read_to_string(&path).expect("read");
        for (n, line) in text.lines().enumerate() {
            let value: Value = serde_json::from_str(line).expect("a log line is JSON");
            if let Some(v) = schema.check(&value) {
                panic!("{}:{}: {v:?}", path.display(), n + 1);
            }
            lines += 1;
        }
    }
    assert!(lines > 5_000, "{lines} lines checked");
    let planted: Value = serde_json::json!({
        "seq": 0, "turn": 0, "t": 0, "kind": "turn_completed", "data": {"turn": 0, "response": "hi", "answer": "x"},
        "prev": null, "hash": format!("blake3:{}", "0".repeat(64)),
    });
    assert!(schema.check(&planted).is_some(), "a member turn_completed does not declare is refused");
    let mut declared = planted.clone();
    declared["data"].as_object_mut().unwrap().remove("answer");
    assert!(schema.check(&declared).is_none(), "the same line without it is valid");
}
