//! Mistakes a user makes, caught before they mislead: each ends with exit 2 naming the
//! setting or the place at fault (exit 3 is for stateval's own bugs), or fails the case
//! that depends on it with a reason that says what to fix. Also what is *not* a mistake:
//! a byte-order mark, and running a pipeline from inside its own directory.

mod common;

use common::{CI_REPORTS, Project};
use serde_json::Value;

fn case<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["cases"].as_array().expect("cases").iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no case {id}"))
}

// ---------------------------------------------------------------------------------
// Settings that cannot be honoured: exit 2, naming the setting

#[test]
fn a_report_path_that_cannot_be_written_exits_2_naming_the_report_setting() {
    let p = Project::new();
    // a file where the reports directory should be
    p.write("reports", "not a directory");
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    // after the cases' progress lines, the error names the setting
    let error = out.stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_default();
    assert!(error.starts_with("error: report.json: ./reports: cannot create the directory: "), "{}", out.stderr);
}

#[test]
fn a_store_path_that_is_a_file_exits_2_naming_pipeline_store() {
    let p = Project::new();
    p.write(".stateval", "not a directory");
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    assert_eq!(out.stderr, "error: pipeline.store: ./.stateval is a file, not a directory\n");
    let left: Vec<&str> = CI_REPORTS.iter().copied().filter(|r| p.exists(r)).collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_run_on_a_store_another_process_holds_exits_2_saying_so() {
    let p = Project::new();
    std::fs::create_dir_all(p.join(".stateval")).expect("create the store");
    // this test process holds the catalog, as a second `stateval run` would
    let held = stateval::store::SledStore::open(&p.join(".stateval/catalog")).expect("open the catalog");
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    assert!(
        out.stderr.starts_with("error: pipeline.store: ./.stateval is in use by another stateval run"),
        "{}",
        out.stderr
    );
    drop(held);
    p.stateval(&["run"]).expect_code(0);
}

// ---------------------------------------------------------------------------------
// Inputs

#[test]
fn a_byte_order_mark_is_accepted_in_datasets_recordings_and_manifests_and_changes_nothing() {
    let (plain, marked) = (Project::new(), Project::new());
    for rel in
        ["datasets/examples/treasury.jsonl", "fixtures/recordings/pay-alice.jsonl", "fixtures/tools/treasury.json"]
    {
        let text = marked.read(rel);
        marked.write(rel, format!("\u{feff}{text}"));
    }
    plain.stateval(&["run"]).expect_code(0);
    marked.stateval(&["run"]).expect_code(0);
    // the same run: same run id, same logs, same reports — but for the root: the
    // manifest lists `units.jsonl`, which records each recording file's size (for
    // merge's validated-recordings cache), and the BOM is three bytes of the file
    let root_of = |p: &Project| p.json("reports/report.json")["root"].as_str().expect("root").to_string();
    let (plain_root, marked_root) = (root_of(&plain), root_of(&marked));
    let unrooted = |p: &Project, rel: &str, root: &str| p.read(rel).replace(root, "ROOT");
    for rel in ["reports/junit.xml", "reports/report.json"] {
        assert_eq!(unrooted(&plain, rel, &plain_root), unrooted(&marked, rel, &marked_root), "{rel}");
    }
    let units = |p: &Project| {
        let run = p.run_ids().remove(0);
        p.read(format!(".stateval/runs/{run}/units.jsonl"))
    };
    let (plain_units, marked_units) = (units(&plain), units(&marked));
    assert_ne!(plain_units, marked_units, "the recording's size is recorded");
    assert_eq!(plain_units.lines().count(), marked_units.lines().count());
    let out = marked.stateval(&["validate", "fixtures/recordings/pay-alice.jsonl", "fixtures/tools/treasury.json"]);
    out.expect_code(0);
}

#[test]
fn an_empty_dataset_is_an_error_not_a_dataset_of_no_cases() {
    let p = Project::new();
    p.write("datasets/examples/empty.jsonl", "\n\n");
    let out = p.stateval(&["validate", "datasets/examples/empty.jsonl"]);
    out.expect_code(2);
    assert_eq!(out.stderr, "error: datasets/examples/empty.jsonl:1:1: the dataset has no cases (the file is empty)\n");
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    assert!(out.stderr.contains("empty.jsonl:1:1: the dataset has no cases"), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------
// Fixtures that cannot answer: the case fails, naming manifest, tool and effect

const SUPPORT: &str = "fixtures/tools/support.json";

#[test]
fn an_effect_that_cannot_apply_fails_the_case_naming_manifest_tool_and_effect() {
    let p = Project::new();
    let manifest = p.read(SUPPORT);
    let path = r#""path": "/tickets/T-100/status""#;
    assert_eq!(manifest.matches(path).count(), 1, "{SUPPORT} changed");
    p.write(SUPPORT, manifest.replace(path, r#""path": "/tickets/T-404/status""#));
    p.stateval(&["run", "--filter", "resolve-login-ticket"]).expect_code(1);
    let report = p.json("reports/report.json");
    let run = &case(&report, "resolve-login-ticket")["runs"][0];
    assert_eq!(run["passed"], false);
    assert_eq!(run["status"], "failed");
    let error = run["error"].as_str().expect("the run names its error");
    assert!(
        error.starts_with(
            "fixture error: fixtures/tools/support.json: /tools/1/responses/0/effect: tool update_ticket: \
             the effect does not apply to the fixture state: "
        ),
        "{error}"
    );
    // the log holds it as an error event, and the model never saw the tool fail
    let log = run["log"].as_str().expect("log").to_string();
    let events = common::events_of(&p.read_bytes(&log));
    let error_event = events.iter().find(|e| e["kind"] == "error").expect("an error event");
    assert_eq!(error_event["data"]["kind"], "fixture_error");
    let calls_after = events.iter().skip_while(|e| e["kind"] != "error").filter(|e| e["kind"] == "model_called");
    assert_eq!(calls_after.count(), 0, "the run stops at the fixture error");
}

#[test]
fn an_arg_the_call_did_not_pass_is_a_fixture_error_not_a_silent_null() {
    let p = Project::new();
    let manifest = p.read(SUPPORT);
    let arg = r#"{"$arg": "/to"}"#;
    assert_eq!(manifest.matches(arg).count(), 1, "{SUPPORT} changed");
    p.write(SUPPORT, manifest.replace(arg, r#"{"$arg": "/cc"}"#));
    p.stateval(&["run", "--filter", "resolve-login-ticket"]).expect_code(1);
    let report = p.json("reports/report.json");
    let error = case(&report, "resolve-login-ticket")["runs"][0]["error"].as_str().unwrap_or_default().to_string();
    assert!(error.starts_with("fixture error: fixtures/tools/support.json: /tools/"), "{error}");
    assert!(error.ends_with(r#"tool send_email: {"$arg": "/cc"}: the call has no argument at "/cc""#), "{error}");
}

// ---------------------------------------------------------------------------------
// Recorded responses a run never used

const TREASURY: &str = "datasets/examples/treasury.jsonl";

/// greeting-inline with a second, never-asked-for response in its recording.
fn with_an_unused_response(p: &Project) {
    let text = p.read(TREASURY);
    let answer = r#""latency_ms":150}]}]"#;
    assert_eq!(text.matches(answer).count(), 1, "{TREASURY} changed");
    let extra = r#""latency_ms":150},{"response":{"content":"never asked for"}}]}]"#;
    p.write(TREASURY, text.replace(answer, extra));
}

#[test]
fn responses_a_completed_run_never_used_are_a_warning() {
    let p = Project::new();
    with_an_unused_response(&p);
    p.stateval(&["run", "--filter", "greeting-inline"]).expect_code(0);
    let report = p.json("reports/report.json");
    let run = &case(&report, "greeting-inline")["runs"][0];
    assert_eq!(run["passed"], true);
    assert_eq!(
        run["warnings"][0],
        "the run completed without using 1 of the 2 recorded responses of inline (the first unused is at \
         position 1); replay.unused = \"fail\" fails on this"
    );
    assert!(p.read("reports/results.tap").contains("# warning: run 0: the run completed without using 1"));
}

#[test]
fn under_replay_unused_fail_responses_a_run_never_used_fail_the_case() {
    let p = Project::new();
    with_an_unused_response(&p);
    let ci = p.read("pipeline/ci.toml");
    p.write(
        "pipeline/ci.toml",
        ci.replace("on_divergence = \"fail\"\n", "on_divergence = \"fail\"\nunused = \"fail\"\n"),
    );
    p.stateval(&["run", "--filter", "greeting-inline"]).expect_code(1);
    let report = p.json("reports/report.json");
    let run = &case(&report, "greeting-inline")["runs"][0];
    assert_eq!(run["passed"], false);
    let error = run["error"].as_str().unwrap_or_default();
    assert!(error.ends_with("(replay.unused = \"fail\")"), "{error}");
    let out = p.stateval(&["validate", "pipeline/ci.toml"]);
    out.expect_code(0);
}

// ---------------------------------------------------------------------------------
// Paths

#[test]
fn a_pipeline_run_from_inside_its_directory_means_the_same_files() {
    let (a, b) = (Project::new(), Project::new());
    a.stateval(&["run", "pipeline/ci.toml"]).expect_code(0);
    let inside = b.cmd().current_dir(b.join("pipeline")).args(["run", "ci.toml"]).output().expect("run stateval");
    assert_eq!(inside.status.code(), Some(0), "{}", String::from_utf8_lossy(&inside.stderr));
    for report in CI_REPORTS {
        assert_eq!(a.read(report), b.read(report), "{report}");
    }
}

/// Datasets are parsed a batch of lines at a time on every core; what a user sees must
/// be what a line-by-line pass gives: errors in line order, the first twenty only.
#[test]
fn errors_in_a_large_dataset_come_in_line_order_and_stop_at_twenty() {
    let p = Project::new();
    let first: Value = serde_json::from_str(&p.line("datasets/examples/support.jsonl", 1)).expect("a case");
    let mut expected = Vec::new();
    let mut text = String::new();
    for n in 1..=3000 {
        if n % 97 == 7 {
            text.push_str("{not json\n");
            expected.push(n);
        } else if n == 200 {
            // a duplicate id: found while keeping cases, after the parse
            let mut case = first.clone();
            case["id"] = Value::from("big-199");
            text.push_str(&format!("{case}\n"));
            expected.push(n);
        } else {
            let mut case = first.clone();
            case["id"] = Value::from(format!("big-{n}"));
            text.push_str(&format!("{case}\n"));
        }
    }
    expected.sort_unstable();
    expected.truncate(20);
    p.write("datasets/examples/big.jsonl", text);
    let out = p.stateval(&["validate", "datasets/examples/big.jsonl"]);
    out.expect_code(2);
    let lines: Vec<usize> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error: datasets/examples/big.jsonl:"))
        .map(|l| common::parse_located_error(l).1)
        .collect();
    assert_eq!(lines, expected, "{}", out.stderr);
    assert!(out.stderr.contains("big.jsonl:200:"), "{}", out.stderr);
    assert!(out.stderr.contains("duplicate case id \"big-199\""), "{}", out.stderr);
}
