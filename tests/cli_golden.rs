//! Golden traces end to end: `stateval run --bless` writes them, `stateval run` compares
//! every run with its golden, `stateval diff` explains a difference, and the goldens
//! checked in under `goldens/` match what the example datasets do today.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{Project, copy_dir, differing};
use serde_json::Value;

/// Goldens the CI pipeline writes: 11 cases, two of them with 2 recorded runs.
const CI_GOLDENS: usize = 17;
const PAY_ALICE_GOLDEN: &str = "goldens/examples/treasury/pay-known-payee.0.jsonl";
/// The command that re-blesses the checked-in goldens (README, failure messages).
const REBLESS: &str = "cargo run -- run --bless";

/// Every `golden` check of the last run: (case, k, passed, reason).
fn golden_checks(p: &Project) -> Vec<(String, u64, bool, String)> {
    let report = p.json("reports/report.json");
    let mut out = Vec::new();
    for case in report["cases"].as_array().expect("cases") {
        for run in case["runs"].as_array().expect("runs") {
            let checks = run["checks"].as_array().expect("checks");
            let golden: Vec<&Value> = checks.iter().filter(|c| c["name"] == "golden").collect();
            assert_eq!(golden.len(), 1, "one golden check per run: {checks:#?}");
            out.push((
                case["id"].as_str().expect("id").to_string(),
                run["index"].as_u64().expect("index"),
                golden[0]["passed"].as_bool().expect("passed"),
                golden[0]["reason"].as_str().expect("reason").to_string(),
            ));
        }
    }
    out
}

/// A project whose goldens were just blessed.
fn blessed() -> Project {
    let p = Project::new();
    let out = p.stateval(&["run", "--bless"]);
    out.expect_code(0);
    assert!(
        out.stdout.contains("goldens: 17 blessed in goldens/ (17 created, 0 updated, 0 unchanged)"),
        "{}",
        out.stdout
    );
    p
}

#[test]
fn bless_then_run_is_green_and_every_run_is_compared_with_its_golden() {
    let p = blessed();
    assert_eq!(p.files_under("goldens").len(), CI_GOLDENS, "{:#?}", p.files_under("goldens"));
    for golden in p.files_under("goldens") {
        p.stateval(&["verify", &golden]).expect_code(0);
    }
    p.stateval(&["run"]).expect_code(0);
    let checks = golden_checks(&p);
    assert_eq!(checks.len(), CI_GOLDENS);
    for (case, k, passed, reason) in &checks {
        assert!(*passed && reason.starts_with("identical to the golden"), "{case}.{k}: {reason}");
    }
    // the JSON report names the golden each run was compared with
    let report = p.json("reports/report.json");
    let first_check = &report["cases"][0]["runs"][0]["checks"];
    let golden = first_check.as_array().unwrap().iter().find(|c| c["name"] == "golden").unwrap();
    assert_eq!(golden["expected"], "goldens/examples/recovery/status-hang-falls-back-to-cache.0.jsonl");
}

#[test]
fn goldens_are_byte_identical_when_blessed_twice() {
    let p = blessed();
    let first = p.snapshot("goldens");
    let out = p.stateval(&["run", "--bless"]);
    out.expect_code(0);
    assert!(out.stdout.contains("(0 created, 0 updated, 17 unchanged)"), "{}", out.stdout);
    assert_eq!(differing(&first, &p.snapshot("goldens")), Vec::<String>::new());
}

/// Normalisation rewrites no field (src/golden/normalize.rs) because nothing in a log
/// depends on where or how the project is checked out: this pins that decision.
#[test]
fn the_same_inputs_give_byte_identical_goldens_from_another_path_working_directory_and_line_endings() {
    let a = blessed();
    let b = Project::new();
    assert_ne!(a.path(), b.path());
    for dir in ["pipeline", "datasets", "fixtures"] {
        for rel in b.files_under(dir) {
            // text files only: a binary fixture (an Inspect AI .eval zip) has no lines
            let Ok(text) = String::from_utf8(b.read_bytes(&rel)) else { continue };
            b.write(&rel, text.replace('\n', "\r\n"));
        }
    }
    // from another working directory, with the pipeline named by its absolute path
    let pipeline = b.join("pipeline/ci.toml");
    let elsewhere = Project::empty();
    let out = elsewhere.cmd().args(["run", "--bless"]).arg(&pipeline).output().expect("run stateval");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(elsewhere.files_under("").is_empty(), "nothing lands in the working directory");
    assert_eq!(differing(&a.snapshot("goldens"), &b.snapshot("goldens")), Vec::<String>::new());
}

