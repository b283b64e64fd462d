//! Golden churn by cause, end to end (issue #35 item 3): the default pipeline with its
//! checked-in goldens, one fixture edit (a space appended to a tool description), and
//! what the run, the reports, `stateval golden accept` and `stateval golden review`
//! make of it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{Project, copy_dir};
use serde_json::Value;

const TOOLS_CAUSE: &str = "tools:fixtures/tools/treasury.json";
const PROFILE_CAUSE: &str = "profile:support";

/// The whole default pipeline with the repository's goldens: green as checked in.
fn project() -> Project {
    let p = Project::full();
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("goldens"), &p.join("goldens"));
    p
}

/// Append a space to the first tool description of the treasury manifest.
fn edit_tool_description(p: &Project) {
    let mut manifest = p.json("fixtures/tools/treasury.json");
    let description = manifest["tools"][0]["description"].as_str().expect("a description").to_string();
    manifest["tools"][0]["description"] = Value::from(format!("{description} "));
    p.write("fixtures/tools/treasury.json", serde_json::to_vec_pretty(&manifest).expect("json"));
}

/// Change the support profile's system prompt in the default pipeline.
fn edit_support_prompt(p: &Project) {
    let from = "system = \"You are a help-desk agent. Resolve tickets; keep customers informed.\"";
    let ci = p.read("pipeline/ci.toml");
    assert!(ci.contains(from), "pipeline/ci.toml no longer has the support prompt this test edits");
    p.write("pipeline/ci.toml", ci.replace(from, &from.replace("informed.", "informed. Be brief.")));
}

/// The run's groups from report.json: id → (cases, runs).
fn groups(p: &Project) -> BTreeMap<String, (u64, u64)> {
    let report = p.json("reports/report.json");
    let groups = report["extras"]["golden_groups"]["groups"].as_array().cloned().unwrap_or_default();
    groups
        .iter()
        .map(|g| {
            (g["id"].as_str().expect("id").to_string(), (g["cases"].as_u64().unwrap(), g["runs"].as_u64().unwrap()))
        })
        .collect()
}

/// (agent, case, k) of every run whose golden check failed, from report.json.
fn failed_goldens(p: &Project) -> BTreeSet<(String, String, String, u64)> {
    let report = p.json("reports/report.json");
    let mut out = BTreeSet::new();
    for case in report["cases"].as_array().expect("cases") {
        for run in case["runs"].as_array().expect("runs") {
            if run["checks"].as_array().unwrap().iter().any(|c| c["name"] == "golden" && c["passed"] == false) {
                out.insert((
                    case["agent"].as_str().unwrap().to_string(),
                    case["dataset"].as_str().unwrap().to_string(),
                    case["id"].as_str().unwrap().to_string(),
                    run["index"].as_u64().unwrap(),
                ));
            }
        }
    }
    out
}

fn golden_path(dataset: &str, case: &str, k: u64) -> String {
    format!("goldens/{dataset}/{case}.{k}.jsonl")
}

fn cases_of(runs: &BTreeSet<(String, String, String, u64)>, agent: &str) -> BTreeSet<String> {
    runs.iter().filter(|r| r.0 == agent).map(|r| r.2.clone()).collect()
}

