//! The code under test as the attacker (docs/security.md, "Where a run writes, and
//! when"): an external agent, a custom grader or a pull request's code runs with
//! stateval's user id and can write every file of the project and of the run while the
//! run goes on. Each test does what such a process would, at the moment it would
//! matter (`STATEVAL_TEST_HOLD_AT=PHASE:FILE` holds a debug build there until the test
//! is done), and checks that the run never signs, reports or passes over it.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::{CI_REPORTS, Project};
use serde_json::{Value, json};

const PIPELINE: &str = r#"[pipeline]
name = "tamper"
datasets = ["datasets/*.jsonl"]

[agents.support]
system = "You are a help-desk agent."

[gates]
default = { min_pass_rate = 1.0 }

[report]
json = "reports/report.json"
junit = "reports/junit.xml"
"#;

const REPLY: &str = "Sorry for the wait, and thank you for your patience.";

/// A project whose dataset holds one case per `(id, expect)`, in order.
fn project(cases: &[(&str, Value)]) -> Project {
    let p = Project::empty();
    p.write("pipeline/tamper.toml", PIPELINE);
    let lines: Vec<String> = cases
        .iter()
        .map(|(id, expect)| {
            json!({"id": id, "agent": "support", "turns": ["Where is my order?"],
                   "recordings": [{"responses": [{"response": {"content": REPLY}}]}], "expect": expect})
            .to_string()
        })
        .collect();
    p.write("datasets/suite.jsonl", lines.join("\n") + "\n");
    p
}

/// An assertion on the reply that holds when `holds`.
fn says(holds: bool) -> Value {
    let word = if holds { "thank you" } else { "refund issued" };
    json!([{"target": "final_response", "matcher": {"contains": word}}])
}

fn grader(script: &str) -> Value {
    json!([{"target": "final_response", "matcher": {"custom": {"command": ["python3", script]}}}])
}

/// `stateval run` of the project, held at `phase` until the test creates the file it
/// names; its stderr piped, one case at a time.
fn spawn_held(p: &Project, phase: &str) -> (Child, std::path::PathBuf) {
    let go = p.join("go");
    let child = Command::new(env!("CARGO_BIN_EXE_stateval"))
        .current_dir(p.path())
        .args(["run", "pipeline/tamper.toml", "--jobs", "1"])
        .env("NO_COLOR", "1")
        .env_remove("CI")
        .env("STATEVAL_TEST_HOLD_AT", format!("{phase}:{}", go.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stateval");
    (child, go)
}

/// Waits until the run holds at `phase`, does `edit`, lets the run go on, and returns
/// its exit code and stderr.
fn edit_while_held(p: &Project, phase: &str, edit: impl FnOnce()) -> (i32, String) {
    let (mut child, go) = spawn_held(p, phase);
    let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).expect("read stderr") == 0 {
            let status = child.wait().expect("reap");
            panic!("the run ended ({status}) without holding at {phase}:\n{seen}");
        }
        seen.push_str(&line);
        if line.trim_end() == format!("stateval: held at {phase}") {
            break;
        }
    }
    let edited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(edit));
    std::fs::write(&go, "").expect("let the run go on");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).expect("read stderr");
    let status = child.wait().expect("reap");
    if let Err(panic) = edited {
        std::panic::resume_unwind(panic);
    }
    (status.code().expect("exited"), seen + &rest)
}

/// The one run directory of the project's store.
fn run_dir(p: &Project) -> std::path::PathBuf {
    let ids: Vec<String> = p.run_ids().into_iter().filter(|id| !id.starts_with('.')).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    p.join(format!(".stateval/runs/{}", ids[0]))
}

/// Flip every failed verdict in a run's `cases.jsonl` to passed: whole lines, valid
/// JSON, as a process the agent left behind would.
fn flip_verdicts(dir: &std::path::Path) {
    let path = dir.join("cases.jsonl");
    let text = std::fs::read_to_string(&path).expect("cases.jsonl");
    assert!(text.contains("\"passed\":false"), "nothing to flip: {text}");
    std::fs::write(&path, text.replace("\"passed\":false", "\"passed\":true")).expect("flip");
}

