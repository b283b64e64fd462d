//! Metric blocks in datasets, end to end: the example blocks pass, the failing ones name
//! the failing target, its value and the bound in every report, and malformed blocks are
//! load errors with their place.

mod common;

use common::{Project, column_of, parse_located_error};
use serde_json::Value;

fn case<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("case {id}"))
}

fn block<'a>(case: &'a Value, name: &str) -> &'a Value {
    case["blocks"].as_array().unwrap().iter().find(|b| b["name"] == name).unwrap_or_else(|| panic!("block {name}"))
}

#[test]
fn example_blocks_pass_and_their_values_appear_in_the_json_report() {
    let p = Project::full();
    p.stateval(&["run"]).expect_code(0);
    let report = p.json("reports/report.json");
    let stable = case(&report, "docs-answers-are-stable");
    let stability = block(stable, "stability");
    assert_eq!(stability["passed"], true);
    // identical tool sequences in both runs: LCS similarity 2*2/(2+2) = 1
    assert_eq!(stability["actual"]["stability.tool_sequence_similarity"], 1.0);
    assert_eq!(stability["actual"]["stability.runs"], 2);
    let ticket = case(&report, "ticket-trajectory-and-golden-path");
    for name in ["trajectory", "trajectory_axes", "golden_path", "reliability", "narrative"] {
        assert_eq!(block(ticket, name)["passed"], true, "{name}");
    }
    // per-run blocks report one set of targets per recorded run
    assert_eq!(block(ticket, "golden_path")["actual"].as_array().unwrap().len(), 2);
    // an `expect` on a block target is checked in every run
    for run in ticket["runs"].as_array().unwrap() {
        let names: Vec<&str> = run["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"golden_path.penalty"), "{names:?}");
    }
}

#[test]
fn failing_blocks_name_the_target_its_value_and_the_bound_in_junit_tap_and_json() {
    let p = Project::full();
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    let report = p.json("reports/failing/report.json");
    let looping = case(&report, "looping-agent");
    assert_eq!(looping["passed"], false);
    // five identical calls per run: 1 distinct / 5 calls = 0.2 redundancy, below the 0.5 floor
    let stability = block(looping, "stability");
    assert!(stability["reason"].as_str().unwrap().contains("stability.weakest_score = 0.2, below the bound 0.5"));
    let narrative = block(case(&report, "narrative-claims-absent-transfer"), "narrative");
    assert!(narrative["reason"].as_str().unwrap().contains("2 claimed but absent"), "{narrative}");

    let junit = p.read("reports/failing/junit.xml");
    let doc = roxmltree::Document::parse(&junit).expect("JUnit parses");
    let thrashing = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some("thrashing-agent"))
        .expect("thrashing-agent testcase");
    let failure = thrashing.children().find(|n| n.has_tag_name("failure")).expect("a failure");
    let message = failure.attribute("message").unwrap();
    assert!(message.contains("trajectory.passed = 0, below the bound 1"), "{message}");
    let text = failure.text().unwrap_or_default();
    assert!(text.contains("golden_path.passed = 0") && text.contains("trajectory.order_satisfaction = 0"), "{text}");

    let tap = p.read("reports/failing/results.tap");
    assert!(tap.contains("not ok") && tap.contains("stability.weakest_score = 0.2"), "{tap}");
}

#[test]
fn a_run_that_failed_a_per_run_block_says_failed_and_an_across_run_block_has_its_own_line() {
    // looping-agent: golden_path fails in both runs (per run), stability across them
    let p = Project::full();
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    let report = p.json("reports/failing/report.json");
    let looping = case(&report, "looping-agent");
    let runs: Vec<&Value> = looping["runs"].as_array().unwrap().iter().map(|r| &r["passed"]).collect();
    assert_eq!(runs, [&Value::Bool(false), &Value::Bool(false)]);

    let junit = p.read("reports/failing/junit.xml");
    let doc = roxmltree::Document::parse(&junit).expect("JUnit parses");
    let out = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some("looping-agent"))
        .and_then(|c| c.children().find(|n| n.has_tag_name("system-out")))
        .and_then(|n| n.text())
        .unwrap_or_default();
    assert!(!out.contains(": passed,"), "no run of a failed block case says passed: {out}");
    assert!(out.starts_with("run 0: failed, status completed"), "{out}");
    assert!(out.contains("\nstability: failed: stability.weakest_score = 0.2, below the bound 0.5"), "{out}");

    let tap = p.read("reports/failing/results.tap");
    let block = tap.split("failing/metrics :: looping-agent").nth(1).unwrap_or_default();
    let block = block.split("\n  ...\n").next().unwrap_or_default();
    assert!(!block.contains("passed: true"), "{block}");
    assert!(block.contains("  blocks:\n    - check: \"golden_path\"\n      passed: false\n"), "{block}");
    assert!(block.contains("    - check: \"stability\"\n      passed: false"), "{block}");
}

