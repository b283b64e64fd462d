//! A stateful fixture sandbox end to end: the records case of
//! `datasets/long_horizon/records.jsonl` reads back what it wrote, each read's logged
//! result is what the log's own fold (`stateval show --at-turn`) holds at that turn, a
//! read of a deleted record answers the manifest's declared error, `stateval schema
//! tools` documents the forms, and `validate` refuses a state read that cannot resolve,
//! naming the file, the line and the tool.

mod common;

use common::{Project, events_of, parse_located_error};
use serde_json::{Value, json};

const MANIFEST: &str = "fixtures/tools/records.json";

/// The log of the records case's first run, as the JSON report names it.
fn records_log(p: &Project) -> String {
    let report = p.json("reports/report.json");
    let case = report["cases"].as_array().expect("cases").iter().find(|c| c["id"] == "long-horizon-records-61");
    case.expect("the records case ran")["runs"][0]["log"].as_str().expect("log").to_string()
}

/// The sandbox state `stateval show LOG --at-turn N` prints.
fn state_at(p: &Project, log: &str, turn: u64) -> Value {
    let out = p.stateval(&["show", log, "--at-turn", &turn.to_string()]).expect_code(0).stdout.clone();
    let block: Vec<&str> =
        out.lines().skip_while(|l| *l != "sandbox:").skip(1).take_while(|l| l.starts_with("  ")).collect();
    serde_json::from_str(&block.join("\n")).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn every_read_answers_what_the_folded_state_holds_at_its_turn_and_a_deleted_record_is_an_error() {
    let p = Project::full();
    p.stateval(&["run", "--tag", "stateful"]).expect_code(0);
    let log = records_log(&p);
    let events = events_of(&p.read_bytes(&log));
    let reads: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "tool_executed")
        .filter(|e| matches!(e["data"]["tool"].as_str(), Some("get_record" | "list_records" | "list_all_records")))
        .collect();
    assert!(reads.len() >= 12, "{} reads", reads.len());
    let mut errors = 0;
    for read in reads {
        let (turn, data) = (read["turn"].as_u64().expect("turn"), &read["data"]);
        // a read changes nothing, so the state at the end of its turn is the one it read
        let records = state_at(&p, &log, turn)["records"].clone();
        let args = &data["args"];
        let expected = match data["tool"].as_str() {
            Some("get_record") => match records.get(args["id"].as_str().expect("id")) {
                Some(record) => record.clone(),
                None => {
                    errors += 1;
                    assert_eq!(data["is_error"], true, "{data}");
                    json!({"error": "no such record", "id": args["id"]})
                }
            },
            Some("list_records") => {
                let kept = records
                    .as_object()
                    .expect("records")
                    .values()
                    .filter(|r| r["kind"] == args["kind"] && r["status"] == args["status"]);
                json!({"records": kept.cloned().collect::<Vec<_>>()})
            }
            _ => json!({"records": records.as_object().expect("records").values().cloned().collect::<Vec<_>>()}),
        };
        assert_eq!(data["result"], expected, "turn {turn}: {}", data["tool"]);
    }
    assert_eq!(errors, 1, "T-04 is read after it was deleted");
    // a second delete of a deleted note: the declared error, and no effect logged
    let again = events
        .iter()
        .filter(|e| {
            e["kind"] == "tool_executed" && e["data"]["tool"] == "delete_record" && e["data"]["args"]["id"] == "N-03"
        })
        .map(|e| (e["data"]["result"].clone(), e["data"]["is_error"].clone(), e["data"]["effect"].clone()))
        .collect::<Vec<_>>();
    assert_eq!(
        again,
        [
            (json!({"deleted": "N-03"}), json!(false), json!([{"op": "remove", "path": "/records/N-03"}])),
            (json!({"error": "no such record", "id": "N-03"}), json!(true), Value::Null),
        ]
    );
}

#[test]
fn the_tools_schema_documents_every_computed_form_and_the_absent_answer() {
    let p = Project::empty();
    let schema: Value = serde_json::from_str(&p.stateval(&["schema", "tools"]).expect_code(0).stdout).expect("JSON");
    let forms = schema["$defs"]["computed"]["oneOf"].as_array().expect("forms");
    let named: Vec<&str> = forms.iter().map(|f| f["required"][0].as_str().expect("a form names its member")).collect();
    assert_eq!(named, ["$arg", "$state", "$filter", "$literal"]);
    assert!(schema["$defs"]["absent"]["description"].as_str().expect("absent").contains("no effect"));
    assert!(schema["$defs"]["place"]["description"].as_str().expect("place").contains("{\"$arg\""));
    // a response's conditions on the state: RFC 6902 test operations, nothing else
    let when = &schema["$defs"]["keyed_response"]["properties"]["when"];
    assert!(when["description"].as_str().expect("when").contains("RFC 6902 test"), "{when}");
    assert_eq!(schema["$defs"]["condition"]["properties"]["op"], json!({"const": "test"}));
}

