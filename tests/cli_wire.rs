//! Wire fidelity end to end: what agent frameworks send, read the way the vendors read
//! it. A Responses `item_reference` reads as the item it names (ids this case run
//! issued), so a history sent by reference replays like one sent whole, records
//! upstream as the items themselves, and an id the run never issued is a 400 naming it;
//! Anthropic's Messages endpoint answers with and without `/v1` in the path; and every
//! answer-changing request parameter is part of the request digest, so changing any one
//! of them makes replay diverge naming it. The agent is `tests/agents/history_agent.py`
//! (standard library only); recordings come from the in-repo fake vendor
//! (`tests/frameworks/fake_vendor.rs`).

mod common;
#[path = "frameworks/fake_vendor.rs"]
mod fake_vendor;

use std::path::Path;

use common::Project;
use fake_vendor::FakeVendor;
use serde_json::{Value, json};

const TOOLS: &str = r#"{"tools": [
  {"name": "get_order", "description": "Look an order up.", "safety_class": "read",
   "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
   "responses": [{"args": {"order": "1042"}, "result": {"status": "shipped", "eta": "Thursday"}}]}]}"#;

fn python() -> bool {
    let ok =
        std::process::Command::new("python3").arg("-c").arg("import json").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: no python3 on PATH (the standard-library test agent needs it)");
    }
    ok
}

