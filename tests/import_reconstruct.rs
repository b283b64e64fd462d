//! `stateval reconstruct` on what production emits: a trace with content capture off,
//! a profile whose manifest is pinned by digest, and real traces from the corpus —
//! each reconstructs, replays, and the incident's own pipeline passes its golden.

mod common;

use common::Project;
use serde_json::Value;

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/traces/real");

/// Run the incident's pipeline and check that its run was compared with the golden
/// `reconstruct` wrote, and was identical to it.
#[track_caller]
fn runs_against_its_golden(p: &Project, id: &str) {
    let out = p.stateval(&["run", &format!("pipeline/incidents/{id}.toml"), "--jobs", "1"]);
    out.expect_code(0);
    // the incident's run: the one whose case is ID (run ids are digests, not times)
    let case: Value = p
        .run_ids()
        .iter()
        .filter_map(|run| {
            serde_json::from_str::<Value>(p.read(format!(".stateval/runs/{run}/cases.jsonl")).lines().next()?).ok()
        })
        .find(|c| c["id"] == id)
        .expect("the incident's run");
    let checks = case["runs"][0]["checks"].as_array().expect("checks").clone();
    let golden = checks.iter().find(|c| c["name"] == "golden").expect("a golden check");
    assert_eq!(golden["expected"], format!("goldens/incidents/{id}/{id}.0.jsonl"), "{checks:#?}");
    let reason = golden["reason"].as_str().unwrap_or_default();
    assert!(golden["passed"] == true && reason.starts_with("identical to the golden"), "{id}: {reason}");
}

#[test]
fn content_capture_off_reconstructs_without_a_divergence_of_its_own_making() {
    let p = Project::new();
    let trace = format!("{REAL}/semconv-tool-calls-content-off.otlp.json");
    let out = p.stateval(&["reconstruct", &trace, "--as", "weather-off"]);
    out.expect_code(0);
    assert!(out.stdout.contains("reproduces the trace's 1 tool call(s): get_weather"), "{}", out.stdout);
    assert!(out.stdout.contains("were not captured"), "{}", out.stdout);
    assert!(out.stdout.contains("the trace captured no final answer to compare"), "{}", out.stdout);
    runs_against_its_golden(&p, "weather-off");
}

#[test]
fn a_profile_with_a_pinned_manifest_reconstructs_and_runs() {
    let p = Project::new();
    let out = p.stateval(&["reconstruct", "fixtures/traces/anthropic.json", "--as", "bank-1", "--agent", "bank"]);
    out.expect_code(0);
    assert!(out.stdout.contains("reproduces"), "{}", out.stdout);
    assert!(!p.read("pipeline/incidents/bank-1.toml").contains("tools_digest"));
    runs_against_its_golden(&p, "bank-1");
}

#[test]
fn real_traces_reconstruct_and_their_pipelines_pass_their_goldens() {
    let p = Project::new();
    // the last: does the trace carry a final answer to compare?
    for (file, id, tools, answered) in [
        ("openinference-spec-llm-tool-call.otlp.json", "multiply", "multiply", true),
        ("logfire-js-vercel-ai-doGenerate.otlp.json", "weather-report", "get_lat_lng, get_weather", true),
        ("vercel-deepseek-deepseek-tool-call.jsonl", "deepseek", "weather", false),
        ("openllmetry-test_chat_tool_calls.cassette.json", "cassette", "get_current_weather", true),
        ("pydantic-ai-logfire-weather.otlp.json", "pydantic-ai", "get_weather", true),
        ("openlit-openai-weather.otlp.json", "openlit", "get_weather", true),
        ("semantic-kernel-agent-weather.otlp.jsonl", "semantic-kernel", "WeatherPlugin-get_weather", true),
    ] {
        let out = p.stateval(&["reconstruct", &format!("{REAL}/{file}"), "--as", id]);
        out.expect_code(0);
        assert!(out.stdout.contains("reproduces the trace's") && out.stdout.contains(tools), "{file}: {}", out.stdout);
        let said = if answered { "and its final answer" } else { "the trace captured no final answer" };
        assert!(out.stdout.contains(said), "{file}: {}", out.stdout);
        runs_against_its_golden(&p, id);
    }
}