#[test]
fn a_golden_edited_by_hand_is_rejected_by_verify_and_fails_the_run_with_a_clear_message() {
    let p = blessed();
    let text = p.read(PAY_ALICE_GOLDEN);
    assert_eq!(text.matches("Sent $100 to Alice Smith.").count(), 2, "fixture changed");
    p.write(PAY_ALICE_GOLDEN, text.replace("Sent $100 to Alice Smith.", "Sent $1000 to Alice Smith."));

    let verify = p.stateval(&["verify", PAY_ALICE_GOLDEN]);
    verify.expect_code(1);
    assert!(verify.stderr.contains("hash does not match"), "{}", verify.stderr);

    let run = p.stateval(&["run"]);
    run.expect_code(1);
    let expected =
        format!("golden: golden {PAY_ALICE_GOLDEN} does not verify (line 20: event seq 19: hash does not match");
    assert!(run.stdout.contains(&expected), "{}", run.stdout);
    assert!(run.stdout.contains("`stateval run --bless` rewrites it"), "{}", run.stdout);
    let junit = p.read("reports/junit.xml");
    assert!(junit.contains(&format!("golden {PAY_ALICE_GOLDEN} does not verify")), "{junit}");
    // only that case fails
    let failing: Vec<String> = golden_checks(&p).into_iter().filter(|c| !c.2).map(|c| c.0).collect();
    assert_eq!(failing, ["pay-known-payee"]);
}

#[test]
fn a_run_that_differs_from_its_golden_fails_its_case_and_junit_and_tap_carry_the_first_divergence() {
    let p = blessed();
    let recording = "fixtures/recordings/pay-alice.jsonl";
    p.edit_line(recording, 4, "Sent $100 to Alice Smith.", "Sent $100 to Alice.");
    p.stateval(&["run"]).expect_code(1);
    let divergence = "seq 19 (turn 1, model_called): payload changed at /data/response/content: \
                      \"Sent $100 to Alice Smith.\" → \"Sent $100 to Alice.\"";
    let junit = p.read("reports/junit.xml").replace("&quot;", "\"");
    assert!(junit.contains(divergence), "{junit}");
    assert!(junit.contains("3 differences (3 payload changed); inputs changed: recording"), "{junit}");
    let tap = p.read("reports/results.tap");
    assert!(tap.contains("not ok 10 - examples/treasury :: pay-known-payee"), "{tap}");
    assert!(tap.contains(divergence) || tap.contains(&divergence.replace('"', "\\\"")), "{tap}");

    // the command the message suggests shows the same first divergence
    let run_id = p.json("reports/report.json")["run_id"].as_str().expect("run id").to_string();
    let log = format!(".stateval/runs/{run_id}/pay-known-payee/0.jsonl");
    assert!(junit.contains(&format!("`stateval diff {PAY_ALICE_GOLDEN} {log}` shows them")), "{junit}");
    let diff = p.stateval(&["diff", PAY_ALICE_GOLDEN, &log]);
    diff.expect_code(1);
    assert!(diff.stdout.contains(&format!("first divergence: {divergence}")), "{}", diff.stdout);
}

