//! A newcomer's first hour (issue #51): the traps a new user fell into, each closed.
//! A golden is never taken from a run that broke; names a check or a profile uses are
//! checked when the pipeline loads; `stateval run` finds its project from a
//! subdirectory; the run's root does not depend on where its store is.

mod common;

use common::Project;

const PIPELINE: &str = r#"[pipeline]
name = "newcomer"
datasets = ["datasets/*.jsonl"]

[agents.support]
system = "You are a help-desk agent."

[report]
json = "reports/report.json"
markdown = "reports/summary.md"
html = "reports/report.html"
"#;

/// A grader that passes every reply.
const GRADER: &str = "import json, sys\njson.load(sys.stdin)\nprint(json.dumps({\"pass\": True}))\n";
/// The same grader, broken: what it prints is not the JSON a grader answers with.
const BROKEN_GRADER: &str = "import sys\nsys.stdin.read()\nprint(\"Traceback: oops\")\n";

/// A project of `n` cases, each graded by `graders/check.py`.
fn graded_project(n: usize) -> Project {
    let p = Project::empty();
    p.write("pipeline/ci.toml", PIPELINE);
    p.write("graders/check.py", GRADER);
    let lines: Vec<String> = (0..n)
        .map(|i| {
            serde_json::json!({"id": format!("case-{i}"), "agent": "support", "turns": ["Where is my order?"],
                "recordings": [{"responses": [{"response": {"content": format!("It ships tomorrow ({i}).")}}]}],
                "expect": [{"target": "final_response",
                            "matcher": {"custom": {"command": ["python3", "graders/check.py"], "timeout_ms": 5000}}}]})
            .to_string()
        })
        .collect();
    p.write("datasets/suite.jsonl", lines.join("\n") + "\n");
    p
}

// ---------------------------------------------------------------------------------
// No golden from a broken run

#[test]
fn a_run_whose_grader_broke_is_listed_apart_and_neither_accept_nor_bless_makes_it_a_golden() {
    let p = graded_project(3);
    p.stateval(&["run", "--bless"]).expect_code(0);
    p.stateval(&["run"]).expect_code(0);
    let blessed = p.snapshot("goldens");

    p.write("graders/check.py", BROKEN_GRADER);
    let out = p.stateval(&["run"]);
    out.expect_code(1);
    // no group offers to accept what broke: the summary names the runs after the
    // failing cases, and why
    assert!(!out.stdout.contains("golden accept"), "{}", out.stdout);
    assert!(!out.stdout.contains("goldens differ"), "{}", out.stdout);
    let (failing, apart) = (
        out.stdout.find("FAIL datasets :: case-0").or(out.stdout.find("FAIL ")),
        out.stdout.find("runs that did not complete: 3 cases (3 runs), fix them before accepting goldens"),
    );
    assert!(failing.is_some() && apart.is_some() && failing < apart, "{}", out.stdout);
    assert!(
        out.stdout.contains("case-0 (run 0): final_response: custom grader `python3 graders/check.py`"),
        "{}",
        out.stdout
    );
    let md = p.read("reports/summary.md");
    assert!(md.contains("### Runs that did not complete") && !md.contains("golden accept"), "{md}");
    let html = p.read("reports/report.html");
    assert!(html.contains("<h2>Runs that did not complete</h2>") && !html.contains("golden accept"));

    // accepting the cause their goldens differ for is refused, naming each and why
    let accept = p.stateval(&["golden", "accept", "--cause", "behaviour"]);
    accept.expect_code(2);
    assert!(
        accept.stderr.contains("--cause behaviour: accepting nothing: 3 runs of this cause did not complete"),
        "{}",
        accept.stderr
    );
    assert!(accept.stderr.contains("\nerror:   case-2 (run 0): final_response: custom grader"), "{}", accept.stderr);
    assert_eq!(p.snapshot("goldens"), blessed, "accept wrote a golden of a broken run");

    // --bless writes none of them either, and says which and why
    let bless = p.stateval(&["run", "--bless"]);
    bless.expect_code(1);
    assert!(bless.stdout.contains("goldens: 0 blessed"), "{}", bless.stdout);
    assert!(
        bless.stdout.contains("goldens: 3 not blessed: their runs did not complete on their own"),
        "{}",
        bless.stdout
    );
    assert!(
        bless.stdout.contains("not blessed: the run did not complete on its own (final_response: custom grader"),
        "{}",
        bless.stdout
    );
    assert_eq!(p.snapshot("goldens"), blessed, "--bless wrote a golden of a broken run");

    // fixed, the suite is green against the goldens it had
    p.write("graders/check.py", GRADER);
    p.stateval(&["run"]).expect_code(0);
}