#[test]
fn a_verdict_flipped_in_cases_jsonl_while_the_run_goes_on_gets_no_manifest_and_no_report() {
    // once every case is decided (before the run reads its cases back for the
    // manifest) and at the manifest (after it did, before it is written)
    for phase in ["decided", "manifest"] {
        let p = project(&[("refund", says(false)), ("thanks", says(true))]);
        let (code, stderr) = edit_while_held(&p, phase, || flip_verdicts(&run_dir(&p)));
        let dir = run_dir(&p);
        assert_eq!(code, 3, "{phase}: {stderr}");
        assert!(stderr.contains("cases.jsonl changed during the run"), "{phase}: {stderr}");
        assert!(!dir.join("manifest.json").exists(), "{phase}: a manifest was written over the edit");
        // nothing of the refused run stands as finished: no suite.json, run.json unfinished
        assert!(!dir.join("suite.json").exists(), "{phase}: suite.json left in place");
        let run: Value =
            serde_json::from_slice(&std::fs::read(dir.join("run.json")).expect("run.json")).expect("run.json parses");
        assert_eq!(run["passed"], Value::Null, "{phase}: {run}");
        assert!(!p.exists("reports/report.json") && !p.exists("reports/junit.xml"), "{phase}: a report");
    }
}

/// The index files wait for the logs' fsync before the manifest, `verdicts.jsonl` in
/// dataset order still under its temporary name: a flipped verdict there, or a unit
/// edited, while the run syncs, is what the manifest would anchor, so the run refuses it.
#[test]
fn an_index_file_edited_while_the_run_syncs_gets_no_manifest_and_no_report() {
    for (file, from, to) in
        [("verdicts.jsonl.tmp", "\"passed\":false", "\"passed\":true"), ("units.jsonl", "\"k\":0", "\"k\":1")]
    {
        let p = project(&[("refund", says(false)), ("thanks", says(true))]);
        let (code, stderr) = edit_while_held(&p, "fsync", || {
            let path = run_dir(&p).join(file);
            let text = std::fs::read_to_string(&path).expect("the index file, not yet synced");
            assert!(text.contains(from), "nothing to edit in {file}: {text}");
            std::fs::write(&path, text.replace(from, to)).expect("edit");
        });
        let dir = run_dir(&p);
        let shown = file.trim_end_matches(".tmp");
        assert_eq!(code, 3, "{file}: {stderr}");
        assert!(stderr.contains(&format!("{shown} changed during the run")), "{file}: {stderr}");
        assert!(!dir.join("manifest.json").exists(), "{file}: a manifest was written over the edit");
        assert!(!dir.join(file).exists() || file == shown, "{file}: left beside {shown}");
        assert!(!p.exists("reports/report.json") && !p.exists("reports/junit.xml"), "{file}: a report");
    }
}

#[test]
fn a_log_replaced_before_the_manifest_is_not_anchored_nor_shown_as_the_runs() {
    let p = project(&[("refund", says(false)), ("thanks", says(true))]);
    let (code, stderr) = edit_while_held(&p, "manifest", || {
        // another valid chain in place of the failing case's log
        let dir = run_dir(&p);
        std::fs::copy(dir.join("thanks/0.jsonl"), dir.join("refund/0.jsonl")).expect("replace the log");
    });
    assert_eq!(code, 1, "the verdict is the run's own: {stderr}");
    let dir = run_dir(&p);
    let verify = p.stateval(&["verify", &dir.to_string_lossy()]);
    assert_eq!(verify.code, 1, "the manifest anchors the head the writer had:\n{}", verify.stderr);
    assert!(verify.stderr.contains("refund/0.jsonl"), "{}", verify.stderr);
    let p = project(&[("refund", says(false)), ("thanks", says(true))]);
    p.write(
        "pipeline/tamper.toml",
        PIPELINE.replace("junit = \"reports/junit.xml\"", "html = \"reports/report.html\""),
    );
    let (_, _) = edit_while_held(&p, "manifest", || {
        let dir = run_dir(&p);
        std::fs::copy(dir.join("thanks/0.jsonl"), dir.join("refund/0.jsonl")).expect("replace the log");
    });
    assert!(p.read("reports/report.html").contains("not the log the run wrote"), "the HTML shows it as the run's");
}