#[test]
fn an_early_text_answer_mid_turn_is_joined_so_the_whole_turn_replays() {
    let p = Project::new();
    p.write(
        "early.json",
        r#"[{"role":"user","content":"refund order 7"},
 {"role":"assistant","content":"Let me look into that."},
 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_order","arguments":"{\"id\":7}"}}]},
 {"role":"tool","tool_call_id":"c1","content":"{\"status\":\"delivered\"}"},
 {"role":"assistant","content":"Refund issued."}]"#,
    );
    let out = p.stateval(&["reconstruct", "early.json", "--as", "early"]);
    out.expect_code(0);
    assert!(out.stdout.contains("joins that text to its next response"), "{}", out.stdout);
    assert!(out.stdout.contains("reproduces the trace's 1 tool call(s): get_order"), "{}", out.stdout);
    let recording = p.read("fixtures/recordings/incidents/early.jsonl");
    assert_eq!(recording.lines().count(), 2, "{recording}");
    assert!(recording.lines().next().unwrap_or_default().contains("Let me look into that."), "{recording}");
    runs_against_its_golden(&p, "early");
}

#[test]
fn two_answers_in_one_turn_keep_the_later_one_as_the_answer_to_compare() {
    let p = Project::new();
    p.write(
        "twice.json",
        r#"[{"role":"user","content":"status?"},
 {"role":"assistant","content":"Checking."},
 {"role":"assistant","content":"All systems normal."}]"#,
    );
    let out = p.stateval(&["reconstruct", "twice.json", "--as", "twice", "--from", "openai"]);
    out.expect_code(0);
    assert!(out.stdout.contains("keeps the later answer"), "{}", out.stdout);
    assert!(out.stdout.contains("reproduces the trace's 0 tool calls and its final answer"), "{}", out.stdout);
    runs_against_its_golden(&p, "twice");
}

#[test]
fn a_replay_that_diverges_is_named_by_the_golden_diff_and_writes_no_golden() {
    let p = Project::new();
    // production closed the account; today's treasury profile escalates a privileged
    // call to a human, and nobody answers in a replay
    p.write(
        "close.json",
        r#"[{"role":"user","content":"close my account"},
 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"close_account","arguments":"{}"}}]},
 {"role":"tool","tool_call_id":"c1","content":"{\"status\":\"closed\"}"},
 {"role":"assistant","content":"Your account is closed."}]"#,
    );
    let out = p.stateval(&["reconstruct", "close.json", "--as", "close", "--agent", "treasury"]);
    out.expect_code(1);
    let stdout = &out.stdout;
    assert!(stdout.contains("diverges from the trace: first divergence (the trace as the golden) at seq"), "{stdout}");
    assert!(stdout.contains("close_account") && stdout.contains("no golden written"), "{stdout}");
    assert!(!p.exists("goldens/incidents/close/close.0.jsonl"));
}

#[test]
fn an_mcp_protocol_error_stays_a_protocol_error_through_reconstruct_and_run() {
    let p = Project::new();
    let out = p.stateval(&["reconstruct", "fixtures/traces/mcp.jsonl", "--as", "rollback"]);
    out.expect_code(0);
    assert!(out.stdout.contains("reproduces the trace's"), "{}", out.stdout);
    // the fixture answers the call with the JSON-RPC error the server sent
    let manifest = p.json("fixtures/tools/incidents/rollback.json");
    let rollback = manifest["tools"].as_array().unwrap().iter().find(|t| t["name"] == "rollback").unwrap();
    let response = &rollback["responses"][0];
    assert_eq!(response["protocol_error"], serde_json::json!({"code": -32602, "message": "Unknown tool: rollback"}));
    assert!(response.get("result").is_none() && response.get("is_error").is_none(), "{response}");
    runs_against_its_golden(&p, "rollback");
    // the replay logs it as a protocol error, its result the error object
    let golden = p.read("goldens/incidents/rollback/rollback.0.jsonl");
    let call: Value = golden
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "tool_executed" && e["data"]["tool"] == "rollback")
        .expect("the rollback call");
    assert_eq!(call["data"]["error_kind"], "protocol", "{call}");
    assert_eq!(call["data"]["is_error"], true);
    assert_eq!(call["data"]["result"]["code"], -32602);
}

#[test]
fn a_protocol_error_with_a_result_is_a_manifest_error_at_the_key() {
    let p = Project::new();
    p.stateval(&["reconstruct", "fixtures/traces/mcp.jsonl", "--as", "rollback"]).expect_code(0);
    let path = "fixtures/tools/incidents/rollback.json";
    let text = p.read(path);
    p.write(path, text.replace("\"protocol_error\": {", "\"effect\": [], \"protocol_error\": {"));
    let out = p.stateval(&["validate", "pipeline/incidents/rollback.toml"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("rollback.json:")
            && out.stderr.contains("protocol_error never reaches the tool, so it has no effect"),
        "{}",
        out.stderr
    );
}