// ---------------------------------------------------------------------------------
// Names known when the pipeline loads are checked then

#[test]
fn a_misspelt_pipeline_key_is_named_at_its_place_not_reported_as_the_key_it_meant_missing() {
    let p = graded_project(1);
    p.write("pipeline/ci.toml", PIPELINE.replace("datasets = ", "datasetz = "));
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    assert_eq!(
        out.stderr,
        "error: pipeline/ci.toml:3:1: pipeline.datasetz: unknown field \"datasetz\" (did you mean \"datasets\"?)\n"
    );
    assert!(!p.exists("reports/report.json"));
}

#[test]
fn a_tag_no_case_carries_is_an_error_listing_the_suites_tags() {
    let p = graded_project(1);
    let mut line: serde_json::Value = serde_json::from_str(p.read("datasets/suite.jsonl").trim()).expect("a case");
    line["tags"] = serde_json::json!(["tone", "smoke"]);
    p.write("datasets/suite.jsonl", format!("{line}\n"));
    let out = p.stateval(&["run", "--tag", "smoke", "--tag", "tnoe"]);
    out.expect_code(2);
    assert_eq!(
        out.stderr,
        "error: --tag \"tnoe\": no case of the suite carries it (did you mean \"tone\"?); the suite's tags: smoke, tone\n"
    );
    p.stateval(&["run", "--tag", "smoke"]).expect_code(0);
}

#[test]
fn jobs_0_is_refused_and_jobs_is_documented_in_run_help() {
    let p = graded_project(1);
    let out = p.stateval(&["run", "--jobs", "0"]);
    out.expect_code(2);
    assert!(out.stderr.contains("invalid value '0' for '--jobs <N>'"), "{}", out.stderr);
    assert!(!p.exists(".stateval/runs"), "nothing ran");
    let help = p.stateval(&["run", "--help"]);
    assert!(help.stdout.contains("-j, --jobs <N>") && help.stdout.contains("at least 1"), "{}", help.stdout);
}

/// A one-case project whose case expects only `assertion`, and its dataset's text.
fn expecting(assertion: serde_json::Value) -> (Project, String) {
    let p = graded_project(1);
    let mut line: serde_json::Value = serde_json::from_str(p.read("datasets/suite.jsonl").trim()).expect("a case");
    line["expect"] = serde_json::json!([assertion]);
    let text = format!("{line}\n");
    p.write("datasets/suite.jsonl", &text);
    (p, text)
}

#[test]
fn a_misspelt_memory_tier_under_not_is_a_load_error_not_a_check_that_passes_testing_nothing() {
    let (p, text) =
        expecting(serde_json::json!({"target": "memory.semantik.x", "matcher": {"not": {"contains": "a"}}}));
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    // at the assertion's target, as an unknown target root is
    let column = common::column_of(&text, "\"target\":\"memory.semantik.x\"");
    assert_eq!(
        out.stderr,
        format!(
            "error: datasets/suite.jsonl:1:{column}: unknown memory tier \"semantik\" in memory (did you mean \
             \"semantic\"?); the tiers: working, episodic, semantic, procedural\n"
        )
    );
}