#[test]
fn a_grader_script_swapped_while_the_run_goes_on_is_an_input_error_naming_it_never_a_pass() {
    let p = project(&[("first", grader("graders/g.py")), ("second", grader("graders/g.py"))]);
    let fails = "import sys\nsys.stdin.read()\nprint('{\"pass\": false, \"reason\": \"no\"}')\n";
    p.write("graders/g.py", fails);
    let (code, stderr) = edit_while_held(&p, "cases", || {
        p.write("graders/g.py", fails.replace("false", "true"));
    });
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("graders/g.py:1:1: changed while the run went on (planned as blake3:"), "{stderr}");
    assert!(!run_dir(&p).join("manifest.json").exists() && !p.exists("reports/report.json"));
}

#[test]
fn a_golden_swapped_while_the_run_goes_on_is_an_input_error_naming_it_never_a_pass() {
    let p = project(&[("first", says(true)), ("second", says(true))]);
    p.stateval(&["run", "pipeline/tamper.toml", "--bless"]).expect_code(0);
    let (first, second) = ("goldens/suite/first.0.jsonl", "goldens/suite/second.0.jsonl");
    let blessed = p.read_bytes(second);
    // the committed golden of `second` is wrong: an honest run fails it
    p.write(second, p.read_bytes(first));
    p.stateval(&["run", "pipeline/tamper.toml"]).expect_code(1);
    // swapped for the right one after the plan, it must not pass the run
    let (code, stderr) = edit_while_held(&p, "cases", || p.write(second, &blessed));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("golden goldens/suite/second.0.jsonl: changed while the run went on"), "{stderr}");
    assert!(!p.exists("reports/report.json"));
}

#[test]
fn an_external_agents_script_swapped_while_the_run_goes_on_is_an_input_error_naming_it() {
    let p = project(&[("first", says(true)), ("second", says(true))]);
    p.write(
        "pipeline/tamper.toml",
        PIPELINE.replace(
            "[agents.support]\nsystem = \"You are a help-desk agent.\"",
            "[agents.support]\nkind = \"external\"\ncommand = [\"python3\", \"agents/a.py\"]\ntimeout_ms = 20000",
        ),
    );
    let agent = |says: &str| {
        format!(
            "import json, sys\nfor line in sys.stdin:\n    m = json.loads(line)\n    if m['type'] == 'turn':\n        \
             print(json.dumps({{'type': 'turn_result', 'turn': m['turn'], 'output': '{says}'}}), flush=True)\n    \
             elif m['type'] == 'end':\n        break\n"
        )
    };
    p.write("agents/a.py", agent("no"));
    p.stateval(&["run", "pipeline/tamper.toml"]).expect_code(1);
    let (code, stderr) = edit_while_held(&p, "cases", || p.write("agents/a.py", agent(REPLY)));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("agents/a.py:1:1: changed while the run went on (planned as blake3:"), "{stderr}");
    assert!(!p.exists("reports/report.json"));
}

