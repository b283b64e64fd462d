//! The rest of the real world, imported: an Inspect AI `.eval` archive read directly, a
//! LangSmith run that carries its messages, the Vercel AI SDK's GenAI attributes written
//! as JSON strings, streamed chunks assembled, and `reconstruct` keeping what a trace
//! declares about its tools (schema, safety class, trust) and saying what it guessed.
//! The traces are the hand-written ones of `fixtures/traces/handwritten/`; bad input is
//! built here.

mod common;

use std::io::Write;

use common::{Project, events_of};
use serde_json::{Value, json};

const HW: &str = "fixtures/traces/handwritten";

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// Import `file` (extra arguments after it) into `out`, verify it, and give its events.
fn import(p: &Project, file: &str, extra: &[&str], out: &str) -> Vec<Value> {
    let mut args = vec!["import", file, "-o", out];
    args.extend_from_slice(extra);
    p.stateval(&args).expect_code(0);
    p.stateval(&["verify", out]).expect_code(0);
    events_of(&p.read_bytes(out))
}

fn calls(events: &[Value]) -> Vec<(String, Value)> {
    of_kind(events, "tool_executed")
        .iter()
        .map(|e| (e["data"]["tool"].as_str().unwrap().to_string(), e["data"]["args"].clone()))
        .collect()
}

fn final_answer(events: &[Value]) -> Value {
    of_kind(events, "turn_completed").last().map_or(Value::Null, |e| e["data"]["response"].clone())
}

