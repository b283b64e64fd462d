//! `stateval reconstruct` on what production emits: a trace with content capture off,
//! a profile whose manifest is pinned by digest, and real traces from the corpus —
//! each reconstructs, replays, and the incident's own pipeline passes its golden.

mod common;

use common::Project;

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/traces/real");

#[test]
fn content_capture_off_reconstructs_without_a_divergence_of_its_own_making() {
    let p = Project::new();
    let trace = format!("{REAL}/semconv-tool-calls-content-off.otlp.json");
    let out = p.stateval(&["reconstruct", &trace, "--as", "weather-off"]);
    out.expect_code(0);
    assert!(out.stdout.contains("reproduces the trace's 1 tool call(s): get_weather"), "{}", out.stdout);
    assert!(out.stdout.contains("were not captured"), "{}", out.stdout);
    p.stateval(&["run", "pipeline/incidents/weather-off.toml", "--jobs", "1"]).expect_code(0);
}

#[test]
fn a_profile_with_a_pinned_manifest_reconstructs_and_runs() {
    let p = Project::new();
    let out = p.stateval(&["reconstruct", "fixtures/traces/anthropic.json", "--as", "bank-1", "--agent", "bank"]);
    out.expect_code(0);
    assert!(out.stdout.contains("reproduces"), "{}", out.stdout);
    assert!(!p.read("pipeline/incidents/bank-1.toml").contains("tools_digest"));
    p.stateval(&["run", "pipeline/incidents/bank-1.toml", "--jobs", "1"]).expect_code(0);
}

#[test]
fn real_traces_reconstruct_and_their_pipelines_pass_their_goldens() {
    let p = Project::new();
    for (file, id, tools) in [
        ("openinference-spec-llm-tool-call.otlp.json", "multiply", "multiply"),
        ("logfire-js-vercel-ai-doGenerate.otlp.json", "weather-report", "get_lat_lng, get_weather"),
        ("vercel-deepseek-deepseek-tool-call.jsonl", "deepseek", "weather"),
        ("openllmetry-test_chat_tool_calls.cassette.json", "cassette", "get_current_weather"),
    ] {
        let out = p.stateval(&["reconstruct", &format!("{REAL}/{file}"), "--as", id]);
        out.expect_code(0);
        assert!(out.stdout.contains("reproduces the trace's") && out.stdout.contains(tools), "{file}: {}", out.stdout);
        assert!(p.exists(format!("goldens/incidents/{id}/{id}.0.jsonl")), "{file}");
        p.stateval(&["run", &format!("pipeline/incidents/{id}.toml"), "--jobs", "1"]).expect_code(0);
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
    p.stateval(&["run", "pipeline/incidents/early.toml", "--jobs", "1"]).expect_code(0);
}
