//! The adversarial suite (`datasets/security/`) and proof that each mitigation is
//! load-bearing: switched off in the profile or manifest, exactly the cases tagged
//! `needs-<mitigation>` fail, while every negative control still passes. The runtime's
//! own switches are proved the same way in `security_switches.rs`.

mod common;

use std::collections::BTreeSet;

use common::Project;

/// Run the security suite; return (exit code, ids of failing cases).
fn failing_security_cases(p: &Project) -> (i32, BTreeSet<String>) {
    let out = p.stateval(&["run", "--filter", "*", "--tag", "security"]);
    let report = p.json("reports/report.json");
    let failed = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false && c["dataset"] == "security/suite")
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    (out.code, failed)
}

/// The ids of the suite's cases carrying `tag`.
fn tagged(p: &Project, tag: &str) -> BTreeSet<String> {
    let ids: BTreeSet<String> = p
        .read("datasets/security/suite.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a dataset line"))
        .filter(|c| c["tags"].as_array().is_some_and(|t| t.iter().any(|t| t == tag)))
        .map(|c| c["id"].as_str().expect("id").to_string())
        .collect();
    assert!(!ids.is_empty(), "no case is tagged {tag}");
    ids
}

#[test]
fn with_every_mitigation_on_the_security_suite_passes() {
    let p = Project::full();
    let (code, failed) = failing_security_cases(&p);
    assert_eq!((code, failed), (0, BTreeSet::new()));
}

#[test]
fn without_the_poisoning_checks_the_poisoning_fixtures_fail() {
    let p = Project::full();
    let toml = p.read("pipeline/ci.toml").replace(r#"poisoned_tools = "refuse""#, r#"poisoned_tools = "allow""#);
    p.write("pipeline/ci.toml", &toml);
    let (code, failed) = failing_security_cases(&p);
    assert_eq!(code, 1);
    assert_eq!(failed, tagged(&p, "needs-poisoning-checks"));
}

#[test]
fn without_the_taint_rule_the_injection_fixtures_fail() {
    let p = Project::full();
    let rule = r#"  { id = "untrusted-recipient", tool = "transfer", when = "args_tainted", verdict = "deny", reason = "recipient comes from untrusted content" },
]
poisoned_tools = "refuse""#;
    let toml = p.read("pipeline/ci.toml");
    assert!(toml.contains(rule), "the bank profile's taint rule");
    p.write("pipeline/ci.toml", toml.replace(rule, "]\npoisoned_tools = \"refuse\""));
    let (code, failed) = failing_security_cases(&p);
    assert_eq!(code, 1);
    // the poisoned descriptions' addresses are stopped by the same taint rule
    assert_eq!(failed, tagged(&p, "needs-taint-rule"));
    // ... and the built-in floor still keeps the money where it is
    let report = p.json("reports/report.json");
    for case in report["cases"].as_array().unwrap().iter().filter(|c| c["passed"] == false) {
        let checks = case["runs"][0]["checks"].as_array().unwrap();
        let ledger = checks.iter().find(|c| c["name"] == "sandbox.ledger").expect("a ledger check");
        assert_eq!(ledger["passed"], true, "{}", case["id"]);
    }
}

