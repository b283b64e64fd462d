//! A verdict that cannot be forged or leaked into, end to end (docs/evidence.md,
//! docs/security.md). The agent under test is the attacker: it may hold the run
//! directory afterwards (a CI artifact) and it runs beside stateval's own environment.
//!
//! - Every file a verdict is read from is under the run's manifest, so an edited
//!   `cases.jsonl` or `suite.json` fails `verify` under the genuine root and signature,
//!   and `report`, `merge` and `--reuse` refuse to read it, naming the file.
//! - A forger who also rewrites the manifest (and holds no key) is caught by the
//!   signature, and where the files disagree with the logs, by `verify` alone.
//! - No child process — an external agent, a custom grader — sees the signing key or
//!   a provider credential, unless a profile passes one through by name.

mod common;

use std::path::Path;

use common::{Project, copy_dir};
use serde_json::{Value, json};
use stateval::evidence::{FileEntry, RunManifest};

/// The project after a signed run of `pipeline/failing.toml` (some cases fail, exit 1):
/// its run directory (relative) and the root its report printed.
fn signed_failing_run() -> (Project, String, String) {
    let p = Project::full();
    p.stateval(&["keygen", "-o", "keys/ci"]).expect_code(0);
    let out = p
        .cmd()
        .args(["run", "pipeline/failing.toml"])
        .env("STATEVAL_SIGNING_KEY", p.join("keys/ci.key"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let runs = p.run_ids();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run_dir = format!(".stateval/runs/{}", runs[0]);
    let manifest = RunManifest::read(&p.join(&run_dir)).expect("manifest");
    (p, run_dir, manifest.root().to_string())
}

/// Rewrite every case of `cases.jsonl` (and `suite.json`) to say it passed: what a
/// forger of the verdict writes.
fn forge_all_passed(dir: &Path, checks_too: bool) {
    let path = dir.join("cases.jsonl");
    let mut out = String::new();
    for line in std::fs::read_to_string(&path).expect("cases").lines() {
        let mut case: Value = serde_json::from_str(line).expect("case");
        case["passed"] = json!(true);
        for run in case["runs"].as_array_mut().expect("runs") {
            run["passed"] = json!(true);
            if checks_too {
                run["status"] = json!("completed");
                run.as_object_mut().expect("run").remove("error");
                for check in run["checks"].as_array_mut().expect("checks") {
                    check["passed"] = json!(true);
                }
            }
        }
        out.push_str(&case.to_string());
        out.push('\n');
    }
    std::fs::write(&path, out).expect("write cases");
    let suite_path = dir.join("suite.json");
    let mut suite: Value = serde_json::from_slice(&std::fs::read(&suite_path).expect("suite")).expect("suite json");
    suite["passed"] = json!(true);
    for gate in suite["gates"].as_array_mut().expect("gates") {
        gate["passed"] = json!(true);
        gate["passed_cases"] = gate["cases"].clone();
    }
    std::fs::write(&suite_path, serde_json::to_vec_pretty(&suite).expect("json")).expect("write suite");
}

/// The forger also rewrites the manifest to list the edited files and a green verdict.
fn rewrite_manifest(dir: &Path) {
    let mut manifest = RunManifest::read(dir).expect("manifest");
    for file in &mut manifest.files {
        *file = FileEntry::of(dir, &file.path).expect("entry");
    }
    manifest.passed = true;
    manifest.write(dir).expect("rewrite manifest");
}

#[test]
fn an_edited_verdict_fails_verify_under_the_genuine_signature_and_no_report_is_rendered_from_it() {
    let (p, run_dir, root) = signed_failing_run();
    // the untouched run verifies, signature and root alike, and renders with its root
    let ok = p.stateval(&["verify", &run_dir, "--root", &root, "--pubkey", "keys/ci.pub"]);
    ok.expect_code(0);
    let genuine = p.stateval(&["report", &run_dir, "--junit", "genuine.xml"]);
    genuine.expect_code(0);
    let junit = p.read("genuine.xml");
    assert!(junit.contains(&root), "the report carries the manifest's root");
    assert!(!junit.contains("failures=\"0\""), "the failing run reports failures: {junit}");

    let dir = p.join(&run_dir);
    forge_all_passed(&dir, false);
    let out = p.stateval(&["verify", &run_dir, "--root", &root, "--pubkey", "keys/ci.pub"]);
    out.expect_code(1);
    assert!(out.stderr.contains("cases.jsonl: edited after the run"), "{}", out.stderr);
    assert!(out.stderr.contains("suite.json: edited after the run"), "{}", out.stderr);

    let report = p.stateval(&["report", &run_dir, "--junit", "forged.xml", "--json", "forged.json"]);
    report.expect_code(2);
    assert!(report.stderr.contains("cases.jsonl: edited after the run"), "{}", report.stderr);
    assert!(report.stderr.contains("refusing to render a report"), "{}", report.stderr);
    assert!(!p.exists("forged.xml") && !p.exists("forged.json"), "nothing rendered from a forged verdict");
}

#[test]
fn a_forger_who_rewrites_the_manifest_too_is_caught_by_the_signature_and_by_the_logs() {
    let (p, run_dir, root) = signed_failing_run();
    let dir = p.join(&run_dir);
    forge_all_passed(&dir, false);
    rewrite_manifest(&dir);
    // without a key or root, the files still disagree with themselves and the logs
    let alone = p.stateval(&["verify", &run_dir]);
    alone.expect_code(1);
    assert!(alone.stderr.contains("passed, but its status, error or checks say it failed"), "{}", alone.stderr);
    assert!(alone.stderr.contains("verdicts.jsonl"), "verdicts.jsonl still says what the run said: {}", alone.stderr);
    // the signature and the archived root hold the rest
    let keyed = p.stateval(&["verify", &run_dir, "--pubkey", "keys/ci.pub"]);
    keyed.expect_code(1);
    assert!(keyed.stderr.contains("manifest.sig: the signature does not verify"), "{}", keyed.stderr);
    let rooted = p.stateval(&["verify", &run_dir, "--root", &root]);
    rooted.expect_code(1);
    assert!(rooted.stderr.contains("the manifest was rewritten"), "{}", rooted.stderr);
}

#[test]
fn a_thorough_forgery_of_every_verdict_file_still_fails_where_the_logs_say_otherwise() {
    let (p, run_dir, _) = signed_failing_run();
    let dir = p.join(&run_dir);
    // every check, status and error rewritten too, verdicts.jsonl to match
    forge_all_passed(&dir, true);
    let verdicts: Vec<String> = std::fs::read_to_string(dir.join("verdicts.jsonl"))
        .expect("verdicts")
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("verdict");
            v["passed"] = json!(true);
            v["status"] = json!("completed");
            v.to_string()
        })
        .collect();
    std::fs::write(dir.join("verdicts.jsonl"), verdicts.join("\n") + "\n").expect("write");
    rewrite_manifest(&dir);
    let out = p.stateval(&["verify", &run_dir]);
    out.expect_code(1);
    // failing.toml has cases whose logs end in a replay miss or divergence
    assert!(out.stderr.contains("but its log ends with status"), "{}", out.stderr);
}