#[test]
fn validate_refuses_a_state_read_that_cannot_resolve_naming_file_line_and_tool() {
    let p = Project::full();
    let text = p.read(MANIFEST);
    let (line_no, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(r#""result": {"records": {"$filter": "/records", "where": {}}}"#))
        .expect("list_all_records reads /records");
    p.write(
        MANIFEST,
        text.replace(r#"{"$filter": "/records", "where": {}}"#, r#"{"$filter": "/recrods", "where": {}}"#),
    );
    let out = p.stateval(&["validate", MANIFEST]);
    out.expect_code(2);
    let first = out
        .stderr
        .lines()
        .find(|l| l.starts_with(&format!("error: {MANIFEST}")))
        .unwrap_or_else(|| panic!("{}", out.stderr));
    let (file, l, c, message) = parse_located_error(first);
    assert_eq!((file.as_str(), l), (MANIFEST, line_no + 1));
    assert_eq!(c, line.find("\"$filter\"").expect("column") + 1);
    assert_eq!(
        message,
        "tool \"list_all_records\": {\"$filter\": \"/recrods\"} cannot resolve against the manifest's initial state: \
         nothing at /recrods"
    );
    // the run refuses it too, before any case starts
    let out = p.stateval(&["run", "--tag", "stateful"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("tool \"list_all_records\""), "{}", out.stderr);
}

/// The records case and its recording are what `tools/long-horizon-records/generate.py`
/// writes: it runs into a temporary directory and the bytes must be the committed ones,
/// so a hand edit of either file (a check loosened, a read's answer changed) fails here.
#[test]
fn the_records_case_is_exactly_what_its_generator_writes() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::process::Command::new("python3").arg("-c").arg("import json").output();
    if !python.is_ok_and(|o| o.status.success()) {
        // CI has python3; a machine without it cannot run the generator
        assert!(std::env::var_os("CI").is_none(), "no python3 on PATH under CI");
        eprintln!("skipped: no python3 on PATH (the generator needs it)");
        return;
    }
    let out = tempfile::tempdir().expect("temp dir");
    let run = std::process::Command::new("python3")
        .arg(root.join("tools/long-horizon-records/generate.py"))
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("python3 runs");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    for file in ["datasets/long_horizon/records.jsonl", "fixtures/recordings/long-horizon-records.jsonl"] {
        let generated = std::fs::read(out.path().join(file)).expect("the generator wrote it");
        let committed = std::fs::read(root.join(file)).expect("committed");
        assert!(
            generated == committed,
            "{file} is not what tools/long-horizon-records/generate.py writes: run it again, and change the generator, \
             not the file"
        );
    }
}

/// A response's `when` condition whose path neither resolves against the initial state
/// nor lies under a place an effect writes could never hold: `validate` refuses it,
/// naming the file, the line and the tool; one under a written place is accepted.
#[test]
fn validate_refuses_a_condition_that_can_never_resolve_naming_file_line_and_tool() {
    let p = Project::empty();
    let file = "fixtures/tools/pay.json";
    let lines = [
        r#"{"state": {"ledger": [], "owner": "ann"},"#,
        r#" "tools": [{"name": "pay", "description": "Pay someone.", "safety_class": "financial","#,
        r#"   "responses": ["#,
        r#"     {"args": {"to": "bo"}, "when": [{"op": "test", "path": "/ledger/0/id", "value": 1}], "result": "second"},"#,
        r#"     {"args": {"to": "bo"}, "when": [{"op": "test", "path": "/owner", "value": "ann"}], "result": "first"},"#,
        r#"     {"args": {"to": "bo"}, "when": [{"op": "test", "path": "/ledgr/0/id", "value": 1}], "result": "never"}"#,
        r#"   ],"#,
        r#"   "default": {"result": "sent", "effect": [{"op": "add", "path": "/ledger/-", "value": {"id": 1}}]}}]}"#,
    ];
    p.write(file, lines.join("\n"));
    let out = p.stateval(&["validate", file]);
    out.expect_code(2);
    let first = out
        .stderr
        .lines()
        .find(|l| l.starts_with(&format!("error: {file}")))
        .unwrap_or_else(|| panic!("{}", out.stderr));
    let (shown, l, c, message) = parse_located_error(first);
    assert_eq!((shown.as_str(), l, c), (file, 6, lines[5].find("\"path\"").expect("column") + 1));
    assert_eq!(
        message,
        "tool \"pay\": the condition {\"op\": \"test\", \"path\": \"/ledgr/0/id\"} cannot resolve against the manifest's \
         initial state (nothing at /ledgr), and no effect of the manifest writes there: the response could never answer"
    );
    // /ledger/0 is not there yet, but the default's effect appends to /ledger
    let fixed = [&lines[..5], &[r#"     {"args": {"to": "bo"}, "result": "any state"}"#], &lines[6..]].concat();
    p.write(file, fixed.join("\n"));
    p.stateval(&["validate", file]).expect_code(0);
}
