//! Paths from anywhere: what a pipeline names is relative to the pipeline's base, what
//! a dataset names (recordings, rubrics, grader scripts) is relative to the dataset's
//! own project, and neither depends on the working directory — recording, replaying
//! and judging read the same files and write the same bytes from any of them.
//! (Running `ci.toml` from inside `pipeline/` is in `cli_mistakes.rs`.)

mod common;

use std::path::Path;

use common::Project;
use serde_json::{Value, json};
use stateval::dataset::expect::judge::default_output_schema;
use stateval::grade::judge::render_request;
use stateval::pipeline::judges::JudgeProfile;

const REPLY: &str = "Sorry for the wait, and thank you! Your order ships tomorrow.";
const RUBRIC: &str = "# Tone\n\nScore the reply from 1 (rude) to 5 (warm).\n";

/// A pipeline in `ci/` (so its base is `ci/`) loading a dataset in `suites/` (not under
/// a `datasets/` directory, so it names paths from `suites/`): its recording, its
/// rubric and its grader script all sit next to it; the judge recording is the
/// pipeline's.
fn split_project() -> Project {
    let p = Project::empty();
    p.write(
        "ci/p.toml",
        "[pipeline]\nname = \"split\"\ndatasets = [\"../suites/*.jsonl\"]\n\n\
         [agents.support]\nsystem = \"You are a help-desk agent.\"\n\n\
         [judges.tone]\nrecordings = \"judges/tone.jsonl\"\nmodel = \"judge-model-1\"\n\n\
         [gates]\ndefault = { min_pass_rate = 1.0 }\n\n[report]\njson = \"reports/report.json\"\n",
    );
    p.write("suites/recordings/late.jsonl", format!("{}\n", json!({"response": {"content": REPLY}})));
    p.write("suites/rubrics/tone.md", RUBRIC);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    p.write("suites/graders/tone.py", std::fs::read(repo.join("examples/graders/tone.py")).unwrap());
    let case = json!({"id": "late", "agent": "support", "turns": ["Where is my order?"],
        "recordings": ["recordings/late.jsonl"],
        "expect": [
            {"target": "final_response", "matcher": {"custom": {"command": ["python3", "graders/tone.py"], "timeout_ms": 10000}}},
            {"target": "final_response", "matcher": {"judge": {"rubric": "rubrics/tone.md", "profile": "tone",
                                                              "pass": {"schema": {"minimum": 4}}}}}]});
    p.write("suites/cases.jsonl", format!("{case}\n"));
    // the judge's answer, keyed as `run` will render the request
    let profile = JudgeProfile {
        recordings: "judges/tone.jsonl".into(),
        model: "judge-model-1".into(),
        temperature: None,
        top_p: None,
        max_tokens: None,
        seed: None,
        upstream: None,
    };
    let request =
        render_request(&profile, RUBRIC, "final_response", &json!(REPLY), None, &default_output_schema()).unwrap();
    let line = json!({"request_hash": request.hash.to_string(), "sample": 0, "request": request.value,
                      "response": {"content": "{\"score\": 5}"}});
    p.write("ci/judges/tone.jsonl", format!("{line}\n"));
    p
}

fn run_in(p: &Project, cwd: &Path, pipeline: &str) -> common::Outcome {
    let output = p.cmd().current_dir(cwd).args(["run", pipeline]).output().unwrap();
    common::Outcome {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

#[test]
fn a_dataset_names_its_recording_rubric_and_grader_from_its_own_directory_whatever_the_working_directory() {
    let p = split_project();
    let elsewhere = tempfile::tempdir().unwrap();
    let absolute = p.join("ci/p.toml").to_string_lossy().into_owned();
    let mut snapshots = Vec::new();
    for (cwd, pipeline) in [
        (p.path().to_path_buf(), "ci/p.toml"),
        (p.join("ci"), "p.toml"),
        (p.join("suites"), "../ci/p.toml"),
        (elsewhere.path().to_path_buf(), absolute.as_str()),
    ] {
        let _ = std::fs::remove_dir_all(p.join("ci/.stateval"));
        let out = run_in(&p, &cwd, pipeline);
        out.expect_code(0);
        let report: Value = p.json("ci/reports/report.json");
        assert_eq!(report["cases"][0]["passed"], true, "from {}: {report}", cwd.display());
        snapshots.push((cwd, p.snapshot("ci/.stateval/runs"), p.read_bytes("ci/reports/report.json")));
    }
    let (_, logs, report) = &snapshots[0];
    assert!(!logs.is_empty());
    for (cwd, other_logs, other_report) in &snapshots[1..] {
        assert_eq!(common::differing(logs, other_logs), Vec::<String>::new(), "logs from {}", cwd.display());
        assert_eq!(report, other_report, "the report from {}", cwd.display());
    }
    // the grader ran the dataset's script, and the judge read the dataset's rubric
    let log = snapshots[0].1.iter().find(|(name, _)| name.ends_with("/late/0.jsonl")).unwrap().1.clone();
    let events = common::events_of(&log);
    let grader = events.iter().find(|e| e["kind"] == "grader_called").unwrap();
    assert_eq!(grader["data"]["command"], json!(["python3", "../suites/graders/tone.py"]), "{grader}");
    assert!(events.iter().any(|e| e["kind"] == "judge_verdict" && e["data"]["passed"] == true));
}

#[test]
fn record_writes_the_recording_a_dataset_names_next_to_the_dataset() {
    let p = split_project();
    std::fs::remove_file(p.join("suites/recordings/late.jsonl")).unwrap();
    // no upstream listens there: the failed model call proves the case loaded, i.e.
    // the placeholder was made where the dataset means it
    let out = p
        .cmd()
        .current_dir(p.join("ci"))
        .env("OPENAI_API_KEY", "sk-test-unused-0123456789abcdef")
        .args(["record", "p.toml", "--case", "late", "--upstream-url", "http://127.0.0.1:1/v1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("upstream http://127.0.0.1:1/v1") && stderr.contains("nothing written"), "{stderr}");
    assert!(!p.exists("suites/recordings/late.jsonl") && !p.exists("ci/recordings"), "a placeholder was left");
}