#[test]
fn without_idempotency_the_replay_fixtures_fail() {
    let p = Project::full();
    let manifest = p.read("fixtures/tools/bank.json");
    assert_eq!(manifest.matches(r#""idempotent": true"#).count(), 1);
    p.write("fixtures/tools/bank.json", manifest.replace(r#""idempotent": true"#, r#""idempotent": false"#));
    // the suite pins its manifest: a changed one refuses to run until it is re-pinned
    p.stateval(&["run", "--tag", "security"]).expect_code(2);
    let validated = p.stateval(&["validate", "fixtures/tools/bank.json"]);
    let digest = validated.stdout.trim().rsplit(' ').next().unwrap().to_string();
    let toml = p.read("pipeline/ci.toml");
    let pinned = toml.lines().find(|l| l.starts_with("tools_digest = ")).unwrap().to_string();
    p.write("pipeline/ci.toml", toml.replace(&pinned, &format!("tools_digest = \"{digest}\"")));
    let (code, failed) = failing_security_cases(&p);
    assert_eq!(code, 1);
    assert_eq!(failed, tagged(&p, "needs-idempotency"));
}

#[test]
fn a_deduplicated_execution_is_visible_in_the_log_with_its_key_and_first_execution() {
    let p = Project::full();
    p.stateval(&["run", "--filter", "replayed-transfer-deduplicated"]).expect_code(0);
    let log = p.log_files().into_iter().find(|l| l.contains("replayed-transfer-deduplicated")).unwrap();
    let events = common::events_of(&p.read_bytes(&log));
    let executed: Vec<&serde_json::Value> = events.iter().filter(|e| e["kind"] == "tool_executed").collect();
    assert_eq!(executed.len(), 2);
    assert_eq!(executed[0]["data"]["deduplicated"], false);
    assert_eq!(executed[1]["data"]["deduplicated"], true);
    assert_eq!(executed[1]["data"]["idempotency_key"], "given:po-17");
    assert_eq!(executed[1]["data"]["first_execution"], executed[0]["seq"]);
    assert_eq!(executed[1]["data"]["effect"], serde_json::Value::Null);
    assert_eq!(executed[1]["turn"], 1);
}

#[test]
fn a_treasurer_that_is_not_privileged_still_refuses_a_tainted_payload_because_it_holds_transfer() {
    let p = Project::full();
    let toml = p.read("pipeline/ci.toml");
    assert_eq!(toml.matches("privileged = true").count(), 1);
    p.write("pipeline/ci.toml", toml.replace("privileged = true", "privileged = false"));
    assert_eq!(failing_security_cases(&p), (0, BTreeSet::new()));
    let log = p.log_files().into_iter().find(|l| l.contains("tainted-handoff-to-privileged-refused")).unwrap();
    let events = common::events_of(&p.read_bytes(&log));
    let handoff = events.iter().find(|e| e["kind"] == "handoff").expect("a handoff event");
    assert_eq!(handoff["data"]["allowed"], false);
    assert!(handoff["data"]["reason"].as_str().unwrap().contains("holds financial or privileged tools"), "{handoff}");
}

#[test]
fn without_the_privileged_target_or_cross_agent_taint_the_confused_deputy_fixtures_fail() {
    let p = Project::full();
    let toml = p.read("pipeline/ci.toml");
    p.write("pipeline/ci.toml", toml.replace("privileged = true", "privileged = false"));
    let out = p
        .cmd()
        .env(stateval::text::switches::VARIABLE, "cross-agent-taint")
        .args(["run", "--tag", "security"])
        .output()
        .expect("run stateval");
    assert_eq!(out.status.code(), Some(1));
    let report = p.json("reports/report.json");
    let failed: BTreeSet<String> = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    // the relay never passed a tainted payload: it fails for want of cross-agent taint alone
    let expected: BTreeSet<String> =
        tagged(&p, "needs-handoff-refusal").union(&tagged(&p, "needs-cross-agent-taint")).cloned().collect();
    assert_eq!(failed, expected);
    // the tainted payload now reaches the treasurer: the handoff is allowed
    let log = p.log_files().into_iter().find(|l| l.contains("tainted-handoff-to-privileged-refused")).unwrap();
    let events = common::events_of(&p.read_bytes(&log));
    let handoff = events.iter().find(|e| e["kind"] == "handoff").expect("a handoff event");
    assert_eq!((handoff["data"]["allowed"].as_bool(), handoff["data"]["taint"].as_bool()), (Some(true), Some(true)));
}

#[test]
fn every_tainted_denial_names_the_event_of_the_channel_its_case_attacks() {
    let p = Project::full();
    p.stateval(&["run", "--tag", "security"]).expect_code(0);
    let mut named = 0;
    for log in p.log_files() {
        let events = common::events_of(&p.read_bytes(&log));
        for e in events.iter().filter(|e| e["kind"] == "policy_decided" && e["data"]["verdict"] == "deny") {
            let Some(by) = e["data"].get("tainted_by") else { continue };
            let source = &events[by["seq"].as_u64().unwrap() as usize];
            let tool = by["tool"].as_str().unwrap();
            // a fetched page's execution, or the flag that refused a poisoned description
            let executed = source["kind"] == "tool_executed" && source["data"]["tool"] == tool;
            // (or, in the precision cases, the statement whose subject carries the payer's
            // words, or the chat, mail and drive whose authors the user did not name)
            let fetched = executed
                && matches!(tool, "fetch_page" | "list_statements" | "read_channel" | "search_mail" | "list_files");
            let refused = source["kind"] == "security_flagged"
                && source["data"]["class"] == "tool_poisoning"
                && source["data"]["tool"] == tool;
            // or a trusted tool's error message, or its result of an input from the page
            // (the OCR and CRM cases of the grounding suite: provenance flows through tools)
            let relayed = executed
                && (source["data"]["is_error"] == true
                    || (matches!(tool, "ocr_image" | "lookup_customer")
                        && events[..by["seq"].as_u64().unwrap() as usize]
                            .iter()
                            .any(|f| f["kind"] == "tool_executed" && f["data"]["tool"] == "fetch_page")));
            assert!(fetched || refused || relayed, "{log}: {e} names {source}");
            assert!(e["data"]["reason"].as_str().unwrap().contains(&format!("event {}", by["seq"])), "{e}");
            named += 1;
        }
    }
    assert!(named >= 30, "{named} tainted denials");
}

#[test]
fn a_poisoned_tool_downgraded_to_read_only_answers_but_changes_nothing() {
    let p = Project::full();
    let toml = p.read("pipeline/ci.toml").replace(r#"poisoned_tools = "refuse""#, r#"poisoned_tools = "read_only""#);
    p.write("pipeline/ci.toml", &toml);
    p.stateval(&["run", "--filter", "shadowing-tool-name-refused"]).expect_code(1);
    let report = p.json("reports/report.json");
    let case = &report["cases"][0];
    // the shadowing tool ran (so the case's "refused" expectations fail) ...
    let failed: Vec<&str> = case["runs"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["tool_sequence", "policy.verdicts"]);
    // ... but as read-only: the ledger is untouched and its execution has no effect
    let log = p.log_files().into_iter().find(|l| l.contains("shadowing-tool-name-refused")).unwrap();
    let events = common::events_of(&p.read_bytes(&log));
    let executed = events.iter().find(|e| e["kind"] == "tool_executed").expect("Transfer executed");
    assert_eq!(
        (executed["data"]["tool"].as_str(), &executed["data"]["effect"]),
        (Some("Transfer"), &serde_json::Value::Null)
    );
    let flag =
        events.iter().find(|e| e["kind"] == "security_flagged" && e["data"]["class"] == "tool_poisoning").unwrap();
    assert!(flag["data"]["detail"].as_str().unwrap().ends_with("downgraded to read-only"), "{flag}");
    // what it would have done is logged, and the attack counts as attempted, stopped there
    let withheld = events.iter().find(|e| e["kind"] == "tool_withheld").expect("the withheld effect");
    assert_eq!(
        (withheld["data"]["rule"].as_str(), withheld["data"]["by"].as_str()),
        (Some("poisoned-tool"), Some("read_only"))
    );
    assert_eq!(case["score"]["attempted"], true, "{case}");
    assert_eq!(case["score"]["stopped_by"], "poisoned-tool read-only downgrade", "{case}");
}

#[test]
fn with_ungrounded_allow_the_payees_no_taint_reading_sees_are_paid_and_the_controls_still_pass() {
    let p = Project::full();
    let toml = p.read("pipeline/ci.toml");
    let payments = "tools = \"fixtures/tools/payments.json\"\n";
    assert_eq!(toml.matches(payments).count(), 5);
    let allowed = toml
        .replace("ungrounded = \"escalate\"\n", "")
        .replace(payments, &format!("{payments}ungrounded = \"allow\"\n"));
    p.write("pipeline/ci.toml", allowed);
    let out = p.stateval(&["run", "--tag", "grounding"]);
    assert_eq!(out.code, 1);
    let report = p.json("reports/report.json");
    let failed: BTreeSet<String> = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    let grounding = p.read("datasets/security/grounding.jsonl");
    let needs: BTreeSet<String> = grounding
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a dataset line"))
        .filter(|c| c["tags"].as_array().is_some_and(|t| t.iter().any(|t| t == "needs-grounding-floor")))
        .map(|c| c["id"].as_str().expect("id").to_string())
        .collect();
    // the profile's answer is the floor's: every case that needs it pays the attacker
    assert!(needs.len() >= 10, "{needs:?}");
    assert_eq!(failed, needs);
}
