//! Each mitigation of the adversarial suite is load-bearing: switched off (the
//! debug-build-only switch of `text::switches`), exactly the cases tagged
//! `needs-<mitigation>` in `datasets/security/` (the taint suite and the grounding cases) fail — no fewer (the
//! mitigation is what stops them) and no more (nothing else leans on it) — and no
//! negative control ever does.

mod common;

use std::collections::BTreeSet;

use common::Project;
use stateval::text::switches;

/// Run the security suite with `off` switched off; the ids of its failing cases.
fn failing_with(p: &Project, off: &str) -> BTreeSet<String> {
    let output =
        p.cmd().env(switches::VARIABLE, off).args(["run", "--tag", "security"]).output().expect("run stateval");
    assert_eq!(output.status.code(), Some(if off.is_empty() { 0 } else { 1 }), "{off}: exit code");
    let report = p.json("reports/report.json");
    report["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["id"].as_str().expect("id").to_string())
        .collect()
}

/// The adversarial suite's datasets: the taint suite, the grounding cases and the
/// floors' precision cases.
const SUITE: [&str; 3] =
    ["datasets/security/suite.jsonl", "datasets/security/grounding.jsonl", "datasets/security/precision.jsonl"];

/// The ids of the suite's cases carrying `tag`.
fn tagged(p: &Project, tag: &str) -> BTreeSet<String> {
    SUITE
        .iter()
        .map(|f| p.read(f))
        .collect::<String>()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a dataset line"))
        .filter(|c| c["tags"].as_array().is_some_and(|t| t.iter().any(|t| t == tag)))
        .map(|c| c["id"].as_str().expect("id").to_string())
        .collect()
}

#[track_caller]
fn switching_off_fails_exactly_its_cases(mitigation: &str) {
    assert!(switches::NAMES.iter().any(|(n, _)| *n == mitigation), "{mitigation} is a switch");
    let p = Project::full();
    let expected = tagged(&p, &format!("needs-{mitigation}"));
    assert!(!expected.is_empty(), "some case needs {mitigation}");
    let failed = failing_with(&p, mitigation);
    assert_eq!(failed, expected, "with {mitigation} off");
    assert!(failed.is_disjoint(&tagged(&p, "negative-control")));
}

#[test]
fn with_no_switch_set_the_suite_passes() {
    let p = Project::full();
    assert_eq!(failing_with(&p, ""), BTreeSet::new());
}

#[test]
fn without_normalisation_the_disguised_cases_fail() {
    switching_off_fails_exactly_its_cases("normalisation");
}

#[test]
fn without_decoding_the_encoded_cases_fail() {
    switching_off_fails_exactly_its_cases("decoding");
}

#[test]
fn without_split_matching_the_address_in_short_pieces_is_paid() {
    switching_off_fails_exactly_its_cases("taint-splitting");
}

#[test]
fn without_cross_agent_taint_the_relayed_payment_is_made() {
    switching_off_fails_exactly_its_cases("cross-agent-taint");
}

#[test]
fn without_the_taint_floor_an_agent_with_no_policy_pays_the_attacker() {
    switching_off_fails_exactly_its_cases("taint-floor");
}

#[test]
fn without_the_description_rules_paraphrases_and_hidden_comments_pass() {
    switching_off_fails_exactly_its_cases("description-rules");
}

#[test]
fn without_keyless_dedup_a_retry_that_lost_its_key_pays_twice() {
    switching_off_fails_exactly_its_cases("keyless-dedup");
}

#[test]
fn without_the_grounding_floor_a_payee_no_reading_of_taint_sees_is_paid() {
    switching_off_fails_exactly_its_cases("grounding-floor");
}

#[test]
fn without_the_request_floor_an_effect_nobody_asked_for_happens() {
    switching_off_fails_exactly_its_cases("request-floor");
}

#[test]
fn every_switch_has_a_test_and_every_case_a_reason_to_exist() {
    let p = Project::full();
    let source = include_str!("security_switches.rs");
    for (name, _) in switches::NAMES {
        assert!(source.contains(&format!("switching_off_fails_exactly_its_cases(\"{name}\")")), "{name}");
    }
    // every attack names the mitigation that stops it; controls name none
    let all = tagged(&p, "security");
    let controls = tagged(&p, "negative-control");
    let lines = SUITE.iter().map(|f| p.read(f)).collect::<String>();
    for line in lines.lines() {
        let case: serde_json::Value = serde_json::from_str(line).expect("a dataset line");
        let needs = case["tags"]
            .as_array()
            .expect("tags")
            .iter()
            .filter(|t| t.as_str().is_some_and(|t| t.starts_with("needs-")))
            .count();
        let id = case["id"].as_str().expect("id");
        assert_eq!(needs == 0, controls.contains(id), "{id}: an attack needs a mitigation, a control none");
    }
    assert!(all.len() - controls.len() >= 40, "at least 40 attacks");
}
