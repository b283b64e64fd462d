//! Injected faults end to end: the recovery cases of `datasets/examples/recovery.jsonl`
//! leave logs whose bytes carry the fault fields at the right virtual times, the case
//! that never recovers fails on exactly its recovery assertion, the marks feed the
//! `recovery` block, and a fault that could not fire stops the run before it starts.

mod common;

use common::{Project, column_of, events_of, lines_of, parse_located_error};
use serde_json::{Value, json};
use stateval::event::reader::read_log;
use stateval::metrics::block::MetricBlock;

/// The log of `case`'s first run, as the JSON report names it.
fn log_of(p: &Project, report: &str, case: &str) -> String {
    let report = p.json(report);
    let found = report["cases"].as_array().expect("cases").iter().find(|c| c["id"] == case);
    found.unwrap_or_else(|| panic!("no case {case}"))["runs"][0]["log"].as_str().expect("log").to_string()
}

/// `(seq, t, kind, tool, fault, duration_ms)` of one tool event.
type ToolEvent = (u64, u64, String, String, Value, Value);

/// Every `tool_proposed` and `tool_executed` of a log.
fn tool_events(bytes: &[u8]) -> Vec<ToolEvent> {
    events_of(bytes)
        .into_iter()
        .filter(|e| e["kind"] == "tool_proposed" || e["kind"] == "tool_executed")
        .map(|e| {
            (
                e["seq"].as_u64().expect("seq"),
                e["t"].as_u64().expect("t"),
                e["kind"].as_str().expect("kind").to_string(),
                e["data"]["tool"].as_str().expect("tool").to_string(),
                e["data"]["fault"].clone(),
                e["data"]["duration_ms"].clone(),
            )
        })
        .collect()
}

fn row(seq: u64, t: u64, kind: &str, tool: &str, fault: Value, duration: Value) -> ToolEvent {
    (seq, t, kind.to_string(), tool.to_string(), fault, duration)
}