/// A zip of `members`, deflated as Inspect writes them.
fn zip_of(members: &[(&str, &str)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, text) in members {
        zip.start_file(*name, options).unwrap();
        zip.write_all(text.as_bytes()).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

#[test]
fn an_inspect_eval_archive_is_read_directly_one_sample_at_a_time() {
    let p = Project::full();
    let file = format!("{HW}/inspect-support.eval");
    // two samples, two conversations: never merged
    let out = p.stateval(&["import", &file]);
    out.expect_code(2);
    assert!(out.stderr.contains("holds 2 samples (weather, refund)"), "{}", out.stderr);
    let weather = import(&p, &file, &["--trace-id", "weather"], "weather.jsonl");
    assert_eq!(calls(&weather), [("get_forecast".to_string(), json!({"city": "Paris"}))]);
    assert_eq!(final_answer(&weather), "No umbrella needed: a 5% chance of rain and clear skies.");
    let reads = weather[0]["data"]["imported"]["reads"].as_str().unwrap();
    assert!(reads.contains(".eval archive, member samples/weather_epoch_1.json"), "{reads}");
    // the tool error of the second sample marks its call failed
    let refund = import(&p, &file, &["--trace-id", "refund"], "refund.jsonl");
    let executed = of_kind(&refund, "tool_executed");
    assert_eq!(calls(&refund).iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["lookup_order", "issue_refund"]);
    assert_eq!(executed[1]["data"]["is_error"], true, "{}", executed[1]);
    assert_ne!(executed[0]["data"]["is_error"], true, "{}", executed[0]);
    // -o DIR/: one log per sample
    p.stateval(&["import", &file, "-o", "per-sample/"]).expect_code(0);
    assert!(p.exists("per-sample/weather.jsonl") && p.exists("per-sample/refund.jsonl"));
    // the same bytes give the same log
    let again = import(&p, &file, &["--trace-id", "weather"], "again.jsonl");
    assert_eq!(again, weather);
}

#[test]
fn a_bad_eval_archive_names_the_member_and_the_line() {
    let p = Project::empty();
    let header = r#"{"version": 2, "status": "success", "eval": {"model": "openai/gpt-4o-mini"}}"#;
    p.write(
        "broken.eval",
        zip_of(&[
            ("header.json", header),
            ("samples/1_epoch_1.json", "{\"id\": 1,\n  \"messages\": [\n    {\"role\": }\n]}"),
        ]),
    );
    let out = p.stateval(&["import", "broken.eval"]);
    out.expect_code(2);
    assert!(out.stderr.contains("broken.eval!samples/1_epoch_1.json:3:"), "{}", out.stderr);
    // a message the Chat reader refuses names its place in the member
    let sample = "{\"id\": 1,\n \"messages\": [\n  {\"role\": \"user\", \"content\": \"hi\"},\n  {\"role\": \"wizard\", \"content\": \"x\"}\n]}";
    p.write("role.eval", zip_of(&[("header.json", header), ("samples/1_epoch_1.json", sample)]));
    let out = p.stateval(&["import", "role.eval"]);
    out.expect_code(2);
    assert!(out.stderr.contains("role.eval!samples/1_epoch_1.json:"), "{}", out.stderr);
    // a zip that is not an Inspect log, one without samples, a cut archive, --from
    p.write("other.zip", zip_of(&[("README.md", "hello")]));
    let out = p.stateval(&["import", "other.zip"]);
    out.expect_code(2);
    assert!(out.stderr.contains("not an Inspect AI .eval log"), "{}", out.stderr);
    p.write("empty.eval", zip_of(&[("header.json", header)]));
    assert!(p.stateval(&["import", "empty.eval"]).expect_code(2).stderr.contains("no samples"));
    let whole = zip_of(&[("header.json", header), ("samples/1_epoch_1.json", sample)]);
    p.write("cut.eval", &whole[..whole.len() / 2]);
    assert!(p.stateval(&["import", "cut.eval"]).expect_code(2).stderr.contains("cut.eval"));
    p.write("ok.eval", zip_of(&[("header.json", header), ("samples/1_epoch_1.json", r#"{"id": 1, "messages": []}"#)]));
    let out = p.stateval(&["import", "ok.eval", "--from", "openai"]);
    out.expect_code(2);
    assert!(out.stderr.contains("leave --from out"), "{}", out.stderr);
}

#[test]
fn a_langsmith_run_is_read_from_its_messages() {
    let p = Project::full();
    // an llm run: LangChain's serialised messages in, a generation out
    let events = import(&p, &format!("{HW}/langsmith-llm-run.json"), &[], "llm.jsonl");
    assert_eq!(events[0]["data"]["imported"]["format"], "langsmith");
    assert_eq!(calls(&events), [("get_forecast".to_string(), json!({"city": "Lyon"}))]);
    assert_eq!(final_answer(&events), "Probably: a 70% chance of rain in Lyon tomorrow.");
    let tools = &events[0]["data"]["declared_tools"];
    assert_eq!(tools[0]["input_schema"]["required"], json!(["city"]), "{tools}");
    // a graph's state: what follows the input is the run's, parallel calls in order
    let events = import(&p, &format!("{HW}/langgraph-run.json"), &[], "graph.jsonl");
    let names: Vec<String> = calls(&events).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["find_event", "cancel_event", "send_message"]);
    assert_eq!(of_kind(&events, "turn_started").len(), 1, "the input is not read twice");
    assert_eq!(final_answer(&events), "Done: the roadmap sync is cancelled and Dana has been told.");
    // a message whose kind cannot be told: exit 2 at its line
    let bad = p.read(format!("{HW}/langgraph-run.json")).replacen(
        "{\"type\": \"ai\", \"content\": \"\", \"id\": \"a1\"",
        "{\"type\": \"robot\", \"content\": \"\", \"id\": \"a1\"",
        1,
    );
    p.write("bad-run.json", &bad);
    let out = p.stateval(&["import", "bad-run.json", "--from", "langsmith"]);
    out.expect_code(2);
    let line = bad.lines().position(|l| l.contains("\"robot\"")).unwrap() + 1;
    assert!(
        out.stderr.contains(&format!("bad-run.json:{line}:")) && out.stderr.contains("\"robot\""),
        "{}",
        out.stderr
    );
}

#[test]
fn ai_sdk_attributes_written_as_json_strings_are_read_as_values() {
    let p = Project::full();
    let events = import(&p, &format!("{HW}/aisdk-v7-json-strings.otlp.json"), &[], "aisdk.jsonl");
    assert_eq!(calls(&events), [("get_forecast".to_string(), json!({"city": "Oslo"}))]);
    let executed = of_kind(&events, "tool_executed");
    assert_eq!(executed[0]["data"]["result"], json!({"rain_probability": 0.8, "wind_kph": 35}));
    assert_eq!(final_answer(&events), "Better not: 80% rain and 35 km/h wind are forecast in Oslo tomorrow.");
    let started = &events[0]["data"];
    assert_eq!(started["system"], json!(["You are a weather assistant."]), "gen_ai.system_instructions, once");
    assert_eq!(started["declared_tools"][0]["input_schema"]["required"], json!(["city"]), "{started}");
    // a JSON string that is not JSON: exit 2 at the attribute
    let text = p.read(format!("{HW}/aisdk-v7-json-strings.otlp.json"));
    let broken = text.replacen(r#"[{\"role\": \"system\", \"parts"#, r#"[{\"role\" \"system\", \"parts"#, 1);
    assert_ne!(broken, text);
    p.write("broken.otlp.json", &broken);
    let out = p.stateval(&["import", "broken.otlp.json"]);
    out.expect_code(2);
    // the attribute's value, the line before its string
    let line = broken.lines().position(|l| l.contains(r#"\"role\" \"system"#)).unwrap();
    assert!(out.stderr.contains(&format!("broken.otlp.json:{line}:")), "line {line}: {}", out.stderr);
    assert!(out.stderr.contains("is a string that is not JSON"), "{}", out.stderr);
}

/// Without the GenAI attributes, the AI SDK's own: `ai.prompt.messages` (a JSON string
/// with typed tool outputs) and `ai.prompt.tools` (a list of JSON strings).
#[test]
fn the_ai_sdks_own_attributes_give_the_tools_and_the_results() {
    let p = Project::full();
    let mut doc: Value = serde_json::from_str(&p.read(format!("{HW}/aisdk-v7-json-strings.otlp.json"))).unwrap();
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array_mut().unwrap() {
        let attrs = span["attributes"].as_array_mut().unwrap();
        attrs.retain(|a| !a["key"].as_str().unwrap().starts_with("gen_ai."));
    }
    p.write("ai-only.otlp.json", serde_json::to_string_pretty(&doc).unwrap());
    let events = import(&p, "ai-only.otlp.json", &[], "ai-only.jsonl");
    assert_eq!(calls(&events), [("get_forecast".to_string(), json!({"city": "Oslo"}))]);
    let tools = &events[0]["data"]["declared_tools"];
    assert_eq!(tools[0]["input_schema"]["required"], json!(["city"]), "{tools}");
    let executed = of_kind(&events, "tool_executed");
    assert_eq!(executed[0]["data"]["result"], json!({"rain_probability": 0.8, "wind_kph": 35}));
}

#[test]
fn streamed_chunks_are_assembled_into_messages() {
    let p = Project::full();
    let events = import(&p, &format!("{HW}/openai-chunks.jsonl"), &[], "chunks.jsonl");
    let called = &of_kind(&events, "model_called")[0]["data"]["response"];
    assert_eq!(called["tool_calls"][0]["name"], "get_quote");
    assert_eq!(called["tool_calls"][0]["args"], json!({"symbol": "AAPL"}));
    let events = import(&p, &format!("{HW}/anthropic-events.jsonl"), &[], "events.jsonl");
    let called = &of_kind(&events, "model_called")[0]["data"]["response"];
    assert_eq!(called["content"], "Checking the logs first.");
    assert_eq!(called["tool_calls"][0]["args"], json!({"service": "checkout", "minutes": 30}));
}

/// An MCP log whose `tools/list` declares schemas and annotations.
const MCP: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}
{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"search_web","description":"Search the web.","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"annotations":{"readOnlyHint":true,"openWorldHint":true}},{"name":"delete_file","description":"Delete a file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}},"annotations":{"destructiveHint":true,"readOnlyHint":false}},{"name":"echo","description":"Echo."}]}}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_web","arguments":{"q":"stateval"}}}
{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"3 results"}],"isError":false}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/tmp/x"}}}
{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"deleted"}],"isError":false}}
{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}
{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}
"#;

