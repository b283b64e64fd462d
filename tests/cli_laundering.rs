//! Laundering, end to end: the agent under test runs with stateval's user id, so it can
//! leave a forged run in the store — a failing run rewritten to pass, consistent enough
//! to verify against its own manifest (verdict files edited, the manifest recomputed
//! with stateval's own `RunManifest`). Nothing may turn that into a signed pass or a
//! golden: `run --reuse` and `merge` with a key take over only runs that key signed,
//! `golden accept` takes goldens only from a run it can vouch for, `report` says
//! the run is unsigned, and `sign` signs only a run that verifies against the root its
//! own step printed.

mod common;

use std::path::Path;

use common::{Project, copy_dir};
use serde_json::Value;
use stateval::evidence::{FileEntry, RunManifest};

/// Two cases of the treasury agent: one passes, one fails on its expectation. Built
/// from `datasets/failing/mixed.jsonl`, so the failure is genuine.
fn project() -> Project {
    let p = Project::new();
    let mixed = p.read("datasets/failing/mixed.jsonl");
    let pick = |id: &str| {
        mixed.lines().find(|l| l.contains(&format!("\"id\":\"{id}\""))).unwrap_or_else(|| panic!("no case {id}"))
    };
    p.write("datasets/forge/cases.jsonl", format!("{}\n{}\n", pick("passes-alongside"), pick("wrong-expectation")));
    let failing = p.read("pipeline/failing.toml");
    let forge = failing
        .replace("name = \"failing\"", "name = \"forge\"")
        .replace("datasets/failing/*.jsonl", "datasets/forge/*.jsonl")
        .replace("reports/failing/", "reports/forge/");
    p.write("pipeline/forge.toml", forge);
    p
}

const PIPELINE: &str = "pipeline/forge.toml";

