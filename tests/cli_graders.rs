//! Custom graders and recorded LLM judges end to end (docs/graders.md): the real binary
//! runs a grader program and serves judge votes from a judge recording, the log holds
//! what each was asked and answered, and every way one can fail is a case error that
//! says why — a timeout (the grader killed), bad JSON, a judge recording miss naming the
//! key and the differing pointers — or, for a security case resting on judges alone, a
//! load error at its place.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Project, copy_dir, events_of, parse_located_error};
use serde_json::{Value, json};
use stateval::canon::{self, Context};
use stateval::dataset::expect::judge::default_output_schema;
use stateval::grade::judge::{JudgeRequest, render_request};
use stateval::pipeline::judges::JudgeProfile;

/// The reply every case's agent gives.
const REPLY: &str = "Sorry for the wait, and thank you for your patience.";
const RUBRIC: &str = "# Tone\n\nScore the reply from 1 (rude) to 5 (warm).\n";

const PIPELINE: &str = r#"[pipeline]
name = "graders"
datasets = ["datasets/*.jsonl"]

[agents.support]
system = "You are a help-desk agent."

[judges.tone]
recordings = "judges/tone.jsonl"
model = "judge-model-1"
temperature = 0.7

[gates]
default = { min_pass_rate = 1.0 }

[report]
json = "reports/report.json"
"#;

/// A project whose one dataset holds one case per `(id, tags, expect)`.
fn project(cases: &[(&str, &[&str], Value)]) -> Project {
    let p = Project::empty();
    p.write("pipeline/graders.toml", PIPELINE);
    p.write("rubrics/tone.md", RUBRIC);
    p.write("judges/tone.jsonl", "");
    let lines: Vec<String> = cases
        .iter()
        .map(|(id, tags, expect)| {
            json!({"id": id, "tags": tags, "agent": "support", "turns": ["Where is my order?"],
                   "recordings": [{"responses": [{"response": {"content": REPLY}}]}], "expect": expect})
            .to_string()
        })
        .collect();
    p.write("datasets/suite.jsonl", lines.join("\n") + "\n");
    p
}

fn custom(script: &str, timeout_ms: u64) -> Value {
    json!([{"target": "final_response", "matcher": {"custom": {"command": ["python3", script], "timeout_ms": timeout_ms}}}])
}

fn run(p: &Project) -> common::Outcome {
    p.stateval(&["run", "pipeline/graders.toml"])
}