/// `suite.json` edited, the manifest rewritten to match (no key, no archived root):
/// `verify` derives the verdict and the gates' counts again from the other files.
#[test]
fn a_suite_verdict_that_its_gates_or_cases_do_not_bear_out_is_named() {
    let (p, run_dir, _) = signed_failing_run();
    let dir = p.join(&run_dir);
    let suite_path = dir.join("suite.json");
    let original = std::fs::read(&suite_path).expect("suite");
    let edit = |change: &dyn Fn(&mut Value)| {
        let mut suite: Value = serde_json::from_slice(&original).expect("json");
        change(&mut suite);
        std::fs::write(&suite_path, serde_json::to_vec_pretty(&suite).expect("json")).expect("write");
        rewrite_manifest(&dir);
        p.stateval(&["verify", &run_dir])
    };
    // green verdict, gates as they were (failing)
    let out = edit(&|s| s["passed"] = json!(true));
    out.expect_code(1);
    assert!(out.stderr.contains("suite.json: passed is true, its gates say false"), "{}", out.stderr);
    // every gate said to pass, the default gate's counts left as the cases say
    let out = edit(&|s| {
        s["passed"] = json!(true);
        for gate in s["gates"].as_array_mut().expect("gates") {
            gate["passed"] = json!(true);
        }
    });
    // a gate's bound is the pipeline's, not in the run directory: a gate said to pass
    // over its true counts is taken at its word by `verify` alone (documented), and
    // caught by the signature
    out.expect_code(0);
    let keyed = p.stateval(&["verify", &run_dir, "--pubkey", "keys/ci.pub"]);
    keyed.expect_code(1);
    assert!(keyed.stderr.contains("manifest.sig: the signature does not verify"), "{}", keyed.stderr);
    // the default gate's counts inflated to match
    let out = edit(&|s| {
        s["passed"] = json!(true);
        for gate in s["gates"].as_array_mut().expect("gates") {
            gate["passed"] = json!(true);
            gate["passed_cases"] = gate["cases"].clone();
        }
    });
    out.expect_code(1);
    assert!(out.stderr.contains("suite.json: gate default: "), "{}", out.stderr);
    assert!(out.stderr.contains("cases.jsonl counts"), "{}", out.stderr);
}