/// `stateval ARGS` with `STATEVAL_SIGNING_KEY` set to `key` (a key file), or unset.
fn stateval(p: &Project, key: Option<&str>, args: &[&str]) -> common::Outcome {
    let mut cmd = p.cmd();
    match key {
        Some(key) => cmd.env("STATEVAL_SIGNING_KEY", p.join(key)),
        None => cmd.env_remove("STATEVAL_SIGNING_KEY"),
    };
    let out = cmd.args(args).output().expect("run stateval");
    common::Outcome {
        code: out.status.code().expect("exited"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `keys/<name>.key` and `keys/<name>.pub`.
fn keygen(p: &Project, name: &str) -> (String, String) {
    stateval(p, None, &["keygen", "-o", &format!("keys/{name}")]).expect_code(0);
    (format!("keys/{name}.key"), format!("keys/{name}.pub"))
}

/// The only run directory under `store` (relative to the project).
fn only_run(p: &Project, store: &str) -> String {
    let runs: Vec<String> = std::fs::read_dir(p.join(format!("{store}/runs")))
        .expect("runs")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    format!("{store}/runs/{}", runs[0])
}

/// The root a command's output printed (`root blake3:… (…)`).
fn printed_root(stdout: &str) -> String {
    let line = stdout.lines().find(|l| l.starts_with("root blake3:")).unwrap_or_else(|| panic!("no root: {stdout}"));
    line.split_whitespace().nth(1).expect("the root").to_string()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json")
}

/// Rewrite the run (or shard) in `dir` to say every case and gate passed, as an
/// attacker without the key would: every verdict file edited to agree with every
/// other, and the manifest recomputed with stateval's own code, so that the run
/// verifies against its own manifest. The logs are the run's own (the matchers that
/// failed on them are in the pipeline, which verify cannot re-run).
fn forge_a_pass(dir: &Path) {
    let cases = std::fs::read_to_string(dir.join("cases.jsonl")).expect("cases.jsonl");
    let mut forged = String::new();
    for line in cases.lines() {
        let mut case: Value = serde_json::from_str(line).expect("a case");
        for run in case["runs"].as_array_mut().expect("runs") {
            for check in run["checks"].as_array_mut().expect("checks") {
                check["passed"] = Value::Bool(true);
            }
            run["passed"] = Value::Bool(true);
        }
        if let Some(blocks) = case.get_mut("blocks").and_then(Value::as_array_mut) {
            blocks.iter_mut().for_each(|b| b["passed"] = Value::Bool(true));
        }
        case["passed"] = Value::Bool(true);
        forged.push_str(&serde_json::to_string(&case).expect("json"));
        forged.push('\n');
    }
    std::fs::write(dir.join("cases.jsonl"), forged).expect("write cases");

    let verdicts = std::fs::read_to_string(dir.join("verdicts.jsonl")).expect("verdicts.jsonl");
    let mut forged = String::new();
    for line in verdicts.lines() {
        let mut verdict: Value = serde_json::from_str(line).expect("a verdict");
        verdict["passed"] = Value::Bool(true);
        forged.push_str(&serde_json::to_string(&verdict).expect("json"));
        forged.push('\n');
    }
    std::fs::write(dir.join("verdicts.jsonl"), forged).expect("write verdicts");

    if dir.join("suite.json").exists() {
        let mut suite = read_json(&dir.join("suite.json"));
        for gate in suite["gates"].as_array_mut().expect("gates") {
            let cases = gate["cases"].clone();
            gate["passed_cases"] = cases.clone();
            gate["pass_rate"] = Value::from(1.0);
            gate["passed"] = Value::Bool(true);
            gate["reason"] =
                Value::from(format!("default: {cases}/{cases} passed (100.0 %), meets min_pass_rate 100.0 %"));
        }
        suite["passed"] = Value::Bool(true);
        std::fs::write(dir.join("suite.json"), serde_json::to_vec_pretty(&suite).expect("json")).expect("write suite");
    }

    let mut manifest = RunManifest::read(dir).expect("the run's manifest");
    manifest.passed = true;
    manifest.files = manifest.files.iter().map(|f| FileEntry::of(dir, &f.path).expect("a verdict file")).collect();
    manifest.write(dir).expect("write the manifest");
}

/// A genuine failing run, forged to pass: (project, run directory).
fn forged_run() -> (Project, String) {
    let p = project();
    stateval(&p, None, &["run", PIPELINE]).expect_code(1);
    let run = only_run(&p, ".stateval");
    forge_a_pass(&p.join(&run));
    // the forgery holds up to everything but a key
    stateval(&p, None, &["verify", &run]).expect_code(0);
    (p, run)
}

#[test]
fn reuse_with_a_key_replays_the_cases_of_an_unsigned_forgery_and_the_signed_run_still_fails() {
    let (p, _) = forged_run();
    let (key, public) = keygen(&p, "ci");
    let out = stateval(&p, Some(&key), &["run", PIPELINE, "--reuse", ".stateval"]);
    // genuine: 1 of 2 cases passes, so the gate fails
    out.expect_code(1);
    assert!(out.stdout.contains("reused 0 of 2 cases"), "{}", out.stdout);
    assert!(out.stdout.contains("its earlier run is not signed by this run's key"), "{}", out.stdout);
    let run = only_run(&p, ".stateval");
    stateval(&p, None, &["verify", &run, "--pubkey", &public]).expect_code(0);
    let report = p.json("reports/forge/report.json");
    assert_eq!(report["passed"], false);
    assert_eq!(report["signature"], format!("signed by {}", p.read(&public).trim()));
}

#[test]
fn reuse_takes_over_a_run_its_own_key_signed_and_without_a_key_says_it_takes_unsigned_runs() {
    let p = project();
    let (key, _) = keygen(&p, "ci");
    stateval(&p, Some(&key), &["run", PIPELINE]).expect_code(1);
    let out = stateval(&p, Some(&key), &["run", PIPELINE, "--reuse", ".stateval"]);
    out.expect_code(1);
    assert!(out.stdout.contains("reused 2 of 2 cases"), "{}", out.stdout);
    assert!(!out.stdout.contains("taking over unsigned"), "{}", out.stdout);

    let out = stateval(&p, None, &["run", PIPELINE, "--reuse", ".stateval"]);
    out.expect_code(1);
    assert!(out.stdout.contains("reused 2 of 2 cases"), "{}", out.stdout);
    assert!(out.stdout.contains("--reuse: taking over unsigned runs"), "{}", out.stdout);
}

/// Shards `shards/1` and `shards/2` of the forge pipeline (slice: one case each; the
/// failing case is in shard 2), run with `key`.
fn shards(p: &Project, key: Option<&str>) {
    for i in 1..=2 {
        let out =
            stateval(p, key, &["run", PIPELINE, "--shard", &format!("slice:{i}/2"), "--out", &format!("shards/{i}")]);
        out.expect_code(0);
    }
}

#[test]
fn a_merge_with_a_key_refuses_a_forged_shard_unsigned_or_signed_by_another_key_naming_it() {
    let p = project();
    let (key, public) = keygen(&p, "ci");
    let (other, _) = keygen(&p, "attacker");
    shards(&p, Some(&key));
    // signed by the merge's own key: taken over, and the merged run is signed
    let honest = ["merge", "--pipeline", PIPELINE, "--out", "honest", "shards/1", "shards/2"];
    let out = stateval(&p, Some(&key), &honest);
    out.expect_code(1);
    assert!(!out.stdout.contains("taking over unsigned"), "{}", out.stdout);
    stateval(&p, None, &["verify", &only_run(&p, "honest"), "--pubkey", &public]).expect_code(0);

    let shard = only_run(&p, "shards/2");
    forge_a_pass(&p.join(&shard));
    std::fs::remove_file(p.join(&shard).join("manifest.sig")).expect("the shard was signed");
    stateval(&p, None, &["verify", &shard]).expect_code(0);

    let args = ["merge", "--pipeline", PIPELINE, "shards/1", "shards/2"];
    let out = stateval(&p, Some(&key), &args);
    out.expect_code(2);
    assert!(out.stderr.contains(&format!("shard {shard}: not signed")), "{}", out.stderr);
    assert!(!p.exists("reports/forge/report.json"), "a refused merge renders nothing");

    // signed with a key of the attacker's own: still not the merge's key
    let root = RunManifest::read(&p.join(&shard)).expect("manifest").root().to_string();
    stateval(&p, Some(&other), &["sign", &shard, "--root", &root]).expect_code(0);
    let out = stateval(&p, Some(&key), &args);
    out.expect_code(2);
    assert!(out.stderr.contains(&format!("shard {shard}: its manifest.sig is not a signature")), "{}", out.stderr);
}

#[test]
fn a_merge_without_a_key_signs_nothing_and_sign_then_signs_the_merged_run() {
    let p = project();
    let (key, public) = keygen(&p, "ci");
    shards(&p, None);
    let out = stateval(&p, None, &["merge", "--pipeline", PIPELINE, "--out", "merged", "shards/1", "shards/2"]);
    out.expect_code(1);
    assert!(out.stdout.contains("merge: taking over unsigned shards"), "{}", out.stdout);
    let run = only_run(&p, "merged");
    assert!(!p.exists(format!("{run}/manifest.sig")), "a merge without a key signs nothing");
    assert_eq!(p.json("reports/forge/report.json")["signature"], "unsigned");

    // the signing step of its own: the merge's printed root, the merged store
    let root = printed_root(&out.stdout);
    let signed = stateval(&p, Some(&key), &["sign", "merged", "--root", &root]);
    signed.expect_code(0);
    assert!(signed.stdout.contains(&format!("signed {run}: root {root}")), "{}", signed.stdout);
    stateval(&p, None, &["verify", &run, "--root", &root, "--pubkey", &public]).expect_code(0);
}

#[test]
fn golden_accept_refuses_a_planted_run_with_or_without_a_key() {
    // a run with golden churn, made in another copy of the project
    let elsewhere = project();
    stateval(&elsewhere, None, &["run", PIPELINE, "--bless"]).expect_code(1);
    let blessed = only_run(&elsewhere, ".stateval");
    std::fs::remove_dir_all(elsewhere.join(&blessed)).expect("the blessing run goes: one run to plant");
    let tools = "fixtures/tools/treasury.json";
    let mut manifest = elsewhere.json(tools);
    let description = manifest["tools"][0]["description"].as_str().expect("a description").to_string();
    manifest["tools"][0]["description"] = Value::from(format!("{description} "));
    elsewhere.write(tools, serde_json::to_vec_pretty(&manifest).expect("json"));
    stateval(&elsewhere, None, &["run", PIPELINE]).expect_code(1);
    let cause = format!("tools:{tools}");
    let accept = ["golden", "accept", PIPELINE, "--cause", &cause];

    // planted in this project's store, beside no run of its own: it verifies
    let p = project();
    copy_dir(&elsewhere.join("goldens"), &p.join("goldens"));
    p.write(tools, elsewhere.read_bytes(tools));
    let planted = only_run(&elsewhere, ".stateval");
    copy_dir(&elsewhere.join(&planted), &p.join(&planted));
    stateval(&p, None, &["verify", &planted]).expect_code(0);
    let before = p.snapshot("goldens");

    let out = stateval(&p, None, &accept);
    out.expect_code(2);
    assert!(out.stderr.contains("no finished run"), "{}", out.stderr);
    let out = stateval(&p, None, &[&accept[..], &["--run", &planted]].concat());
    out.expect_code(2);
    assert!(out.stderr.contains("not a finished run of this store's catalog"), "{}", out.stderr);
    let (key, _) = keygen(&p, "ci");
    let out = stateval(&p, Some(&key), &[&accept[..], &["--run", &planted]].concat());
    out.expect_code(2);
    assert!(out.stderr.contains(&format!("{planted}: not signed")), "{}", out.stderr);
    assert_eq!(p.snapshot("goldens"), before, "a golden was written from a planted run");

    // where the run was made, the catalog vouches for it
    stateval(&elsewhere, None, &accept).expect_code(0);
}

#[test]
fn report_says_a_forged_run_is_unsigned_in_every_format_and_refuses_it_with_a_pubkey() {
    let (p, run) = forged_run();
    let (_, public) = keygen(&p, "ci");
    let out = stateval(
        &p,
        None,
        &[
            "report",
            &run,
            "--json",
            "out/r.json",
            "--junit",
            "out/j.xml",
            "--tap",
            "out/r.tap",
            "--markdown",
            "out/s.md",
            "--html",
            "out/r.html",
        ],
    );
    out.expect_code(0);
    assert!(out.stdout.contains("signature: unsigned"), "{}", out.stdout);
    assert_eq!(p.json("out/r.json")["signature"], "unsigned");
    assert!(p.read("out/j.xml").contains("<property name=\"signature\" value=\"unsigned\"/>"));
    assert!(p.read("out/r.tap").contains("\n# signature unsigned\n"));
    assert!(p.read("out/s.md").contains("· `unsigned`"));
    assert!(p.read("out/r.html").contains("· <code>unsigned</code>"));

    let out = stateval(&p, None, &["report", &run, "--json", "out/k.json", "--pubkey", &public]);
    out.expect_code(2);
    assert!(out.stderr.contains("manifest.sig: missing"), "{}", out.stderr);
    assert!(!p.exists("out/k.json"));
}

#[test]
fn sign_refuses_a_run_that_does_not_verify_against_the_printed_root_and_signs_one_that_does() {
    let p = project();
    let (key, public) = keygen(&p, "ci");
    let out = stateval(&p, None, &["run", PIPELINE]);
    out.expect_code(1);
    let root = printed_root(&out.stdout);
    let run = only_run(&p, ".stateval");

    let unset = stateval(&p, None, &["sign", &run, "--root", &root]);
    unset.expect_code(2);
    assert!(unset.stderr.contains("STATEVAL_SIGNING_KEY is not set"), "{}", unset.stderr);

    // forged between the run and the signing step: its manifest no longer has the root
    let saved = p.join("saved");
    copy_dir(&p.join(&run), &saved);
    forge_a_pass(&p.join(&run));
    let out = stateval(&p, Some(&key), &["sign", &run, "--root", &root]);
    out.expect_code(2);
    assert!(out.stderr.contains("does not verify against --root"), "{}", out.stderr);
    assert!(out.stderr.contains("its root is"), "{}", out.stderr);
    assert!(!p.exists(format!("{run}/manifest.sig")));
    // a store: no run in it has that root any more
    stateval(&p, Some(&key), &["sign", ".stateval", "--root", &root]).expect_code(2);

    // one file edited, the manifest left alone: the root matches, the run does not verify
    std::fs::remove_dir_all(p.join(&run)).expect("remove");
    copy_dir(&saved, &p.join(&run));
    let cases = p.join(format!("{run}/cases.jsonl"));
    let text = std::fs::read_to_string(&cases).expect("cases");
    std::fs::write(&cases, text.replace("\"passed\":false", "\"passed\":true")).expect("write");
    let out = stateval(&p, Some(&key), &["sign", &run, "--root", &root]);
    out.expect_code(2);
    assert!(out.stderr.contains("cases.jsonl: edited after the run"), "{}", out.stderr);
    assert!(!p.exists(format!("{run}/manifest.sig")));

    // the run as it was: signed, and verify --pubkey agrees. Beside it, the same run
    // renamed aside as a rerun deletes it (or as a kill left it): same manifest, same
    // root, and no run to sign
    std::fs::remove_dir_all(p.join(&run)).expect("remove");
    copy_dir(&saved, &p.join(&run));
    let run_name = std::path::Path::new(&run).file_name().expect("a run id").to_string_lossy().into_owned();
    let doomed = format!(".stateval/runs/.deleting-{run_name}");
    copy_dir(&saved, &p.join(&doomed));
    let out = stateval(&p, Some(&key), &["sign", ".stateval", "--root", &root]);
    out.expect_code(0);
    assert!(p.exists(format!("{run}/manifest.sig")), "the run itself is signed: {}", out.stdout);
    assert!(!p.exists(format!("{doomed}/manifest.sig")), "the run being deleted was signed");
    stateval(&p, None, &["verify", &run, "--root", &root, "--pubkey", &public]).expect_code(0);
}