/// The one run of case `id` in the report.
fn run_of(p: &Project, id: &str) -> Value {
    let report = p.json("reports/report.json");
    let case =
        report["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).expect("the case is reported").clone();
    case["runs"][0].clone()
}

/// The events of case `id`'s only log.
fn log_of(p: &Project, id: &str) -> Vec<Value> {
    let log = p.log_files().into_iter().find(|l| l.contains(&format!("/{id}/"))).expect("a log");
    events_of(&p.read_bytes(&log))
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

// ---------------------------------------------------------------------------------
// custom graders

#[test]
fn a_passing_custom_grader_is_given_the_value_and_its_verdict_and_digests_go_into_the_log() {
    let p = project(&[("courteous", &["tone"], custom("graders/tone.py", 5000))]);
    // the grader says what it was given in its reason (an isolated grader writes nothing
    // outside its scratch directory), so the test can check the logged digest
    p.write(
        "graders/tone.py",
        "import json, sys\nraw = sys.stdin.read()\nv = json.loads(raw)['value']\n\
         print(json.dumps({'pass': 'thank' in v.lower(), 'score': 4, 'reason': 'says thank you; saw ' + raw}))\n",
    );
    run(&p).expect_code(0);

    let events = log_of(&p, "courteous");
    let reason = events[events.len() - 2]["data"]["reason"].as_str().unwrap().to_string();
    let raw = reason.strip_prefix("says thank you; saw ").expect("the grader's reason").to_string();
    let seen: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        seen,
        json!({"target": "final_response", "value": REPLY, "run": 0,
               "case": {"id": "courteous", "dataset": "suite", "tags": ["tone"], "turns": ["Where is my order?"]}})
    );
    assert_eq!(kinds(&events)[events.len() - 2..], ["grader_called", "run_completed"]);
    let called = &events[events.len() - 2]["data"];
    let digest = |v: &Value| canon::canonical_digest(Context::Content, v).unwrap().to_string();
    assert_eq!(called["input_digest"], digest(&seen));
    assert_eq!(called["output_digest"], digest(&json!({"pass": true, "score": 4, "reason": reason})));
    assert_eq!((&called["pass"], &called["reason"]), (&json!(true), &json!(reason)));
    let shown = run_of(&p, "courteous")["checks"][0]["reason"].as_str().unwrap().to_string();
    assert!(shown.contains("passed (score 4): says thank you; saw "), "{shown}");
    let log = p.log_files().pop().unwrap();
    let verified = p.stateval(&["verify", &log]);
    verified.expect_code(0);
    assert!(verified.stdout.contains("(complete;"), "the log still ends with run_completed: {}", verified.stdout);
}

#[test]
fn a_failing_custom_grader_fails_its_case_with_the_graders_reason_and_no_case_error() {
    let p = project(&[("curt", &[], custom("graders/strict.py", 5000))]);
    p.write(
        "graders/strict.py",
        "import sys\nsys.stdin.read()\nprint('{\"pass\": false, \"reason\": \"no apology for the delay\"}')\n",
    );
    run(&p).expect_code(1);
    let r = run_of(&p, "curt");
    assert_eq!(r["status"], "completed");
    assert!(r.get("error").is_none(), "a verdict is not a case error: {r}");
    let reason = r["checks"][0]["reason"].as_str().unwrap();
    assert_eq!(reason, "custom grader `python3 graders/strict.py` failed: no apology for the delay");
}

#[test]
fn a_custom_grader_past_its_timeout_is_killed_and_is_a_case_error_showing_its_stderr() {
    let p = project(&[("slow", &[], custom("graders/slow.py", 3000))]);
    p.write(
        "graders/slow.py",
        "import sys, time\nprint('thinking hard', file=sys.stderr, flush=True)\ntime.sleep(60)\n",
    );
    let started = Instant::now();
    run(&p).expect_code(1);
    assert!(started.elapsed() < Duration::from_secs(30), "the grader was not killed: {:?}", started.elapsed());
    let error = run_of(&p, "slow")["error"].as_str().unwrap().to_string();
    assert_eq!(
        error,
        "final_response: custom grader `python3 graders/slow.py` timed out after 3000 ms and was killed; stderr: thinking hard"
    );
    let events = log_of(&p, "slow");
    let called = events.iter().find(|e| e["kind"] == "grader_called").unwrap();
    assert_eq!((&called["data"]["error"], called["data"].get("output_digest")), (&json!("timeout"), None));
    // stderr is machine-specific (paths in tracebacks): it is shown, never logged
    assert!(!serde_json::to_string(&events).unwrap().contains("thinking hard"));
}

#[test]
fn a_custom_grader_that_prints_bad_json_or_exits_non_zero_is_a_case_error_with_its_stderr_tail() {
    let p = project(&[
        ("bad-json", &[], custom("graders/shout.py", 5000)),
        ("crashes", &[], custom("graders/crash.py", 5000)),
        ("no-pass", &[], custom("graders/nopass.py", 5000)),
    ]);
    p.write("graders/shout.py", "import sys\nprint('looked fine to me', file=sys.stderr)\nprint('PASS')\n");
    p.write("graders/crash.py", "import json, sys\njson.load(sys.stdin)['nope']\n");
    p.write("graders/nopass.py", "print('{\"score\": 5}')\n");
    run(&p).expect_code(1);
    let error = |id: &str| run_of(&p, id)["error"].as_str().unwrap().to_string();
    let bad = error("bad-json");
    assert!(bad.starts_with("final_response: custom grader `python3 graders/shout.py` printed bad JSON"), "{bad}");
    assert!(bad.ends_with("; stderr: looked fine to me"), "{bad}");
    let crash = error("crashes");
    assert!(crash.contains("exited with status 1; stderr: Traceback"), "{crash}");
    assert!(crash.ends_with("KeyError: 'nope'"), "{crash}");
    assert!(error("no-pass").contains("printed no \"pass\""), "{}", error("no-pass"));
}

// ---------------------------------------------------------------------------------
// recorded judges

fn judge(samples: u32, reduce: &str) -> Value {
    json!([{"target": "final_response", "matcher": {"judge": {"rubric": "rubrics/tone.md", "profile": "tone",
            "samples": samples, "reduce": reduce, "pass": {"schema": {"minimum": 4}}}}},
           {"target": "status", "matcher": {"exact": "completed"}}])
}

/// The request the `tone` judge is asked about REPLY with `rubric`.
fn request(rubric: &str) -> JudgeRequest {
    let profile = JudgeProfile {
        recordings: "judges/tone.jsonl".into(),
        model: "judge-model-1".into(),
        temperature: Some(0.7),
        top_p: None,
        max_tokens: None,
        seed: None,
        upstream: None,
    };
    render_request(&profile, rubric, "final_response", &json!(REPLY), None, &default_output_schema()).unwrap()
}

/// A judge recording answering `request` with one line per score (sample 0, 1, …).
fn recording(request: &JudgeRequest, scores: &[u32]) -> String {
    scores
        .iter()
        .enumerate()
        .map(|(i, score)| {
            json!({"request_hash": request.hash.to_string(), "sample": i, "request": request.value,
                   "response": {"content": format!("{{\"score\": {score}, \"reason\": \"vote {i}\"}}")},
                   "usage": {"input_tokens": 50, "output_tokens": 9}})
            .to_string()
                + "\n"
        })
        .collect()
}

#[test]
fn a_judge_serves_each_vote_from_its_recording_and_logs_the_calls_and_the_verdict() {
    let p = project(&[("judged", &["tone"], judge(3, "mean"))]);
    p.write("judges/tone.jsonl", recording(&request(RUBRIC), &[5, 3, 5]));
    run(&p).expect_code(0);
    let events = log_of(&p, "judged");
    let n = events.len();
    assert_eq!(
        kinds(&events)[n - 5..],
        ["judge_called", "judge_called", "judge_called", "judge_verdict", "run_completed"]
    );
    let hash = request(RUBRIC).hash.to_string();
    for (i, e) in events[n - 5..n - 2].iter().enumerate() {
        assert_eq!((&e["data"]["request_hash"], &e["data"]["sample"]), (&json!(hash), &json!(i)));
    }
    assert_eq!(events[n - 3]["data"]["answer"], json!({"score": 5, "reason": "vote 2"}));
    // (5 + 3 + 5) / 3 = 4.333… ≥ 4
    let verdict = &events[n - 2]["data"];
    assert_eq!(
        (&verdict["votes"], &verdict["reduce"], &verdict["passed"]),
        (&json!([5, 3, 5]), &json!("mean"), &json!(true))
    );
    assert!((verdict["value"].as_f64().unwrap() - 13.0 / 3.0).abs() < 1e-12);
    let reason = run_of(&p, "judged")["checks"][0]["reason"].as_str().unwrap().to_string();
    assert!(reason.starts_with("judge tone voted [5, 3, 5], mean 4.333"), "{reason}");
}

#[test]
fn a_judge_whose_votes_fall_below_the_pass_matcher_fails_its_case() {
    let p = project(&[("judged", &[], judge(3, "majority"))]);
    p.write("judges/tone.jsonl", recording(&request(RUBRIC), &[3, 3, 5]));
    run(&p).expect_code(1);
    let r = run_of(&p, "judged");
    assert!(r.get("error").is_none(), "{r}");
    let reason = r["checks"][0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("judge tone voted [3, 3, 5], majority 3: 3 does not satisfy"), "{reason}");
}

#[test]
fn a_judge_miss_fails_the_case_naming_the_key_and_where_the_nearest_recorded_request_differs() {
    let p = project(&[("judged", &[], judge(2, "majority"))]);
    // recorded against last week's rubric: the request asked today differs there only
    let old = "# Tone\n\nScore the reply from 1 (rude) to 5 (kind).\n";
    p.write("judges/tone.jsonl", recording(&request(old), &[5, 5]));
    run(&p).expect_code(1);
    let key = format!("{}#0", request(RUBRIC).hash);
    let error = run_of(&p, "judged")["error"].as_str().unwrap().to_string();
    assert_eq!(
        error,
        format!(
            "final_response: judge tone: no recorded answer for key {key} in judges/tone.jsonl; the nearest recorded \
             request (judges/tone.jsonl:1) differs at /rubric; replay never asks a judge live: record it with \
             `stateval record --judge`"
        )
    );
    let events = log_of(&p, "judged");
    let missed = events.iter().find(|e| e["kind"] == "judge_called").unwrap();
    assert_eq!((&missed["data"]["error"], &missed["data"]["pointers"]), (&json!("miss"), &json!(["/rubric"])));
    assert!(!events.iter().any(|e| e["kind"] == "judge_verdict"), "no verdict without every vote");
}

#[test]
fn a_judge_recording_edited_by_hand_is_a_load_error_at_its_line_and_column() {
    let p = project(&[("judged", &[], judge(1, "majority"))]);
    let line = recording(&request(RUBRIC), &[5]).replace("Score the reply", "Rate the reply");
    p.write("judges/tone.jsonl", &line);
    let out = run(&p);
    out.expect_code(2);
    let (path, l, c, message) = parse_located_error(out.stderr.lines().next().unwrap());
    assert_eq!((path.as_str(), l), ("judges/tone.jsonl", 1));
    assert_eq!(c, line.find("\"request_hash\"").unwrap() + 1);
    assert!(message.starts_with("request_hash does not match the request beside it"), "{message}");
}

// ---------------------------------------------------------------------------------
// load errors

#[test]
fn a_security_case_whose_only_assertions_are_judges_is_a_load_error_at_its_first_judge() {
    let only_judges = json!([{"target": "final_response", "matcher": {"judge": {"rubric": "rubrics/tone.md",
                               "profile": "tone", "pass": {"exact": 5}}}}]);
    let p = project(&[("fine", &["tone"], json!([])), ("judged-security", &["security"], only_judges)]);
    let out = run(&p);
    out.expect_code(2);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    let (path, line, column, message) = parse_located_error(lines[0]);
    assert_eq!((path.as_str(), line), ("datasets/suite.jsonl", 2));
    assert_eq!(column, common::column_of(&p.line("datasets/suite.jsonl", 2), "\"matcher\""));
    assert!(message.starts_with("a case tagged security cannot rest on LLM judges alone"), "{message}");

    // with one assertion on what the agent did, the same judge is welcome
    let with_evidence = json!([{"target": "final_response", "matcher": {"judge": {"rubric": "rubrics/tone.md",
                                 "profile": "tone", "pass": {"exact": 5}}}},
                               {"target": "security.flag_count", "matcher": {"exact": 0}}]);
    let p = project(&[("judged-security", &["security"], with_evidence)]);
    p.write("judges/tone.jsonl", recording(&request(RUBRIC), &[5]));
    run(&p).expect_code(0);
}

#[test]
fn what_a_grader_or_judge_names_must_exist_before_anything_runs() {
    let cases: [(Value, &str, &str); 4] = [
        (
            json!({"judge": {"rubric": "rubrics/tone.md", "profile": "tonne", "pass": {"exact": 5}}}),
            "\"profile\"",
            "unknown judge profile \"tonne\" (did you mean \"tone\"?) (the pipeline defines: tone)",
        ),
        (
            json!({"judge": {"rubric": "rubrics/toen.md", "profile": "tone", "pass": {"exact": 5}}}),
            "\"rubric\"",
            "rubric \"rubrics/toen.md\" not found",
        ),
        (
            json!({"custom": {"command": ["graders/missing.py"]}}),
            "\"graders/missing.py\"",
            "custom grader: graders/missing.py: no such file",
        ),
        (json!({"custom": {"command": ["python3"], "timout_ms": 5}}), "\"timout_ms\"", "unknown field \"timout_ms\""),
    ];
    for (matcher, at, says) in cases {
        let p = project(&[("c", &[], json!([{"target": "final_response", "matcher": matcher}]))]);
        let out = run(&p);
        out.expect_code(2);
        let (path, line, column, message) = parse_located_error(out.stderr.lines().next().unwrap());
        assert_eq!((path.as_str(), line), ("datasets/suite.jsonl", 1), "{message}");
        assert_eq!(column, common::column_of(&p.line("datasets/suite.jsonl", 1), at), "{message}");
        assert!(message.contains(says), "{says:?} not in {message:?}");
        assert!(!p.exists(".stateval/runs"), "nothing ran");
    }
}

// ---------------------------------------------------------------------------------
// the shipped example

/// A copy of the graders example: its pipeline, dataset, grader, rubric, judge
/// recording and goldens.
fn example() -> Project {
    let p = Project::empty();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["datasets/graders", "examples/graders", "goldens/graders"] {
        copy_dir(&repo.join(dir), &p.join(dir));
    }
    p.write("pipeline/graders.toml", std::fs::read(repo.join("pipeline/graders.toml")).unwrap());
    p
}

#[test]
fn the_graders_example_passes_and_its_logs_are_its_goldens() {
    let p = example();
    let out = p.stateval(&["run", "pipeline/graders.toml"]);
    out.expect_code(0);
    assert!(out.stdout.contains("PASSED graders: 2/2 cases passed"), "{}", out.stdout);
    for log in p.log_files() {
        let case = log.split('/').nth(3).unwrap();
        let golden = format!("goldens/graders/suite/{case}.0.jsonl");
        assert_eq!(p.read(&log), p.read(&golden), "{log}");
    }
    p.stateval(&["validate", "examples/graders/judges/tone.jsonl"]).expect_code(0);
}

#[test]
fn a_changed_grader_verdict_is_caught_by_the_examples_golden() {
    let p = example();
    let script = p.read("examples/graders/tone.py").replace("\"courteous: {", "\"polite: {");
    p.write("examples/graders/tone.py", script);
    let out = p.stateval(&["run", "pipeline/graders.toml"]);
    out.expect_code(1);
    assert!(out.stdout.contains("grader_called): payload changed at /data/output_digest"), "{}", out.stdout);
}

#[test]
fn a_grader_on_a_metric_block_value_is_a_load_error_it_has_no_one_run_to_grade() {
    let p = project(&[]);
    p.write("graders/g.py", "print('{\"pass\": true}')\n");
    let case = json!({"id": "c", "agent": "support", "turns": ["hi"],
                      "recordings": [{"responses": [{"response": {"content": REPLY}}]}],
                      "trajectory": {"mode": "subsequence", "calls": []},
                      "expect": [{"target": "trajectory.mismatch_count",
                                  "matcher": {"custom": {"command": ["python3", "graders/g.py"]}}}]});
    p.write("datasets/suite.jsonl", format!("{case}\n"));
    let out = run(&p);
    out.expect_code(2);
    let (_, line, column, message) = parse_located_error(out.stderr.lines().next().unwrap());
    assert_eq!((line, column), (1, common::column_of(&p.line("datasets/suite.jsonl", 1), "\"matcher\"")));
    assert_eq!(
        message,
        "custom graders and judges grade one run's log; an assertion on a metric block's values cannot use them"
    );
}
