//! Traces as users bring them (#49, item 4), through `stateval import` end to end: each
//! shape imports right — the calls, their arguments and results, the answer, checked
//! against what the file holds — or is refused naming what is missing. The files are
//! hand-written in the vendors' documented shapes (fixtures/traces/handwritten/README.md).

mod common;

use std::path::Path;

use common::{Outcome, Project};
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/traces/handwritten").join(name).to_string_lossy().into_owned()
}

/// Import `file` into a log in a fresh project: the outcome and the log's events.
fn import(file: &str) -> (Outcome, Vec<Value>) {
    let p = Project::empty();
    let out = p.stateval(&["import", file, "-o", "log.jsonl"]);
    let events = if out.code == 0 { common::events_of(&p.read_bytes("log.jsonl")) } else { Vec::new() };
    (out, events)
}

fn of_kind<'e>(events: &'e [Value], kind: &str) -> Vec<&'e Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// (tool, args, result, is_error) of each executed call, in order.
fn calls(events: &[Value]) -> Vec<(String, Value, Value, Value)> {
    of_kind(events, "tool_executed")
        .into_iter()
        .map(|e| {
            let d = &e["data"];
            (
                d["tool"].as_str().unwrap_or("").to_string(),
                d["args"].clone(),
                d["result"].clone(),
                d["is_error"].clone(),
            )
        })
        .collect()
}

fn warnings(events: &[Value]) -> Vec<String> {
    of_kind(events, "error")
        .into_iter()
        .map(|e| {
            format!("{}: {}", e["data"]["code"].as_str().unwrap_or(""), e["data"]["message"].as_str().unwrap_or(""))
        })
        .collect()
}

fn answer(events: &[Value]) -> Value {
    of_kind(events, "turn_completed").last().map_or(Value::Null, |e| e["data"]["response"].clone())
}

#[test]
fn an_openai_chunk_stream_saved_by_the_sdk_with_its_usage_chunk_and_done_line() {
    let (out, events) = import(&fixture("openai-chunks-sdk-done.jsonl"));
    out.expect_code(0);
    assert_eq!(calls(&events), [("get_weather".into(), json!({"city": "Paris"}), Value::Null, Value::Null)]);
    let called = of_kind(&events, "model_called");
    assert_eq!(called.len(), 1);
    // the usage chunk (no choices) gives the response's tokens
    assert_eq!(called[0]["data"]["usage"], json!({"input_tokens": 81, "output_tokens": 17}));
}

#[test]
fn an_azure_openai_chunk_stream_opened_by_its_prompt_filter_chunk() {
    let (out, events) = import(&fixture("openai-chunks-azure.jsonl"));
    out.expect_code(0);
    assert_eq!(answer(&events), "Paris is sunny.");
    assert!(calls(&events).is_empty());
}

#[test]
fn an_anthropic_event_stream_with_thinking_and_a_tool_use() {
    let (out, events) = import(&fixture("anthropic-events-thinking.jsonl"));
    out.expect_code(0);
    assert_eq!(
        calls(&events),
        [(
            "get_weather".into(),
            json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
            Value::Null,
            Value::Null
        )]
    );
    let called = of_kind(&events, "model_called");
    assert_eq!(called[0]["data"]["response"]["content"], "Okay, let me check the weather for San Francisco, CA:");
    // the reasoning is kept as provenance, never replayed as the model's text
    let thinking = called[0]["data"]["source"]["thinking"].to_string();
    assert!(thinking.contains("I'll call get_weather"), "{thinking}");
}

#[test]
fn a_langsmith_trace_of_a_wrap_openai_client_is_read_from_its_llm_runs() {
    // a @traceable chain with two wrap_openai llm runs and no tool runs: the tool call
    // and its result live in the llm runs' messages; as a tree and as a list of runs
    for name in ["langsmith-wrap-openai-tree.json", "langsmith-wrap-openai-runs.jsonl"] {
        let (out, events) = import(&fixture(name));
        out.expect_code(0);
        assert_eq!(
            calls(&events),
            [("get_weather".into(), json!({"city": "Paris"}), json!("18°C and sunny"), Value::Null)],
            "{name}"
        );
        assert_eq!(answer(&events), "It is 18°C and sunny in Paris.", "{name}");
        let reads = of_kind(&events, "run_started")[0]["data"]["imported"]["reads"].to_string();
        assert!(reads.contains("the last of 2 llm runs under chain \\\"weather_agent\\\""), "{name}: {reads}");
    }
}

#[test]
fn a_langsmith_tree_whose_llm_runs_are_not_one_conversation_is_refused() {
    let p = Project::empty();
    let mut tree: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("langsmith-wrap-openai-tree.json")).unwrap()).unwrap();
    // the last llm run now starts a conversation of its own
    let first = tree["child_runs"][0]["inputs"]["messages"].clone();
    tree["child_runs"][1]["inputs"]["messages"] = json!([first[1].clone()]);
    p.write("tree.json", serde_json::to_string_pretty(&tree).unwrap());
    let out = p.stateval(&["import", "tree.json", "-o", "log.jsonl"]);
    out.expect_code(2);
    assert!(out.stderr.contains("are not one conversation"), "{}", out.stderr);
}