#[test]
fn reconstruct_keeps_declared_schemas_and_classes_and_says_what_it_guessed() {
    let p = Project::new();
    p.write("mcp-annotated.jsonl", MCP);
    let out = p.stateval(&["reconstruct", "mcp-annotated.jsonl", "--as", "annotated"]);
    let manifest = p.json("fixtures/tools/incidents/annotated.json");
    let tool = |name: &str| {
        manifest["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let search = tool("search_web");
    assert_eq!(search["input_schema"]["required"], json!(["q"]));
    assert_eq!((&search["safety_class"], &search["trust"]), (&json!("read"), &json!("untrusted")));
    assert_eq!(tool("delete_file")["safety_class"], "write");
    // destructiveHint is the manifest's destructive: its target is sensitive, and the
    // request floor needs a user's turn that asks for a deletion
    assert_eq!(tool("delete_file")["destructive"], true);
    assert!(tool("search_web").get("destructive").is_none());
    assert!(tool("echo").get("safety_class").is_none() && tool("echo").get("input_schema").is_none());
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains("tool search_web: safety class and trust read from MCP annotations readOnlyHint, openWorldHint"),
        "{said}"
    );
    assert!(said.contains("tool echo: the trace declares no input schema"), "{said}");
    assert!(said.contains("no safety class (the manifest's default, read)"), "{said}");
}
