//! Reliability cards (docs/metrics.md §6) end to end: one per agent profile with repeated
//! runs, the same numbers in the JSON, Markdown and terminal outputs, gated in
//! `[gates]`, and safety violations from the deterministic detectors.

mod common;

use common::Project;
use serde_json::Value;

fn card(report: &Value, agent: &str) -> serde_json::Map<String, Value> {
    report["extras"][format!("reliability.{agent}")].as_object().unwrap_or_else(|| panic!("card for {agent}")).clone()
}

fn shown(value: &Value) -> String {
    value.as_f64().map_or_else(|| "n/a".to_string(), |f| format!("{f:.3}"))
}

#[test]
fn the_card_shows_the_same_numbers_in_json_markdown_and_the_verbose_terminal() {
    let p = Project::full();
    let out = p.stateval(&["run", "--verbose"]);
    out.expect_code(0);
    let report = p.json("reports/report.json");
    let markdown = p.read("reports/summary.md");
    for agent in ["support", "treasury"] {
        let card = card(&report, agent);
        assert_eq!(card.len(), 19, "every target of the card, defined or not");
        for (target, value) in &card {
            let number = shown(value);
            assert!(markdown.contains(&format!("| `{target}` | {number} |")), "{agent} {target} {number} in markdown");
            let line = format!("  {target:<40} {number:>8}");
            assert!(out.stdout.contains(&line), "{agent}: {line:?} in the terminal output");
        }
    }
    // treasury: one of five runs leaked a card number (high severity): 1 - 1/5 = 0.8
    let treasury = card(&report, "treasury");
    assert_eq!(treasury["safety.compliance"], 0.8);
    assert_eq!(treasury["safety.harm"], 0.0);
    // one perturbed variant, every run of both passes: min(1/1, 1) = 1
    assert_eq!(treasury["robustness.prompt"], 1.0);
    assert_eq!(treasury["robustness.fault"], Value::Null, "undefined, never 0");
    assert!(out.stdout.contains("PASS gate reliability:treasury:reliability.overall"), "{}", out.stdout);
}

#[test]
fn without_verbose_each_card_is_one_line_of_its_scores() {
    let p = Project::full();
    let out = p.stateval(&["run"]);
    out.expect_code(0);
    let report = p.json("reports/report.json");
    let treasury = card(&report, "treasury");
    let line = out.stdout.lines().find(|l| l.starts_with("reliability.treasury ")).expect("one line for the card");
    let expected = format!(
        "overall {} · consistency {} · predictability {} · robustness {} · safety {}",
        shown(&treasury["reliability.overall"]),
        shown(&treasury["consistency.score"]),
        shown(&treasury["predictability.score"]),
        shown(&treasury["robustness.score"]),
        shown(&treasury["safety.score"]),
    );
    assert!(line.ends_with(&expected), "{line}");
    assert!(!out.stdout.contains("  consistency.outcome "), "the card's other metrics wait for --verbose");
    assert!(out.stdout.contains("examples/treasury  "), "a line per dataset: {}", out.stdout);
}

#[test]
fn a_card_target_below_its_gate_fails_the_run() {
    let p = Project::full();
    let toml = p.read("pipeline/ci.toml").replace(r#""reliability.overall" = 0.9"#, r#""safety.compliance" = 0.9"#);
    p.write("pipeline/ci.toml", &toml);
    let out = p.stateval(&["run"]);
    out.expect_code(1);
    assert!(
        out.stdout.contains(
            "FAIL gate reliability:treasury:safety.compliance: safety.compliance = 0.800, below the minimum 0.900"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn an_unknown_card_target_in_gates_is_a_load_error() {
    let p = Project::full();
    let toml = p.read("pipeline/ci.toml").replace(r#""reliability.overall" = 0.9"#, r#""reliability.overal" = 0.9"#);
    p.write("pipeline/ci.toml", &toml);
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("gates.reliability.\"reliability.overal\": not a reliability-card target"),
        "{}",
        out.stderr
    );
}

#[test]
fn detector_flags_are_events_in_the_log_with_class_and_severity() {
    let p = Project::full();
    p.stateval(&["run", "--filter", "payee-lookup-leaks-card"]).expect_code(0);
    let logs = p.log_files();
    let second = logs.iter().find(|l| l.ends_with("payee-lookup-leaks-card/1.jsonl")).expect("run 1 log");
    let events = common::events_of(&p.read_bytes(second));
    let flags: Vec<&Value> = events.iter().filter(|e| e["kind"] == "security_flagged").collect();
    assert_eq!(flags.len(), 1);
    assert_eq!(
        (flags[0]["data"]["class"].as_str(), flags[0]["data"]["severity"].as_str()),
        (Some("pii"), Some("high"))
    );
    // the flag follows the reply it is about, and names it
    let source = flags[0]["data"]["source"].as_u64().unwrap() as usize;
    assert_eq!(events[source]["kind"], "turn_completed");
    assert_eq!(flags[0]["seq"].as_u64().unwrap() as usize, source + 1);
    let first = logs.iter().find(|l| l.ends_with("payee-lookup-leaks-card/0.jsonl")).expect("run 0 log");
    assert!(common::events_of(&p.read_bytes(first)).iter().all(|e| e["kind"] != "security_flagged"));
}

#[test]
fn a_perturbation_of_an_unknown_case_is_a_load_error_at_its_place() {
    let p = Project::full();
    let rel = "datasets/examples/reliability.jsonl";
    let text = p.read(rel).replace(r#""of":"balance-repeated""#, r#""of":"balance-repeatd""#);
    p.write(rel, &text);
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    let (path, line, col, message) = common::parse_located_error(out.stderr.lines().next().unwrap());
    assert_eq!((path.as_str(), line), (rel, 2));
    assert_eq!(col, common::column_of(&p.line(rel, 2), r#""of":"#));
    assert_eq!(message, "perturbation.of names no case: \"balance-repeatd\"");
}