#[test]
fn a_verdict_file_left_out_of_the_manifest_or_missing_is_named() {
    let (p, run_dir, _) = signed_failing_run();
    let dir = p.join(&run_dir);
    std::fs::remove_file(dir.join("verdicts.jsonl")).expect("remove");
    std::fs::write(dir.join("shard.json"), "{}").expect("plant");
    let out = p.stateval(&["verify", &run_dir]);
    out.expect_code(1);
    assert!(out.stderr.contains("verdicts.jsonl: missing: the manifest lists it"), "{}", out.stderr);
    assert!(out.stderr.contains("shard.json: not in the run's manifest"), "{}", out.stderr);
}

#[test]
fn merge_refuses_a_shard_whose_verdict_was_edited_naming_the_file() {
    let p = Project::new();
    for i in 1..=2 {
        p.stateval(&["run", "--shard", &format!("slice:{i}/2"), "--out", &format!("shards/{i}")]).expect_code(0);
    }
    let runs = std::fs::read_dir(p.join("shards/1/runs")).expect("runs").next().expect("a run").expect("entry");
    let cases = runs.path().join("cases.jsonl");
    let text = std::fs::read_to_string(&cases).expect("cases");
    // the shard's cases all passed: the forger turns one red into green elsewhere, here
    // any edit will do (a reordered key is an edit too)
    std::fs::write(&cases, text.replacen("\"passed\":true", "\"passed\": true", 1)).expect("edit");
    let out = p.stateval(&["merge", "shards/1", "shards/2"]);
    out.expect_code(2);
    assert!(out.stderr.contains("cases.jsonl: edited after the run"), "{}", out.stderr);
    assert!(!p.exists("reports/junit.xml"), "no report from a refused merge");
}

#[test]
fn reuse_refuses_a_run_whose_verdict_was_edited_naming_the_file() {
    let p = Project::new();
    p.stateval(&["run", "--out", "earlier"]).expect_code(0);
    let ok = p.stateval(&["run", "--reuse", "earlier"]);
    ok.expect_code(0);
    assert!(ok.stdout.contains("reused "), "{}", ok.stdout);
    let runs = std::fs::read_dir(p.join("earlier/runs")).expect("runs").next().expect("a run").expect("entry");
    let cases = runs.path().join("cases.jsonl");
    let text = std::fs::read_to_string(&cases).expect("cases");
    std::fs::write(&cases, text.replacen("\"passed\":true", "\"passed\": true", 1)).expect("edit");
    let out = p.stateval(&["run", "--reuse", "earlier"]);
    out.expect_code(2);
    assert!(out.stderr.contains("cases.jsonl: edited after the run"), "{}", out.stderr);
    assert!(out.stderr.contains("refusing to take cases over"), "{}", out.stderr);
}