#[test]
fn inspect_browser_tool_calls_known_only_by_their_function() {
    let (out, events) = import(&fixture("inspect-browser.json"));
    out.expect_code(0);
    let got = calls(&events);
    let names: Vec<&str> = got.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, ["web_browser_go", "web_browser_click", "web_browser_go"]);
    assert_eq!(got[0].1, json!({"url": "https://www.aisi.gov.uk/"}));
    // each result went to its own call: the first page, the About page after the click
    // (a tool message without tool_call_id), and the second go's timeout (same id as the first)
    assert!(got[0].2.as_str().unwrap().contains("Rigorous AI research"), "{:?}", got[0].2);
    assert!(got[1].2.as_str().unwrap().contains("is a directorate"), "{:?}", got[1].2);
    assert_eq!(got[2].3, json!(true));
    assert_eq!(got[0].3, Value::Null);
    let w = warnings(&events);
    assert_eq!(w.iter().filter(|w| w.starts_with("call_by_function")).count(), 2, "{w:?}");
    assert!(w.iter().all(|w| w.contains("attributed by order")), "{w:?}");
}

#[test]
fn ai_sdk_telemetry_with_message_contents_as_json_strings() {
    let (out, events) = import(&fixture("aisdk-v7-content-strings.otlp.json"));
    out.expect_code(0);
    assert_eq!(
        calls(&events),
        [(
            "get_forecast".into(),
            json!({"city": "Oslo"}),
            json!({"rain_probability": 0.8, "wind_kph": 35}),
            json!(false)
        )]
    );
    assert_eq!(answer(&events), "Better not: 80% rain and 35 km/h wind are forecast in Oslo tomorrow.");
    // the second span repeats the first's call (arguments an object there, a JSON
    // string in the first span's ai.response.toolCalls): no rewritten history
    let w = warnings(&events);
    assert!(!w.iter().any(|w| w.starts_with("history_rewritten")), "{w:?}");
}

#[test]
fn ai_sdk_tool_message_as_plain_text_is_refused_naming_the_missing_call_id() {
    let p = Project::empty();
    let text = std::fs::read_to_string(fixture("aisdk-v7-content-strings.otlp.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    let mut edited = 0;
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array_mut().unwrap() {
        for a in span["attributes"].as_array_mut().unwrap() {
            if a["key"] == "ai.prompt.messages" {
                let mut messages: Value = serde_json::from_str(a["value"]["stringValue"].as_str().unwrap()).unwrap();
                for m in messages.as_array_mut().unwrap() {
                    if m["role"] == "tool" {
                        m["content"] = json!("{\"rain_probability\": 0.8}");
                        edited += 1;
                    }
                }
                a["value"]["stringValue"] = Value::String(messages.to_string());
            }
        }
    }
    assert_eq!(edited, 1);
    p.write("spans.json", serde_json::to_string_pretty(&doc).unwrap());
    let out = p.stateval(&["import", "spans.json", "-o", "log.jsonl"]);
    out.expect_code(2);
    assert!(out.stderr.contains("without its call's id (toolCallId"), "{}", out.stderr);
    assert!(!p.exists("log.jsonl"));
}

#[test]
fn the_legacy_function_call_is_attributed_by_order_and_says_so() {
    let (out, events) = import(&fixture("openai-legacy-function-call.json"));
    out.expect_code(0);
    let got = calls(&events);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "get_current_weather");
    assert_eq!(got[0].1, json!({"location": "Boston, MA"}));
    assert!(got[0].2.as_str().unwrap().contains("\"temperature\": \"72\""), "{:?}", got[0].2);
    let w = warnings(&events);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("function_call_by_order") && w[0].contains("attributed by order"), "{w:?}");
    assert!(answer(&events).as_str().unwrap().starts_with("The weather in Boston"));
}

#[test]
fn legacy_function_results_go_to_calls_of_their_own_name_in_order_and_a_stray_one_is_refused() {
    let p = Project::empty();
    let call = |name: &str, args: &str| json!({"role": "assistant", "content": null, "function_call": {"name": name, "arguments": args}});
    let result = |name: &str, text: &str| json!({"role": "function", "name": name, "content": text});
    let conversation = json!([
        {"role": "user", "content": "Weather in Oslo, then Rome?"},
        call("weather", "{\"city\": \"Oslo\"}"),
        result("weather", "rain"),
        call("weather", "{\"city\": \"Rome\"}"),
        result("weather", "sun"),
        {"role": "assistant", "content": "Oslo: rain. Rome: sun."}
    ]);
    p.write("legacy.json", conversation.to_string());
    let out = p.stateval(&["import", "legacy.json", "-o", "log.jsonl"]);
    out.expect_code(0);
    let events = common::events_of(&p.read_bytes("log.jsonl"));
    let got: Vec<(Value, Value)> = calls(&events).into_iter().map(|c| (c.1, c.2)).collect();
    assert_eq!(got, [(json!({"city": "Oslo"}), json!("rain")), (json!({"city": "Rome"}), json!("sun"))]);
    let ids: Vec<Value> = of_kind(&events, "tool_executed").iter().map(|e| e["data"]["call_id"].clone()).collect();
    assert_eq!(ids, [json!("weather#0"), json!("weather#1")]);

    // a function result naming a function no call is waiting on
    let stray = json!([{"role": "user", "content": "x"}, call("weather", "{}"), result("forecast", "sun")]);
    p.write("stray.json", stray.to_string());
    let out = p.stateval(&["import", "stray.json", "-o", "stray.jsonl"]);
    out.expect_code(2);
    assert!(out.stderr.contains("a \"function\" result for forecast with no call of forecast"), "{}", out.stderr);
    // and one without a name
    let nameless =
        json!([{"role": "user", "content": "x"}, call("weather", "{}"), {"role": "function", "content": "r"}]);
    p.write("nameless.json", nameless.to_string());
    let out = p.stateval(&["import", "nameless.json", "-o", "n.jsonl"]);
    out.expect_code(2);
    assert!(out.stderr.contains("without \"name\""), "{}", out.stderr);
}