#[test]
fn a_timed_out_call_is_logged_with_its_fault_fields_at_the_virtual_time_it_gave_up() {
    let p = Project::new();
    p.stateval(&["run", "--tag", "recovery"]).expect_code(0);
    let bytes = p.read_bytes(log_of(&p, "reports/report.json", "status-hang-falls-back-to-cache"));
    let lines = lines_of(&bytes);
    // proposed at 400 (the model's latency), given up 5000 virtual ms later (ops: tool_timeout_ms = 5000)
    let line = String::from_utf8(lines[6].clone()).expect("UTF-8");
    assert!(
        line.starts_with(
            r#"{"data":{"args":{"service":"checkout"},"call_id":"s1","deduplicated":false,"duration_ms":5000,"effect":null,"fault":"timeout","injected":"hang","is_error":true,"result":{"error":"timed out after 5000 ms"},"timeout_ms":5000,"tool":"get_status"},"hash":"blake3:"#
        ),
        "{line}"
    );
    assert!(line.contains(r#","kind":"tool_executed","prev":"blake3:"#), "{line}");
    assert!(line.ends_with(",\"seq\":6,\"t\":5400,\"turn\":0}\n"), "{line}");
    // the fallback is an ordinary call: fault null, no fault details, no time spent
    let fallback = String::from_utf8(lines[11].clone()).expect("UTF-8");
    assert!(
        fallback.starts_with(
            r#"{"data":{"args":{"service":"checkout"},"call_id":"c1","deduplicated":false,"duration_ms":0,"effect":null,"fault":null,"is_error":false,"#
        ),
        "{fallback}"
    );
    assert!(fallback.ends_with(",\"seq\":11,\"t\":5700,\"turn\":0}\n"), "{fallback}");
}

#[test]
fn every_fault_kind_moves_the_virtual_clock_as_declared() {
    let p = Project::new();
    p.stateval(&["run", "--tag", "recovery"]).expect_code(0);
    let events = |case: &str| tool_events(&p.read_bytes(log_of(&p, "reports/report.json", case)));
    let (null, zero) = (Value::Null, json!(0));

    // slow:1200 inside the 5000 ms timeout: answered 1200 ms after the proposal
    assert_eq!(
        events("metrics-slow-within-timeout"),
        [
            row(4, 350, "tool_proposed", "get_metrics", null.clone(), null.clone()),
            row(6, 1550, "tool_executed", "get_metrics", json!("slow"), json!(1200)),
        ]
    );
    // error (injected by the pipeline): answered at once
    assert_eq!(
        events("page-error-reported"),
        [
            row(4, 300, "tool_proposed", "page_oncall", null.clone(), null.clone()),
            row(6, 300, "tool_executed", "page_oncall", json!("error"), zero.clone()),
        ]
    );
    // recover-after:2: two timeouts of 5000, then the third call runs
    assert_eq!(
        events("deploys-recover-after-two-hangs"),
        [
            row(4, 300, "tool_proposed", "get_deploys", null.clone(), null.clone()),
            row(6, 5300, "tool_executed", "get_deploys", json!("timeout"), json!(5000)),
            row(9, 5500, "tool_proposed", "get_deploys", null.clone(), null.clone()),
            row(11, 10_500, "tool_executed", "get_deploys", json!("timeout"), json!(5000)),
            row(14, 10_700, "tool_proposed", "get_deploys", null.clone(), null.clone()),
            row(16, 10_700, "tool_executed", "get_deploys", null.clone(), zero.clone()),
        ]
    );
    let executed: Vec<Value> =
        events_of(&p.read_bytes(log_of(&p, "reports/report.json", "deploys-recover-after-two-hangs")))
            .into_iter()
            .filter(|e| e["kind"] == "tool_executed")
            .map(|e| e["data"].get("injected").cloned().unwrap_or(Value::Null))
            .collect();
    assert_eq!(executed, [json!("recover-after:2"), json!("recover-after:2"), Value::Null]);
}

#[test]
fn the_recovery_logs_are_byte_identical_in_two_copies() {
    let (a, b) = (Project::new(), Project::new());
    a.stateval(&["run", "--tag", "recovery", "--jobs", "1"]).expect_code(0);
    b.stateval(&["run", "--tag", "recovery", "--jobs", "3"]).expect_code(0);
    let (la, lb) = (a.log_files(), b.log_files());
    assert_eq!(la.len(), 4, "{la:#?}");
    assert_eq!(la, lb);
    for log in &la {
        assert_eq!(a.read_bytes(log), b.read_bytes(log), "{log}");
    }
}

#[test]
fn the_case_that_never_recovers_fails_on_its_recovery_assertion_and_nothing_else() {
    let p = Project::new();
    p.stateval(&["run", "pipeline/failing.toml", "--filter", "status-wedged-*"]).expect_code(1);
    let report = p.json("reports/failing/report.json");
    let case = &report["cases"][0];
    assert_eq!((&case["id"], &case["passed"]), (&json!("status-wedged-no-fallback"), &json!(false)));
    assert_eq!(case["runs"][0]["status"], "completed", "the run itself completed; only the check fails");
    let checks: Vec<(&str, bool)> = case["runs"][0]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| (c["name"].as_str().expect("name"), c["passed"].as_bool().expect("passed")))
        .collect();
    assert_eq!(
        checks,
        [
            ("tool_calls[1].fault", true),
            ("recovery.detections", true),
            ("recovery.time_to_detection_ms", true),
            ("recovery.recovered", false),
            ("golden", true)
        ]
    );
    // the default 30 s timeout, twice: the mirror is wedged by the pipeline, not the manifest
    let bytes = p.read_bytes(log_of(&p, "reports/failing/report.json", "status-wedged-no-fallback"));
    let (null, timeout) = (Value::Null, json!("timeout"));
    assert_eq!(
        tool_events(&bytes),
        [
            row(4, 400, "tool_proposed", "get_status", null.clone(), null.clone()),
            row(6, 30_400, "tool_executed", "get_status", timeout.clone(), json!(30_000)),
            row(9, 30_700, "tool_proposed", "get_status_cached", null.clone(), null.clone()),
            row(11, 60_700, "tool_executed", "get_status_cached", timeout, json!(30_000)),
        ]
    );
    let events = events_of(&bytes);
    assert_eq!(events[11]["data"]["injected"], "wedged");
    assert_eq!(events[14]["kind"], "turn_completed");
    assert_eq!((&events[14]["t"], &events[14]["data"]["response"]), (&json!(60_900), &json!("")));
}

#[test]
fn recovery_input_from_a_real_log_feeds_the_recovery_block() {
    let p = Project::new();
    p.stateval(&["run", "--tag", "recovery"]).expect_code(0);
    p.stateval(&["run", "pipeline/failing.toml", "--filter", "status-wedged-*"]).expect_code(1);
    let input = |report: &str, case: &str| {
        let verified = read_log(&p.join(log_of(&p, report, case))).expect("the log verifies");
        stateval::extract::recovery_input(&verified.events)
    };
    let recovered = input("reports/report.json", "deploys-recover-after-two-hangs");
    assert_eq!(
        recovered,
        json!({"recovery": {"call_start_ms": 300, "detected_ms": 5300, "recovered_ms": 10_700,
                            "timeout_budget_ms": 5000, "detections": 2, "fault_fired": true}})
    );
    let stuck = input("reports/failing/report.json", "status-wedged-no-fallback");
    assert_eq!(
        stuck,
        json!({"recovery": {"call_start_ms": 400, "detected_ms": 30_400, "timeout_budget_ms": 30_000,
                            "detections": 2, "fault_fired": true}})
    );
    let block = MetricBlock::from_key("recovery", &json!({"max_recovery_ms": 15_000, "require_clean_timeout": true}))
        .expect("a block key")
        .expect("a valid block");
    let outcome = block.evaluate(&[recovered, stuck]).expect("valid input");
    assert_eq!(outcome.runs.iter().map(|r| r.passed).collect::<Vec<_>>(), [true, false]);
    assert_eq!(outcome.runs[0].targets["recovery.time_to_recovery_ms"], json!(10_400));
    assert_eq!(outcome.runs[1].targets["recovery.user_visible_hang_ms"], json!(30_000));
}

#[test]
fn a_misspelt_fault_in_a_manifest_stops_the_run_before_anything_runs() {
    let p = Project::new();
    let rel = "fixtures/tools/ops.json";
    let text = p.read(rel);
    let line_no = text.lines().position(|l| l.contains(r#""fault": "slow:1200""#)).expect("the slow fault") + 1;
    let line = p.edit_line(rel, line_no, r#""slow:1200""#, r#""slow:12OO""#);
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    let (path, l, c, message) = parse_located_error(out.stderr.lines().next().expect("an error line"));
    assert_eq!((path.as_str(), l, c), (rel, line_no, column_of(&line, r#""fault""#)));
    assert_eq!(message, r#"fault "slow:12OO": the delay in milliseconds must be a whole number, as in "slow:250""#);
    assert!(!p.exists(".stateval/runs"), "nothing ran");
}

#[test]
fn a_pipeline_fault_naming_a_tool_the_manifest_lacks_is_refused_at_the_name() {
    let p = Project::new();
    let rel = "pipeline/ci.toml";
    let text = p.read(rel);
    let line_no = text.lines().position(|l| l.contains(r#"tool = "page_oncall""#)).expect("the pager fault") + 1;
    let line = p.edit_line(rel, line_no, r#""page_oncall""#, r#""page_on_call""#);
    for args in [&["run"][..], &["validate"][..]] {
        let out = p.stateval(args);
        out.expect_code(2);
        assert_eq!(
            out.stderr,
            format!(
                "error: {rel}:{line_no}:{}: agents.ops.faults[0].tool: fault names tool \"page_on_call\", which the manifest does not have (did you mean \"page_oncall\"?)\n",
                column_of(&line, r#""page_on_call""#)
            ),
            "{args:?}"
        );
    }
    assert!(!p.exists(".stateval/runs"), "nothing ran");
}