#[test]
fn a_misspelt_member_of_a_target_root_is_a_load_error_not_a_failure_after_the_run() {
    // `policy.denial` passed validate and failed only once the suite had run
    let (p, text) = expecting(serde_json::json!({"target": "policy.denial", "matcher": {"exact": 0}}));
    let out = p.stateval(&["validate"]);
    out.expect_code(2);
    let column = common::column_of(&text, "\"target\":\"policy.denial\"");
    assert_eq!(
        out.stderr,
        format!(
            "error: datasets/suite.jsonl:1:{column}: unknown target \"policy.denial\" (did you mean \"denials\"?); \
             the members of policy: verdicts, denials, escalations, verdict_at_turn\n"
        )
    );
}

#[test]
fn a_mistyped_script_path_of_a_grader_or_an_external_agent_is_a_load_error_at_its_place() {
    // a custom grader's script: the dataset line and the command's element
    let p = graded_project(2);
    let text = p.read("datasets/suite.jsonl").replace("graders/check.py", "graders/chekc.py");
    p.write("datasets/suite.jsonl", &text);
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    let first = text.lines().next().expect("a line");
    let column = common::column_of(first, "\"graders/chekc.py\"");
    assert!(
        out.stderr.starts_with(&format!(
            "error: datasets/suite.jsonl:1:{column}: custom grader: script \"graders/chekc.py\" does not exist \
             (did you mean \"graders/check.py\"?)\n"
        )),
        "{}",
        out.stderr
    );
    assert!(!p.exists(".stateval/runs"), "nothing ran");

    // an external agent's script: the profile, at its line
    let p = graded_project(1);
    p.write(
        "pipeline/ci.toml",
        PIPELINE.replace(
            "system = \"You are a help-desk agent.\"",
            "kind = \"external\"\ncommand = [\"python3\", \"agents/sopport.py\"]",
        ),
    );
    p.write("agents/support.py", "");
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    let column = common::column_of("command = [\"python3\", \"agents/sopport.py\"]", "\"agents/sopport.py\"");
    assert_eq!(
        out.stderr,
        format!(
            "error: pipeline/ci.toml:7:{column}: agents.support.command[1]: script \"agents/sopport.py\" does not \
             exist (did you mean \"agents/support.py\"?)\n"
        )
    );
}

// ---------------------------------------------------------------------------------
// Where the project is