/// `stateval ARGS` with `CI=true` in its environment, as CI runs it.
fn in_ci(p: &Project, args: &[&str]) -> common::Outcome {
    let output = p.cmd().args(args).env("CI", "true").output().expect("run stateval");
    common::Outcome {
        code: output.status.code().expect("exited normally"),
        stdout: String::from_utf8(output.stdout).expect("UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("UTF-8"),
    }
}

/// The goldens the summary lists as missing, after its `goldens: N runs have no golden` line.
fn listed_missing(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip_while(|l| !(l.starts_with("goldens: ") && l.contains(" no golden in ")))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn the_bless_command_the_summary_gives_names_a_pipeline_that_is_not_the_default() {
    // `stateval run --bless` would bless pipeline/ci.toml, not the pipeline that ran
    let p = Project::new();
    p.write("pipeline/mine.toml", p.read("pipeline/ci.toml"));
    let out = p.stateval(&["run", "pipeline/mine.toml"]);
    out.expect_code(0);
    assert!(out.stdout.contains("`stateval run pipeline/mine.toml --bless` writes them):"), "{}", out.stdout);
    let listed = listed_missing(&out.stdout);
    assert!(!listed.is_empty(), "{}", out.stdout);
    p.stateval(&["run", "pipeline/mine.toml", "--bless"]).expect_code(0);
    for golden in &listed {
        assert!(p.exists(golden), "the command given wrote {golden}");
    }
}

#[test]
fn outside_ci_the_summary_names_every_missing_golden_and_bless_writes_each_where_it_said() {
    let p = Project::new();
    let out = p.stateval(&["run"]);
    out.expect_code(0);
    assert!(
        out.stdout.contains(
            "goldens: 17 runs have no golden in goldens/ (they pass for now, and fail under CI; \
             `stateval run --bless` writes them):"
        ),
        "{}",
        out.stdout
    );
    let listed = listed_missing(&out.stdout);
    let expected: Vec<String> = golden_checks(&p)
        .iter()
        .map(|(case, k, _, _)| {
            let report = p.json("reports/report.json");
            let dataset = report["cases"].as_array().unwrap().iter().find(|c| c["id"] == *case).unwrap()["dataset"]
                .as_str()
                .unwrap()
                .to_string();
            format!("goldens/{dataset}/{case}.{k}.jsonl")
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(listed, expected);
    // --bless writes every one of them, exactly where the summary said
    let bless = p.stateval(&["run", "--bless"]);
    bless.expect_code(0);
    assert!(bless.stdout.contains("goldens: 17 blessed in goldens/ (17 created"), "{}", bless.stdout);
    assert_eq!(p.files_under("goldens"), listed);
    // with every golden in place, the summary has nothing to list
    let again = p.stateval(&["run"]);
    again.expect_code(0);
    assert!(!again.stdout.contains("no golden"), "{}", again.stdout);
}

#[test]
fn under_ci_a_run_without_a_golden_fails_naming_it_unless_the_pipeline_keeps_none() {
    let p = Project::new();
    let out = in_ci(&p, &["run"]);
    out.expect_code(1);
    let checks = golden_checks(&p);
    assert_eq!(checks.len(), CI_GOLDENS);
    assert!(checks.iter().all(|c| !c.2), "{checks:#?}");
    let reason = "no golden: goldens/examples/support/resolve-login-ticket.0.jsonl does not exist, and under CI \
                  (CI is set) every run needs one";
    assert!(out.stdout.contains(reason), "{}", out.stdout);
    assert!(p.read("reports/junit.xml").contains(reason), "JUnit names the golden");
    assert_eq!(listed_missing(&out.stdout).len(), CI_GOLDENS, "{}", out.stdout);

    // a suite that keeps no goldens says so, and passes under CI as it does elsewhere
    let toml = p.read("pipeline/ci.toml");
    p.write("pipeline/ci.toml", format!("{toml}\n[goldens]\nrequired = false\n"));
    let out = in_ci(&p, &["run"]);
    out.expect_code(0);
    assert!(golden_checks(&p).iter().all(|c| c.2 && c.3 == "no golden"));
    assert!(listed_missing(&out.stdout).is_empty(), "{}", out.stdout);
}

#[test]
fn a_dataset_outside_the_project_has_its_goldens_under_the_goldens_directory_as_the_summary_says() {
    let p = Project::new();
    let elsewhere = Project::empty();
    let case = r#"{"id":"hello-from-elsewhere","agent":"treasury","turns":["Hi"],"recordings":[{"responses":[{"response":{"content":"Hello."}}]}],"expect":[{"target":"final_response","matcher":{"contains":"Hello"}}]}"#;
    elsewhere.write("suite.jsonl", format!("{case}\n"));
    let pattern = elsewhere.join("suite.jsonl").to_string_lossy().into_owned();
    let toml = p.read("pipeline/ci.toml");
    let datasets = r#"datasets = ["datasets/examples/*.jsonl"]"#;
    assert_eq!(toml.matches(datasets).count(), 1, "fixture changed");
    p.write(
        "pipeline/ci.toml",
        toml.replace(datasets, &format!(r#"datasets = ["datasets/examples/*.jsonl", "{pattern}"]"#)),
    );

    let out = p.stateval(&["run"]);
    out.expect_code(0);
    assert!(
        listed_missing(&out.stdout).contains(&"goldens/suite/hello-from-elsewhere.0.jsonl".to_string()),
        "{}",
        out.stdout
    );
    let bless = p.stateval(&["run", "--bless"]);
    bless.expect_code(0);
    assert!(bless.stdout.contains("goldens: 18 blessed in goldens/ (18 created"), "{}", bless.stdout);
    assert!(p.exists("goldens/suite/hello-from-elsewhere.0.jsonl"), "{:#?}", p.files_under("goldens"));
    assert_eq!(elsewhere.files_under(""), ["suite.jsonl"], "nothing is written beside the dataset");
    p.stateval(&["run"]).expect_code(0);
    let checks = golden_checks(&p);
    let mine = checks.iter().find(|c| c.0 == "hello-from-elsewhere").unwrap();
    assert!(mine.2 && mine.3.starts_with("identical to the golden"), "{mine:?}");
}

#[test]
fn a_run_without_a_golden_passes_as_no_golden_unless_the_pipeline_requires_goldens() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let checks = golden_checks(&p);
    assert_eq!(checks.len(), CI_GOLDENS);
    assert!(checks.iter().all(|c| c.2 && c.3 == "no golden"), "{checks:#?}");

    let toml = p.read("pipeline/ci.toml");
    p.write("pipeline/ci.toml", format!("{toml}\n[goldens]\nrequired = true\n"));
    // `[pipeline] goldens = "goldens"` still names the directory
    let run = p.stateval(&["run"]);
    run.expect_code(1);
    assert!(run.stdout.contains("no golden: goldens/examples/support/resolve-login-ticket.0.jsonl does not exist"));
    assert!(golden_checks(&p).iter().all(|c| !c.2));
}

#[test]
fn bless_is_refused_when_ci_is_true_unless_explicitly_allowed() {
    let p = Project::new();
    let out = p.cmd().args(["run", "--bless"]).env("CI", "true").output().expect("run stateval");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to bless goldens under CI") && stderr.contains("--allow-bless-in-ci"),
        "{stderr}"
    );
    assert!(!p.exists("goldens") && !p.exists(".stateval"), "nothing ran");

    let out = p.cmd().args(["run", "--bless", "--allow-bless-in-ci"]).env("CI", "true").output().expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(p.files_under("goldens").len(), CI_GOLDENS);
    // comparing under CI is what CI is for
    let out = p.cmd().args(["run"]).env("CI", "true").output().expect("run");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn diff_exits_0_for_identical_logs_1_for_different_ones_and_2_for_one_that_does_not_verify() {
    let p = blessed();
    let other = "goldens/examples/treasury/balance-check.0.jsonl";
    let same = p.stateval(&["diff", PAY_ALICE_GOLDEN, PAY_ALICE_GOLDEN]);
    same.expect_code(0);
    assert!(same.stdout.contains("identical: 22 events"), "{}", same.stdout);

    let json = p.stateval(&["diff", "--format", "json", PAY_ALICE_GOLDEN, other]);
    json.expect_code(1);
    let findings: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(findings["identical"], false);
    assert_eq!(findings["golden"]["events"], 22);
    assert!(findings["first_divergence"]["seq"].is_u64());
    let total: u64 = findings["counts"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(total as usize, findings["differences"].as_array().unwrap().len());

    let text = p.read(other);
    p.write("edited.jsonl", text.replacen("\"run\":0", "\"run\":1", 1));
    let bad = p.stateval(&["diff", PAY_ALICE_GOLDEN, "edited.jsonl"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("actual log does not verify: edited.jsonl:1: event seq 0"), "{}", bad.stderr);
    p.stateval(&["diff", "missing.jsonl", other]).expect_code(2);
}

/// The goldens checked in under `goldens/` are what the example datasets do today.
/// After an intended change of behaviour, re-bless them (`cargo run -- run --bless`)
/// and review the diff of `goldens/` in the PR.
#[test]
fn the_checked_in_goldens_cover_every_example_run_and_match_a_fresh_run() {
    let p = Project::full();
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("goldens"), &p.join("goldens"));
    let out = p.stateval(&["run"]);
    let checks = golden_checks(&p);
    let stale: Vec<String> =
        checks.iter().filter(|c| !c.3.starts_with("identical")).map(|c| format!("{}.{}: {}", c.0, c.1, c.3)).collect();
    assert!(stale.is_empty(), "goldens/ is stale; if the change is intended, re-bless with `{REBLESS}`:\n{stale:#?}");
    out.expect_code(0);
    let cases: BTreeSet<&str> = checks.iter().map(|c| c.0.as_str()).collect();
    let report = p.json("reports/report.json");
    let every_case: BTreeSet<&str> =
        report["cases"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(cases, every_case);
    // and every golden there is a run of an example case; the goldens of the other
    // pipelines' suites are checked by their own tests (cli_external, cli_graders,
    // cli_frameworks)
    const OTHER_PIPELINES: [&str; 3] = ["goldens/agents/", "goldens/graders/", "goldens/frameworks/"];
    let goldens: Vec<String> = p
        .files_under("goldens")
        .into_iter()
        .filter(|f| f.ends_with(".jsonl") && !OTHER_PIPELINES.iter().any(|d| f.starts_with(d)))
        .collect();
    assert_eq!(goldens.len(), checks.len(), "goldens/ holds a golden of no run: {goldens:#?}");
}