/// Run `stateval run` over a project whose `reports` is a link out of it.
#[test]
fn a_committed_link_out_of_the_project_is_a_load_error_naming_it_and_the_outside_file_is_untouched() {
    let p = project(&[("thanks", says(true))]);
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("junit.xml"), "precious").expect("write");
    std::fs::write(outside.path().join("report.json"), "precious").expect("write");
    std::os::unix::fs::symlink(outside.path(), p.join("reports")).expect("link");
    let out = p.stateval(&["run", "pipeline/tamper.toml"]);
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("report.json: \"reports/report.json\" leads out of the project through the link reports (to "),
        "{}",
        out.stderr
    );
    for name in ["junit.xml", "report.json"] {
        assert_eq!(std::fs::read_to_string(outside.path().join(name)).expect("read"), "precious", "{name}");
    }
    assert!(p.run_ids().is_empty(), "nothing ran");

    // the store and the goldens too; a link that stays inside is the project's business
    std::fs::remove_file(p.join("reports")).expect("unlink");
    std::os::unix::fs::symlink(outside.path(), p.join(".stateval")).expect("link");
    let out = p.stateval(&["run", "pipeline/tamper.toml"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("pipeline.store: \".stateval\" leads out of the project through the link .stateval"),
        "{}",
        out.stderr
    );
    std::fs::remove_file(p.join(".stateval")).expect("unlink");
    std::fs::create_dir(p.join("out")).expect("mkdir");
    std::os::unix::fs::symlink(p.join("out"), p.join("reports")).expect("link");
    p.stateval(&["run", "pipeline/tamper.toml"]).expect_code(0);
    assert!(p.exists("out/report.json"));
    assert_eq!(std::fs::read_dir(outside.path()).expect("ls").count(), 2, "nothing was written outside");
}

#[test]
fn a_report_path_that_is_a_fifo_is_an_error_naming_it_and_stays_a_fifo() {
    use std::os::unix::fs::FileTypeExt;
    let p = project(&[("thanks", says(true))]);
    std::fs::create_dir(p.join("reports")).expect("mkdir");
    let fifo = p.join("reports/junit.xml");
    assert!(Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    let out = p.stateval(&["run", "pipeline/tamper.toml"]);
    out.expect_code(2);
    assert!(out.stderr.contains("report.junit: reports/junit.xml is a FIFO, not a regular file"), "{}", out.stderr);
    assert!(std::fs::symlink_metadata(&fifo).expect("still there").file_type().is_fifo());
}

#[test]
fn a_full_stdout_loses_the_text_and_keeps_the_verdicts_exit_code() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    let Ok(full) = full else {
        eprintln!("skipped: no /dev/full");
        return;
    };
    for (holds, code) in [(true, 0), (false, 1)] {
        let p = project(&[("case", says(holds))]);
        let out = Command::new(env!("CARGO_BIN_EXE_stateval"))
            .current_dir(p.path())
            .args(["run", "pipeline/tamper.toml"])
            .env_remove("CI")
            .stdout(full.try_clone().expect("dup"))
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(p.exists("reports/report.json"));
    }
}

#[test]
fn a_kill_in_the_first_moments_of_a_run_leaves_no_earlier_report() {
    // a green run's reports, then a change that fails, killed as soon as the pipeline
    // is read (before the datasets are): the green reports must not stand beside it
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    assert!(CI_REPORTS.iter().all(|r| p.exists(r)));
    let mut child = Command::new(env!("CARGO_BIN_EXE_stateval"))
        .current_dir(p.path())
        .args(["run"])
        .env("NO_COLOR", "1")
        .env_remove("CI")
        .env("STATEVAL_TEST_PAUSE_AT", "loading")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stateval");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("read");
    assert_eq!(line.trim_end(), "stateval: paused at loading");
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    for report in CI_REPORTS {
        assert!(!p.exists(report), "{report} outlived a run killed while it loaded");
    }

    // and a run refused for its input leaves none either
    p.stateval(&["run"]).expect_code(0);
    p.write("datasets/examples/broken.jsonl", "{not json\n");
    p.stateval(&["run"]).expect_code(2);
    for report in CI_REPORTS {
        assert!(!p.exists(report), "{report} outlived a refused run");
    }
}