#[test]
fn an_expect_on_a_target_its_block_does_not_report_is_refused_by_validate_listing_the_valid_ones() {
    let p = Project::full();
    let rec = r#"{"responses":[{"response":{"content":"hi"}}]}"#;
    let line = format!(
        r#"{{"id":"scored","agent":"support","turns":["hi"],"recordings":[{rec}],"trajectory":{{"calls":[]}},"expect":[{{"target":"trajectory.score","matcher":{{"exact":1}}}}]}}"#
    );
    let n = append_case(&p, "datasets/examples/metrics.jsonl", &line);
    let out = p.stateval(&["validate"]);
    out.expect_code(2);
    let (path, line_no, col, message) = parse_located_error(out.stderr.lines().next().unwrap());
    assert_eq!(
        (path.as_str(), line_no, col),
        ("datasets/examples/metrics.jsonl", n, column_of(&line, "\"target\":\"trajectory.score"))
    );
    assert_eq!(
        message,
        "unknown target \"trajectory.score\": the trajectory block of this case reports: trajectory.passed, \
         trajectory.mismatch_count"
    );
}

/// Append a case line to `rel`; returns its line number.
fn append_case(p: &Project, rel: &str, line: &str) -> usize {
    let mut text = p.read(rel);
    text.push_str(line);
    text.push('\n');
    p.write(rel, &text);
    text.lines().count()
}

#[test]
fn a_stability_block_with_one_recording_is_a_load_error_at_the_block() {
    let p = Project::full();
    let line = r#"{"id":"unstable","agent":"support","turns":["hi"],"recordings":[{"responses":[{"response":{"content":"hi"}}]}],"stability":{}}"#;
    let n = append_case(&p, "datasets/examples/metrics.jsonl", line);
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    let (path, line_no, col, message) = parse_located_error(out.stderr.lines().next().unwrap());
    assert_eq!((path.as_str(), line_no), ("datasets/examples/metrics.jsonl", n));
    assert_eq!(col, column_of(line, "\"stability\""));
    assert_eq!(message, "the stability block needs at least 2 recorded runs; this case has 1");
    assert!(!p.exists("reports/report.json"));
}

#[test]
fn an_llm_matcher_inside_a_stability_expect_is_a_load_error() {
    let p = Project::full();
    let rec = r#"{"responses":[{"response":{"content":"hi"}}]}"#;
    let line = format!(
        r#"{{"id":"judged","agent":"support","turns":["hi"],"recordings":[{rec},{rec}],"stability":{{"expect":[{{"target":"stability.score","matcher":{{"llm_judge":"is it stable?"}}}}]}}}}"#
    );
    let n = append_case(&p, "datasets/examples/metrics.jsonl", &line);
    let out = p.stateval(&["validate"]);
    out.expect_code(2);
    let (_, line_no, _, message) = parse_located_error(out.stderr.lines().next().unwrap());
    assert_eq!(line_no, n);
    assert!(message.contains("may not use an LLM matcher"), "{message}");
}

#[test]
fn a_block_target_without_its_block_is_a_load_error() {
    let p = Project::full();
    let line = r#"{"id":"no-block","agent":"support","turns":["hi"],"recordings":[{"responses":[{"response":{"content":"hi"}}]}],"expect":[{"target":"golden_path.penalty","matcher":{"exact":1}}]}"#;
    let n = append_case(&p, "datasets/examples/metrics.jsonl", line);
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    let (_, line_no, col, message) = parse_located_error(out.stderr.lines().next().unwrap());
    assert_eq!((line_no, col), (n, column_of(line, "\"target\":\"golden_path")));
    assert_eq!(message, "target \"golden_path.penalty\" needs a golden_path block in this case");
}