#[test]
fn run_from_a_subdirectory_finds_the_project_above_says_where_and_means_the_same_files() {
    let (a, b) = (graded_project(2), graded_project(2));
    a.stateval(&["run"]).expect_code(0);
    let inside = b.cmd().current_dir(b.join("graders")).arg("run").output().expect("run stateval");
    let stderr = String::from_utf8_lossy(&inside.stderr);
    assert_eq!(inside.status.code(), Some(0), "{stderr}");
    let found = stderr.lines().next().unwrap_or_default();
    assert!(
        found.starts_with("stateval: no pipeline/ci.toml here; using ../pipeline/ci.toml (the project at "),
        "{stderr}"
    );
    for report in ["reports/report.json", "reports/summary.md"] {
        assert_eq!(a.read(report), b.read(report), "{report}");
    }
    assert!(!b.exists("graders/reports") && !b.exists("graders/.stateval"), "nothing is written where it was run");
    // a pipeline named that is not here or above is the error it was
    let missing = b.cmd().current_dir(b.join("graders")).args(["run", "pipeline/nope.toml"]).output().expect("run");
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn the_root_is_the_same_wherever_the_store_is_and_no_report_holds_an_absolute_path() {
    let p = graded_project(2);
    let root = |out: &common::Outcome| {
        let line = out.stdout.lines().find(|l| l.starts_with("root ")).unwrap_or_else(|| panic!("{}", out.stdout));
        line.split_whitespace().nth(1).expect("a root").to_string()
    };
    let default = p.stateval(&["run"]);
    default.expect_code(0);
    let inside = p.stateval(&["run", "--out", "elsewhere"]);
    inside.expect_code(0);
    let outside_dir = tempfile::tempdir().expect("a directory outside the project");
    let outside_arg = outside_dir.path().to_string_lossy().into_owned();
    let outside = p.stateval(&["run", "--out", &outside_arg]);
    outside.expect_code(0);
    assert_eq!(root(&default), root(&inside), "--out DIR in the project");
    assert_eq!(root(&default), root(&outside), "--out DIR outside the project");
    // the reports of the run outside show its logs by a relative path
    for report in ["reports/report.json", "reports/report.html", "reports/summary.md"] {
        assert!(!p.read(report).contains(&outside_arg), "{report} holds {outside_arg}");
    }
    let json = p.read("reports/report.json");
    assert!(json.contains("\"log\": \"../"), "the log shown relative to the project: {json}");

    // a golden that differs names the log in its reason's `stateval diff`: still one root
    p.stateval(&["run", "--bless"]).expect_code(0);
    p.write("datasets/suite.jsonl", p.read("datasets/suite.jsonl").replace("ships tomorrow", "ships today"));
    let default = p.stateval(&["run"]);
    default.expect_code(1);
    let inside = p.stateval(&["run", "--out", "elsewhere"]);
    inside.expect_code(1);
    assert_eq!(root(&default), root(&inside), "a differing golden, --out DIR in the project");
    let report = p.read("reports/report.json");
    let run_id = p.json("reports/report.json")["run_id"].as_str().expect("a run id").to_string();
    let command =
        format!("(`stateval diff goldens/suite/case-0.0.jsonl elsewhere/runs/{run_id}/case-0/0.jsonl` shows them)");
    assert!(report.contains(&command), "the reason's command names the log where it is: {report}");
}

// ---------------------------------------------------------------------------------
// The HTML report

#[test]
fn a_missing_golden_is_not_shown_as_a_green_pass_in_the_html_report() {
    let p = graded_project(1);
    p.stateval(&["run"]).expect_code(0);
    let html = p.read("reports/report.html");
    let row = html.lines().find(|l| l.contains("<code>golden</code>")).unwrap_or_else(|| panic!("no golden row"));
    assert!(row.starts_with("<tr><td><span class=\"b warn\">no golden</span>"), "{row}");
    // once blessed, the comparison held: a pass
    p.stateval(&["run", "--bless"]).expect_code(0);
    p.stateval(&["run"]).expect_code(0);
    let html = p.read("reports/report.html");
    let row = html.lines().find(|l| l.contains("<code>golden</code>")).unwrap_or_else(|| panic!("no golden row"));
    assert!(row.starts_with("<tr><td><span class=\"b pass\">pass</span>"), "{row}");
    // a passing run traces no value to an event: no column of dashes that reads as broken
    assert!(!html.contains("<th scope=\"col\">From event</th>"), "a passing run's checks have a From event column");
}

#[test]
fn a_recording_that_calls_a_tool_its_agent_cannot_reach_fails_validate_at_the_recording() {
    let p = Project::new();
    let rel = "datasets/examples/treasury.jsonl";
    let text = p.read(rel);
    let recording = "fixtures/recordings/pay-alice.jsonl";
    assert!(text.contains(recording), "{rel} no longer uses {recording}");
    let calls = p.read(recording);
    assert!(calls.contains("\"name\":\"transfer\""), "{recording} no longer calls transfer");
    p.write(recording, calls.replace("\"name\":\"transfer\"", "\"name\":\"transfr\""));
    let out = p.stateval(&["validate"]);
    out.expect_code(2);
    let (line, _) = text.lines().enumerate().find(|(_, l)| l.contains(recording)).expect("the case");
    let column = common::column_of(text.lines().nth(line).expect("line"), &format!("\"{recording}\""));
    assert!(
        out.stderr.contains(&format!(
            "{rel}:{}:{column}: recording {recording} calls tool \"transfr\", which no manifest the profile can reach \
             has (did you mean \"transfer\"?)",
            line + 1
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn an_external_agents_recording_that_calls_a_tool_its_manifest_lacks_fails_validate_too() {
    let p = Project::full();
    // pipeline/frameworks.toml: every agent is an external program served the tools of
    // fixtures/tools/frameworks-orders.json (their scripts must exist to validate)
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for script in [
        "openai_agents_sdk_agent.py",
        "langgraph_agent.py",
        "pydantic_ai_agent.py",
        "openai_node_agent.mjs",
        "ai_sdk_agent.mjs",
    ] {
        let from = repo.join("examples/agents").join(script);
        p.write(format!("examples/agents/{script}"), std::fs::read(&from).expect("an example agent"));
    }
    let rel = "datasets/frameworks/suite.jsonl";
    let recording = "fixtures/recordings/frameworks/langgraph.jsonl";
    let text = p.read(rel);
    let calls = p.read(recording);
    assert!(calls.contains("\"name\":\"get_order\""), "{recording} no longer calls get_order");
    p.stateval(&["validate", "pipeline/frameworks.toml"]).expect_code(0);
    p.write(recording, calls.replacen("\"name\":\"get_order\"", "\"name\":\"get_ordr\"", 1));
    let out = p.stateval(&["validate", "pipeline/frameworks.toml"]);
    out.expect_code(2);
    let (line, _) = text.lines().enumerate().find(|(_, l)| l.contains(recording)).expect("the case");
    let column = common::column_of(text.lines().nth(line).expect("line"), &format!("\"{recording}\""));
    let expected = format!(
        "{rel}:{}:{column}: recording {recording} calls tool \"get_ordr\", which no manifest the profile can reach \
         has (did you mean \"get_order\"?)",
        line + 1
    );
    assert!(out.stderr.contains(&expected), "{}", out.stderr);

    // an inline recording of an external agent is held to the same
    p.write(recording, calls);
    let inline = r#"{"id":"inline","agent":"langgraph","turns":["Where is order 1042?"],"recordings":[{"responses":[{"response":{"tool_calls":[{"name":"lookup_order","args":{"order":"1042"}}]}},{"response":{"content":"Shipped."}}]}]}"#;
    p.write("datasets/frameworks/inline.jsonl", format!("{inline}\n"));
    let out = p.stateval(&["validate", "pipeline/frameworks.toml"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("datasets/frameworks/inline.jsonl:1:")
            && out
                .stderr
                .contains("the recording calls tool \"lookup_order\", which no manifest the profile can reach has"),
        "{}",
        out.stderr
    );

    // an external agent whose profile names no manifest runs only tools of its own:
    // stateval cannot know them, and does not check them
    let toml = p.read("pipeline/frameworks.toml");
    let own = toml.replacen(
        "env = { AGENT_API = \"messages\", AGENT_STREAM = \"1\" }\ntools = \"fixtures/tools/frameworks-orders.json\"\n",
        "env = { AGENT_API = \"messages\", AGENT_STREAM = \"1\" }\n",
        1,
    );
    assert_ne!(own, toml, "the langgraph profile moved: update this test");
    p.write("pipeline/frameworks.toml", own);
    let out = p.stateval(&["validate", "pipeline/frameworks.toml"]);
    assert!(!out.stderr.contains("lookup_order"), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------
// The store

#[test]
fn reindex_names_an_edited_log_as_failed_not_as_incomplete() {
    let p = graded_project(1);
    p.stateval(&["run"]).expect_code(0);
    let run_id = p.run_ids().into_iter().next().expect("a run");
    let rel = format!("runs/{run_id}/case-0/0.jsonl");
    let log = p.read(format!(".stateval/{rel}"));
    let edited: Vec<String> = log
        .lines()
        .enumerate()
        .map(|(i, l)| if i == 1 { l.replacen("\"turn\"", "\"turm\"", 1) } else { l.to_string() })
        .collect();
    assert_ne!(edited.join("\n") + "\n", log, "the edit changed the log");
    p.write(format!(".stateval/{rel}"), edited.join("\n") + "\n");
    let out = p.stateval(&["reindex"]);
    out.expect_code(1);
    assert!(out.stderr.contains(&format!("FAILED {rel}:2: ")), "{}", out.stderr);
    assert!(!out.stderr.contains("incomplete"), "an edited log is not a killed run: {}", out.stderr);
    assert!(out.stdout.contains("(0 incomplete)"), "{}", out.stdout);
}

#[test]
fn recording_lint_over_every_recording_lints_what_the_pipeline_uses_and_names_each_file_it_does_not() {
    let p = Project::full();
    let mut files: Vec<String> = std::fs::read_dir(p.join("fixtures/recordings"))
        .expect("fixtures/recordings")
        .map(|e| e.expect("entry").path())
        .filter(|f| f.extension().is_some_and(|x| x == "jsonl"))
        .map(|f| format!("fixtures/recordings/{}", f.file_name().expect("name").to_string_lossy()))
        .collect();
    files.sort();
    // a recording the default pipeline uses, with a secret planted in it, sorted after a
    // file the pipeline does not use, so a lint that stops at that one misses it
    let used = "fixtures/recordings/ticket-resolve.jsonl";
    assert!(files.contains(&used.to_string()) && files.contains(&"fixtures/recordings/status-wedged.jsonl".into()));
    let text = p.read(used);
    let first = text.lines().next().expect("a line");
    let token = format!("ghp_{}", "Zq8Rt2Lm5Vx1".repeat(3));
    let planted = first.replacen("\"content\":\"", &format!("\"content\":\"token {token} "), 1);
    assert_ne!(planted, first, "{used}'s first line has no content to plant a secret in");
    p.write(used, text.replacen(first, &planted, 1));
    files.push("fixtures/recordings/no-such.jsonl".into());

    let args: Vec<&str> = ["recording", "lint"].into_iter().chain(files.iter().map(String::as_str)).collect();
    let out = p.stateval(&args);
    // a file that could not be linted is invalid input: 2, but only once all were seen
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains(&format!("{used}:1: holds a secret: GitHub token")), "{}", out.stdout);
    // the failing pipeline's recording, which the default one does not use
    let why = "error: fixtures/recordings/status-wedged.jsonl: no case of pipeline/ci.toml uses this recording";
    assert!(out.stderr.contains(why), "{}", out.stderr);
    assert!(out.stderr.contains("error: fixtures/recordings/no-such.jsonl: no such recording file"), "{}", out.stderr);
    assert!(!out.stderr.contains(p.path().to_string_lossy().as_ref()), "paths as given: {}", out.stderr);
    let summary = out.stdout.lines().last().unwrap_or_default();
    assert!(summary.starts_with("recording lint: ") && summary.contains(" file(s) not linted"), "{summary}");

    // only files the pipeline uses: the findings decide, 1
    let out = p.stateval(&["recording", "lint", used, "fixtures/recordings/balance-check.jsonl"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("recording lint: 2 file(s), 1 finding(s)\n"), "{}", out.stdout);
}

#[test]
fn merge_takes_quiet_as_run_does_and_prints_the_same_summary() {
    let p = Project::new();
    for (i, shard) in ["slice:1/2", "slice:2/2"].iter().enumerate() {
        p.stateval(&["run", "--quiet", "--shard", shard, "--out", &format!("shards/{i}")]).expect_code(0);
    }
    let plain = p.stateval(&["merge", "shards/0", "shards/1", "--out", "merged"]);
    plain.expect_code(0);
    let quiet = p.stateval(&["merge", "--quiet", "shards/0", "shards/1", "--out", "merged"]);
    quiet.expect_code(0);
    assert_eq!(quiet.stdout, plain.stdout);
    assert!(quiet.stdout.contains("PASSED ci: "), "{}", quiet.stdout);
    assert_eq!(quiet.stderr, "");
    assert_eq!(p.stateval(&["merge", "-q", "shards/0", "shards/1", "--out", "merged"]).stdout, plain.stdout);
}