/// One profile of `history_agent.py` with these environment knobs.
fn profile(name: &str, env: &[(&str, &str)]) -> String {
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", toml_string(v))).collect();
    format!(
        "[agents.{name}]\nkind = \"external\"\ncommand = [\"python3\", \"agents/history_agent.py\"]\n\
         tools = \"fixtures/tools/orders.json\"\ntimeout_ms = 20000\nenv = {{ {} }}\n\n",
        env.join(", ")
    )
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A project with `pipeline/wire.toml` holding `profiles` and a dataset of `cases`;
/// divergence fails the case.
fn project(profiles: &[String], cases: &[Value]) -> Project {
    let p = Project::empty();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    p.write("agents/history_agent.py", std::fs::read(repo.join("tests/agents/history_agent.py")).unwrap());
    p.write("fixtures/tools/orders.json", TOOLS);
    p.write(
        "pipeline/wire.toml",
        format!(
            "[pipeline]\nname = \"wire\"\ndatasets = [\"datasets/wire.jsonl\"]\n\n{}\
             [replay]\non_divergence = \"fail\"\n\n[gates]\ndefault = {{ min_pass_rate = 1.0 }}\n\n\
             [report]\njson = \"reports/report.json\"\n",
            profiles.concat()
        ),
    );
    let lines: Vec<String> = cases.iter().map(Value::to_string).collect();
    p.write("datasets/wire.jsonl", lines.join("\n") + "\n");
    p
}

/// The conversation every replayed case here has: a lookup, its answer, a thank-you.
fn conversation() -> Value {
    json!([
        {"response": {"content": "", "tool_calls": [{"id": "c1", "name": "get_order", "args": {"order": "1042"}}]}},
        {"response": {"content": "It ships Thursday."}},
        {"response": {"content": "You're welcome."}}
    ])
}

fn two_turn_case(id: &str, agent: &str, recordings: Value) -> Value {
    json!({"id": id, "agent": agent, "turns": ["Where is order 1042?", "Thanks!"], "recordings": [recordings],
           "expect": [{"target": "final_response", "matcher": {"exact": "You're welcome."}}]})
}

/// The events of run 0 of `case` in the project's only run.
fn events(p: &Project, case: &str) -> Vec<Value> {
    let logs: Vec<String> = p.log_files().into_iter().filter(|f| f.ends_with(&format!("/{case}/0.jsonl"))).collect();
    assert_eq!(logs.len(), 1, "one log of {case}: {logs:?}");
    p.read(&logs[0]).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn of_kind(events: &[Value], kind: &str) -> Vec<Value> {
    events.iter().filter(|e| e["kind"] == kind).map(|e| e["data"].clone()).collect()
}

fn request_hashes(events: &[Value]) -> Vec<Value> {
    of_kind(events, "model_called").iter().map(|d| d["request_hash"].clone()).collect()
}

#[test]
fn a_history_sent_by_item_reference_replays_exactly_as_the_same_history_sent_whole() {
    if !python() {
        return;
    }
    let p = project(
        &[profile("inline", &[("WIRE_STORED", "0")]), profile("stored", &[("WIRE_STORED", "1")])],
        &[
            two_turn_case("inline", "inline", json!({"responses": conversation()})),
            two_turn_case("stored", "stored", json!({"responses": conversation()})),
        ],
    );
    p.stateval(&["run", "pipeline/wire.toml"]).expect_code(0);
    let (inline, stored) = (events(&p, "inline"), events(&p, "stored"));
    assert!(of_kind(&stored, "error").is_empty(), "{:?}", of_kind(&stored, "error"));
    // three model calls, the later ones carrying the history by reference: the same digests
    assert_eq!(request_hashes(&stored).len(), 3);
    assert_eq!(request_hashes(&stored), request_hashes(&inline));
}

#[test]
fn an_item_reference_to_an_id_the_run_never_issued_is_a_400_naming_the_id() {
    if !python() {
        return;
    }
    let agent = profile("dangling", &[("WIRE_STORED", "1"), ("WIRE_REFERENCE", "msg_0123abcd")]);
    let case = json!({"id": "dangling", "agent": "dangling", "turns": ["Where is order 1042?"],
                      "recordings": [{"responses": conversation()}],
                      "expect": [{"target": "final_response", "matcher": {"regex":
                          "^HTTP 400: .*input\\[0\\]: item_reference \"msg_0123abcd\" is not an output item of this run$"}}]});
    let p = project(&[agent], &[case]);
    p.stateval(&["run", "pipeline/wire.toml"]).expect_code(0);
    let errors = of_kind(&events(&p, "dangling"), "error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0]["message"].as_str().unwrap().contains("\"msg_0123abcd\""), "{errors:?}");
}

#[test]
fn record_sends_referenced_items_upstream_whole_and_the_recording_replays_byte_identically() {
    if !python() {
        return;
    }
    let vendor = FakeVendor::start();
    let p = project(
        &[profile("stored", &[("WIRE_STORED", "1")])],
        &[json!({"id": "rec", "agent": "stored", "turns": ["Where is order 1042?", "Thanks!"],
                 "recordings": ["fixtures/recordings/rec.jsonl"],
                 "expect": [{"target": "final_response", "matcher": {"exact": fake_vendor::REPLY}}]})],
    );
    let out = p
        .cmd()
        .env("OPENAI_API_KEY", "sk-test-0123456789abcdef")
        .args(["record", "pipeline/wire.toml", "--case", "rec", "--upstream-url", &vendor.url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen = vendor.seen();
    // each turn looks the order up, then answers; later calls carry the history
    assert_eq!(seen.len(), 4, "{seen:?}");
    for (_, body) in &seen {
        assert!(!body.to_string().contains("item_reference"), "our ids went upstream: {body}");
    }
    assert_eq!(seen[2].1["input"][1]["type"], "function_call", "{}", seen[2].1);
    p.stateval(&["run", "pipeline/wire.toml"]).expect_code(0);
    let log = p.log_files()[0].clone();
    let bytes = p.read_bytes(&log);
    assert!(of_kind(&events(&p, "rec"), "replay_diverged").is_empty());
    p.stateval(&["run", "pipeline/wire.toml"]).expect_code(0);
    assert_eq!(p.read_bytes(&log), bytes, "a second run wrote a different log");
}

#[test]
fn anthropic_messages_are_served_with_and_without_v1_in_the_path() {
    if !python() {
        return;
    }
    let p = project(
        &[
            profile("with_v1", &[("WIRE_API", "messages"), ("WIRE_MESSAGES_PATH", "/v1/messages")]),
            profile("without_v1", &[("WIRE_API", "messages"), ("WIRE_MESSAGES_PATH", "/messages")]),
        ],
        &[
            two_turn_case("with-v1", "with_v1", json!({"responses": conversation()})),
            two_turn_case("without-v1", "without_v1", json!({"responses": conversation()})),
        ],
    );
    p.stateval(&["run", "pipeline/wire.toml"]).expect_code(0);
    let (with, without) = (events(&p, "with-v1"), events(&p, "without-v1"));
    assert!(of_kind(&without, "error").is_empty(), "{:?}", of_kind(&without, "error"));
    assert_eq!(request_hashes(&without).len(), 3);
    assert_eq!(request_hashes(&without), request_hashes(&with));
    assert!(of_kind(&without, "model_called").iter().all(|d| d["api"] == "anthropic.messages"));
}

/// A parameter as the request spells it, a changed value, and the pointer that must be named.
type Change = (&'static str, Value, &'static str);

/// Per API: the parameters the recording is made with, and for each one a changed
/// value with the JSON Pointer the divergence must name.
fn parameters() -> Vec<(&'static str, Value, Vec<Change>)> {
    vec![
        (
            "chat",
            json!({"parallel_tool_calls": true, "reasoning_effort": "low", "response_format": {"type": "text"},
                   "tool_choice": "auto", "temperature": 0.2, "top_p": 0.9, "max_completion_tokens": 300,
                   "stop": ["END"], "seed": 7, "frequency_penalty": 0.5, "presence_penalty": 0.5, "n": 1}),
            vec![
                ("parallel_tool_calls", json!(false), "/params/parallel_tool_calls"),
                ("reasoning_effort", json!("high"), "/params/reasoning/effort"),
                ("response_format", json!({"type": "json_object"}), "/params/response_format/type"),
                ("tool_choice", json!("required"), "/params/tool_choice"),
                ("temperature", json!(0.7), "/params/temperature"),
                ("top_p", json!(0.5), "/params/top_p"),
                ("max_completion_tokens", json!(500), "/params/max_tokens"),
                ("stop", json!(["STOP"]), "/params/stop/0"),
                ("seed", json!(8), "/params/seed"),
                ("frequency_penalty", json!(0.1), "/params/frequency_penalty"),
                ("presence_penalty", json!(0.1), "/params/presence_penalty"),
                ("n", json!(2), "/params/n"),
            ],
        ),
        (
            "responses",
            json!({"parallel_tool_calls": true, "reasoning": {"effort": "low"}, "text": {"format": {"type": "text"}},
                   "tool_choice": "auto", "temperature": 0.2, "top_p": 0.9, "max_output_tokens": 300,
                   "truncation": "disabled", "max_tool_calls": 4}),
            vec![
                ("parallel_tool_calls", json!(false), "/params/parallel_tool_calls"),
                ("reasoning", json!({"effort": "high"}), "/params/reasoning/effort"),
                ("text", json!({"format": {"type": "json_object"}}), "/params/response_format/type"),
                ("tool_choice", json!("required"), "/params/tool_choice"),
                ("temperature", json!(0.7), "/params/temperature"),
                ("top_p", json!(0.5), "/params/top_p"),
                ("max_output_tokens", json!(500), "/params/max_tokens"),
                ("truncation", json!("auto"), "/params/truncation"),
                ("max_tool_calls", json!(2), "/params/max_tool_calls"),
            ],
        ),
        (
            "messages",
            json!({"tool_choice": {"type": "auto"}, "temperature": 0.2, "top_p": 0.9, "top_k": 40,
                   "stop_sequences": ["END"], "thinking": {"type": "disabled"}}),
            vec![
                ("tool_choice", json!({"type": "any"}), "/params/tool_choice/type"),
                ("temperature", json!(0.7), "/params/temperature"),
                ("top_p", json!(0.5), "/params/top_p"),
                ("top_k", json!(5), "/params/top_k"),
                ("stop_sequences", json!(["STOP"]), "/params/stop/0"),
                ("thinking", json!({"type": "enabled", "budget_tokens": 1024}), "/params/thinking/budget_tokens"),
                ("max_tokens", json!(100), "/params/max_tokens"),
            ],
        ),
    ]
}

#[test]
fn changing_any_answer_changing_parameter_makes_replay_diverge_naming_it() {
    if !python() {
        return;
    }
    let vendor = FakeVendor::start();
    for (api, recorded_with, changes) in parameters() {
        let agent = |params: &Value| profile("agent", &[("WIRE_API", api), ("WIRE_PARAMS", &params.to_string())]);
        let case = json!({"id": "params", "agent": "agent", "turns": ["Where is order 1042?"],
                          "recordings": ["fixtures/recordings/params.jsonl"]});
        let p = project(&[agent(&recorded_with)], std::slice::from_ref(&case));
        let out = p
            .cmd()
            .env("OPENAI_API_KEY", "sk-test-0123456789abcdef")
            .env("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
            .args(["record", "pipeline/wire.toml", "--case", "params", "--upstream-url", &vendor.url])
            .output()
            .unwrap();
        assert!(out.status.success(), "{api}: {}", String::from_utf8_lossy(&out.stderr));
        p.stateval(&["run", "pipeline/wire.toml"]).expect_code(0);
        let pipeline = p.read("pipeline/wire.toml");
        for (key, value, pointer) in changes {
            let mut changed = recorded_with.clone();
            changed[key] = value.clone();
            p.write("pipeline/wire.toml", pipeline.replace(&agent(&recorded_with), &agent(&changed)));
            let what = format!("{api}: {key} = {value}");
            std::fs::remove_dir_all(p.join(".stateval")).unwrap();
            let out = p.stateval(&["run", "pipeline/wire.toml"]);
            assert_eq!(out.code, 1, "{what} replayed green\n{}{}", out.stdout, out.stderr);
            let diverged = of_kind(&events(&p, "params"), "replay_diverged");
            assert_eq!(diverged.len(), 1, "{what}");
            // the first pointer names the parameter; nothing outside the parameters differs
            let pointers = diverged[0]["pointers"].as_array().unwrap().clone();
            assert_eq!(pointers[0], pointer, "{what}");
            let parameter = pointer.split('/').take(3).collect::<Vec<_>>().join("/");
            assert!(pointers.iter().all(|q| q.as_str().unwrap().starts_with(&parameter)), "{what}: {pointers:?}");
        }
    }
}