#[test]
fn one_tool_description_edit_is_one_group_naming_the_manifest_and_accepting_it_makes_the_next_run_pass() {
    let p = project();
    edit_tool_description(&p);
    let out = p.stateval(&["run"]);
    out.expect_code(1);

    // every failed golden is a treasury run (the only profile on that manifest), and
    // the one group counts exactly those cases and runs
    let failed = failed_goldens(&p);
    assert!(failed.len() > 1 && failed.iter().all(|r| r.0 == "treasury"), "{failed:#?}");
    let cases = cases_of(&failed, "treasury").len() as u64;
    assert_eq!(groups(&p), BTreeMap::from([(TOOLS_CAUSE.to_string(), (cases, failed.len() as u64))]));

    // the terminal: the group first, its accept command, no line per case, and the
    // gates that failed through goldens alone say so
    let accept = format!("accept: stateval golden accept --cause {TOOLS_CAUSE}");
    let stdout = &out.stdout;
    let (groups_at, tally_at) = (stdout.find("goldens differ for 1 cause"), stdout.find("examples/treasury "));
    assert!(groups_at.is_some() && groups_at < tally_at, "the groups open the summary:\n{stdout}");
    assert!(stdout.contains(&format!("{TOOLS_CAUSE}: {cases} cases ({} runs)", failed.len())), "{stdout}");
    assert!(stdout.contains(&accept), "{stdout}");
    assert!(!stdout.contains("FAIL examples/"), "cases a group accounts for are not listed one by one:\n{stdout}");
    let failed_gates: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL gate")).collect();
    assert!(!failed_gates.is_empty(), "{stdout}");
    for gate in &failed_gates {
        assert!(gate.ends_with("fails only because golden checks failed (with them passing it passes)"), "{gate}");
    }
    // summary.md and the HTML report show the group too, before anything else
    let md = p.read("reports/summary.md");
    let (groups_at, failing_at) = (md.find("### Goldens differ for 1 cause"), md.find("### Failing cases"));
    assert!(groups_at.is_some() && groups_at < failing_at, "{md}");
    assert!(md.contains(&format!("`stateval golden accept --cause {TOOLS_CAUSE}`")), "{md}");
    let html = p.read("reports/report.html");
    let (section, gates) = (html.find("<section id=\"golden-groups\">"), html.find("<section id=\"gates\">"));
    assert!(section.is_some() && section < gates, "the groups come before the gates");

    // accepting re-blesses exactly the goldens of the failed runs, nothing else
    let before = p.snapshot("goldens");
    let accepted = p.stateval(&["golden", "accept", "--cause", TOOLS_CAUSE]);
    accepted.expect_code(0);
    let after = p.snapshot("goldens");
    let changed: BTreeSet<String> = before.keys().filter(|k| before.get(*k) != after.get(*k)).cloned().collect();
    let expected: BTreeSet<String> = failed.iter().map(|(_, d, c, k)| golden_path(d, c, *k)).collect();
    assert_eq!(changed, expected);
    assert_eq!(before.len(), after.len(), "no golden created or removed");
    assert!(accepted.stdout.contains(&format!("{} goldens of {cases} cases", failed.len())), "{}", accepted.stdout);
    let rerun = p.stateval(&["run"]);
    rerun.expect_code(0);
    assert!(!rerun.stdout.contains("goldens differ"), "{}", rerun.stdout);
}

#[test]
fn a_tool_edit_and_a_profile_prompt_edit_are_two_groups_each_accepted_on_its_own() {
    let p = project();
    edit_tool_description(&p);
    edit_support_prompt(&p);
    p.stateval(&["run"]).expect_code(1);
    let failed = failed_goldens(&p);
    let treasury = cases_of(&failed, "treasury").len() as u64;
    let support = cases_of(&failed, "support").len() as u64;
    let runs = |agent: &str| failed.iter().filter(|r| r.0 == agent).count() as u64;
    assert!(treasury > 0 && support > 0);
    assert!(failed.iter().all(|r| r.0 == "treasury" || r.0 == "support"), "{failed:#?}");
    assert_eq!(
        groups(&p),
        BTreeMap::from([
            (TOOLS_CAUSE.to_string(), (treasury, runs("treasury"))),
            (PROFILE_CAUSE.to_string(), (support, runs("support"))),
        ])
    );
    // accepting the profile's group leaves the manifest's failing, alone
    p.stateval(&["golden", "accept", "--cause", PROFILE_CAUSE]).expect_code(0);
    p.stateval(&["run"]).expect_code(1);
    assert_eq!(groups(&p).into_keys().collect::<Vec<_>>(), [TOOLS_CAUSE]);
}