#[test]
fn a_merged_run_anchors_its_own_verdict_files() {
    let p = Project::new();
    for i in 1..=2 {
        p.stateval(&["run", "--shard", &format!("slice:{i}/2"), "--out", &format!("shards/{i}")]).expect_code(0);
    }
    p.stateval(&["merge", "shards/1", "shards/2"]).expect_code(0);
    let run_dir = format!(".stateval/runs/{}", p.run_ids()[0]);
    let manifest = RunManifest::read(&p.join(&run_dir)).expect("manifest");
    let listed: Vec<&str> = manifest.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(listed, ["cases.jsonl", "suite.json", "verdicts.jsonl", "units.jsonl"]);
    assert!(manifest.passed);
    p.stateval(&["verify", &run_dir]).expect_code(0);
    let suite = p.read(format!("{run_dir}/suite.json"));
    std::fs::write(p.join(&run_dir).join("suite.json"), suite.replace("\"passed\": true", "\"passed\": false"))
        .expect("edit");
    let out = p.stateval(&["verify", &run_dir]);
    out.expect_code(1);
    assert!(out.stderr.contains("suite.json: edited after the run"), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------
// no stateval secret in any child

/// An external agent that answers every turn with its whole environment, and a custom
/// grader that passes with its environment as its reason (isolated, neither can write a
/// file the test could read).
const AGENT: &str = r#"import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m["type"] == "turn":
        print(json.dumps({"type": "turn_result", "turn": m["turn"], "output": json.dumps(dict(os.environ))}), flush=True)
    elif m["type"] == "end":
        break
"#;

const GRADER: &str = r#"import json, os, sys
json.load(sys.stdin)
print(json.dumps({"pass": True, "reason": json.dumps(dict(os.environ))}))
"#;

fn leaky_project(passthrough: &str) -> Project {
    let p = Project::empty();
    p.write("agents/dump.py", AGENT);
    p.write("graders/dump.py", GRADER);
    p.write(
        "pipeline/leak.toml",
        format!(
            "[pipeline]\nname = \"leak\"\ndatasets = [\"datasets/leak.jsonl\"]\n\n\
             [agents.dumper]\nkind = \"external\"\ncommand = [\"python3\", \"agents/dump.py\"]\n\
             {passthrough}\n\n\
             [gates]\ndefault = {{ min_pass_rate = 1.0 }}\n"
        ),
    );
    let case = json!({"id": "dump", "agent": "dumper", "turns": ["hello"],
                      "recordings": [{"responses": [{"response": {"content": "unused"}}]}],
                      "expect": [{"target": "final_response",
                                  "matcher": {"custom": {"command": ["python3", "graders/dump.py"]}}}]});
    p.write("datasets/leak.jsonl", format!("{case}\n"));
    p
}

/// The environment the agent (`"agent"`) or the grader (`"grader"`) said it had.
fn env_of(p: &Project, which: &str) -> serde_json::Map<String, Value> {
    let log = p.log_files().into_iter().find(|f| f.contains("/dump/0.jsonl")).expect("a log");
    let events = common::events_of(&p.read_bytes(&log));
    let said = match which {
        "agent" => events.iter().find(|e| e["kind"] == "turn_completed").map(|e| &e["data"]["response"]),
        _ => events.iter().find(|e| e["kind"] == "grader_called").map(|e| &e["data"]["reason"]),
    };
    let said = said.and_then(Value::as_str).unwrap_or_else(|| panic!("the {which} said nothing"));
    serde_json::from_str::<Value>(said).unwrap().as_object().expect("an environment").clone()
}

#[test]
fn neither_an_agent_nor_a_grader_sees_the_signing_key_or_a_credential() {
    let p = leaky_project("");
    p.stateval(&["keygen", "-o", "keys/ci"]).expect_code(0);
    let secrets = [
        ("STATEVAL_SIGNING_KEY", p.join("keys/ci.key").to_string_lossy().into_owned()),
        ("OPENAI_API_KEY", "sk-live-should-never-leak-0123456789".to_string()),
        ("GITHUB_TOKEN", "ghp_shouldneverleak0123456789abcdefABCD".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_string()),
        ("DB_PASSWORD", "hunter2".to_string()),
    ];
    let out = p
        .cmd()
        .args(["run", "pipeline/leak.toml"])
        .envs(secrets.iter().map(|(k, v)| (k, v)))
        .env("ORDINARY_SETTING", "kept")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for file in ["agent", "grader"] {
        let env = env_of(&p, file);
        // an allow-list: what a process needs to start, and nothing it was not given
        assert!(env.contains_key("PATH"), "{file}: {env:?}");
        assert_eq!(env.get("ORDINARY_SETTING"), None, "{file}: only what a process needs to start is inherited");
        let text = serde_json::to_string(&env).expect("json");
        for (name, value) in &secrets {
            assert!(!text.contains(value.as_str()), "{file}: the value of {name} reached the child");
        }
        assert!(!env.contains_key("STATEVAL_SIGNING_KEY") && !env.contains_key("GITHUB_TOKEN"), "{file}");
    }
    // the agent's own replay key is stateval's, never the parent's
    let agent = env_of(&p, "agent");
    assert_ne!(agent["OPENAI_API_KEY"], json!(secrets[1].1));
    // and the run was signed all the same: the parent kept the key. Where no sandbox
    // can isolate the agent, the run is not signed at all (its pipeline does not sign
    // unisolated runs); CI has one (STATEVAL_REQUIRE_SANDBOX)
    let run_dir = format!(".stateval/runs/{}", p.run_ids()[0]);
    let verified = p.stateval(&["verify", &run_dir, "--pubkey", "keys/ci.pub"]);
    match stateval::isolation::unavailable() {
        None => {
            verified.expect_code(0);
        }
        Some(why) => {
            assert!(std::env::var_os("STATEVAL_REQUIRE_SANDBOX").is_none(), "no sandbox here: {why}");
            verified.expect_code(1);
            assert!(verified.stderr.contains("this run was not signed"), "{}", verified.stderr);
        }
    }
}

#[test]
fn a_profile_passes_a_named_variable_through_and_never_the_signing_key() {
    let p = leaky_project("env_passthrough = [\"GITHUB_TOKEN\"]");
    let out = p
        .cmd()
        .args(["run", "pipeline/leak.toml"])
        .env("GITHUB_TOKEN", "ghp_passedthroughonpurpose0123456789ab")
        .env("GITLAB_TOKEN", "glpat-notpassed")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let env = env_of(&p, "agent");
    assert_eq!(env.get("GITHUB_TOKEN"), Some(&json!("ghp_passedthroughonpurpose0123456789ab")));
    assert!(!env.contains_key("GITLAB_TOKEN"));
    // the grader passed nothing through: it does not get it
    assert!(!env_of(&p, "grader").contains_key("GITHUB_TOKEN"));

    let refused = leaky_project("env_passthrough = [\"STATEVAL_SIGNING_KEY\"]");
    let out = refused.stateval(&["run", "pipeline/leak.toml"]);
    out.expect_code(2);
    assert!(out.stderr.contains("only stateval signs a run"), "{}", out.stderr);
    assert!(refused.log_files().is_empty(), "nothing ran");
}

#[test]
fn the_default_runs_manifest_lists_every_verdict_file_it_wrote_and_suite_json_holds_no_root() {
    // the default pipeline: every verdict file the run wrote is listed, in order
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let run_dir = p.join(format!(".stateval/runs/{}", p.run_ids()[0]));
    let manifest = RunManifest::read(&run_dir).expect("manifest");
    let listed: Vec<&str> = manifest.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(listed, ["cases.jsonl", "suite.json", "verdicts.jsonl", "units.jsonl"]);
    for file in &manifest.files {
        assert_eq!(&FileEntry::of(&run_dir, &file.path).expect("entry"), file);
    }
    let suite: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("suite.json")).expect("suite")).expect("json");
    assert!(suite.get("root").is_none(), "suite.json carries no root: the manifest is the root");
    // a copy of the run directory elsewhere verifies the same
    let copy = p.join("archived");
    copy_dir(&run_dir, &copy);
    p.stateval(&["verify", "archived"]).expect_code(0);
}