#[test]
fn a_behaviour_change_stays_its_own_group_beside_a_fixture_edit() {
    let p = project();
    edit_tool_description(&p);
    // balance-check's model now answers differently: what the run did changed
    let rec = "fixtures/recordings/balance-check.jsonl";
    let recording = p.read(rec);
    assert!(recording.contains("Your balance is $1,250."));
    p.write(rec, recording.replace("Your balance is $1,250.", "Your balance is $1,250, as of today."));
    p.stateval(&["run"]).expect_code(1);
    let failed = failed_goldens(&p);
    let treasury = cases_of(&failed, "treasury");
    assert!(treasury.contains("balance-check"));
    let groups = groups(&p);
    assert_eq!(groups.get("behaviour"), Some(&(1, 1)), "{groups:#?}");
    assert_eq!(groups.get(TOOLS_CAUSE).map(|g| g.0), Some(treasury.len() as u64 - 1), "{groups:#?}");
    let report = p.json("reports/report.json");
    let behaviour = &report["extras"]["golden_groups"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["id"] == "behaviour")
        .unwrap()["first"];
    assert_eq!(behaviour, &serde_json::json!(["balance-check"]));
    // the behaviour change is listed case by case in the terminal; the others are not
    let out = p.stateval(&["run"]);
    assert!(out.stdout.contains("FAIL examples/treasury :: balance-check"), "{}", out.stdout);
    assert_eq!(out.stdout.matches("FAIL examples/").count(), 1, "{}", out.stdout);

    // accepting the fixture's group leaves the behaviour change failing
    p.stateval(&["golden", "accept", "--cause", TOOLS_CAUSE]).expect_code(0);
    p.stateval(&["run"]).expect_code(1);
    assert_eq!(crate::groups(&p).into_keys().collect::<Vec<_>>(), ["behaviour"]);
}

#[test]
fn review_off_a_terminal_refuses_pointing_at_accept_and_answers_accept_or_reject_per_group() {
    let p = project();
    edit_tool_description(&p);
    edit_support_prompt(&p);
    p.stateval(&["run"]).expect_code(1);
    let before = p.snapshot("goldens");
    // the test's stdin is not a terminal
    let refused = p.stateval(&["golden", "review"]);
    refused.expect_code(2);
    assert!(refused.stderr.contains("stdin is not one") && refused.stderr.contains("stateval golden accept --cause"));
    p.stateval(&["golden", "review", "--answers", "a"]).expect_code(2); // one answer for two causes
    assert_eq!(p.snapshot("goldens"), before, "a refused review writes nothing");

    // groups come most cases first: the treasury manifest, then the support profile
    let review = p.stateval(&["golden", "review", "--answers", "ra"]);
    review.expect_code(0);
    assert!(review.stdout.contains(&format!("[1/2] {TOOLS_CAUSE}")), "{}", review.stdout);
    assert!(review.stdout.contains(&format!("[2/2] {PROFILE_CAUSE}")), "{}", review.stdout);
    assert!(review.stdout.contains("1 accepted, 1 rejected, 0 skipped"), "{}", review.stdout);
    p.stateval(&["run"]).expect_code(1);
    assert_eq!(groups(&p).into_keys().collect::<Vec<_>>(), [TOOLS_CAUSE]);
}

#[test]
fn accepting_an_unknown_cause_names_the_causes_there_are_and_writes_nothing() {
    let p = project();
    edit_tool_description(&p);
    p.stateval(&["run"]).expect_code(1);
    let before = p.snapshot("goldens");
    let out = p.stateval(&["golden", "accept", "--cause", "tools:nope.json"]);
    out.expect_code(2);
    assert!(out.stderr.contains("no golden of") && out.stderr.contains(TOOLS_CAUSE), "{}", out.stderr);
    assert_eq!(p.snapshot("goldens"), before);
    // and with no run at all, it says to run first
    let fresh = project();
    let none = fresh.stateval(&["golden", "accept", "--cause", TOOLS_CAUSE]);
    none.expect_code(2);
    assert!(none.stderr.contains("no finished run"), "{}", none.stderr);
}

/// The agent under test may hold the run directory afterwards: a log it edited (and
/// re-chained, with `cases.jsonl` updated to its new head) must not become a golden.
#[test]
fn a_run_directory_edited_after_the_run_blesses_nothing() {
    let p = project();
    edit_tool_description(&p);
    p.stateval(&["run"]).expect_code(1);
    let before = p.snapshot("goldens");
    let run_dir = format!(".stateval/runs/{}", p.json("reports/report.json")["run_id"].as_str().expect("run id"));
    // the smallest edit: one more byte in cases.jsonl, which the manifest lists
    let cases = p.join(format!("{run_dir}/cases.jsonl"));
    let mut bytes = std::fs::read(&cases).expect("cases");
    bytes.extend_from_slice(b"\n");
    std::fs::write(&cases, bytes).expect("write");
    let out = p.stateval(&["golden", "accept", "--cause", TOOLS_CAUSE]);
    out.expect_code(2);
    assert!(out.stderr.contains("does not verify against its manifest; accepting nothing"), "{}", out.stderr);
    assert_eq!(p.snapshot("goldens"), before, "a golden was written from an edited run");
}
