//! `stateval import` on the shapes production captures come in: several traces in one
//! file (never merged), SSE-framed streams, log lines with prefixes, and files that
//! are not traces at all (a zip, an API error) — each imported, or refused naming
//! what it is.

mod common;

use common::Project;

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/traces/real");

fn real(name: &str) -> String {
    std::fs::read_to_string(format!("{REAL}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The semconv tool-call example twice, the second copy under another trace id.
fn two_traces(p: &Project) {
    let one = real("semconv-tool-calls-content-on.otlp.json");
    let other = one.replace("4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c");
    let one: serde_json::Value = serde_json::from_str(&one).unwrap_or_default();
    let other: serde_json::Value = serde_json::from_str(&other).unwrap_or_default();
    let both = serde_json::json!({"resourceSpans": [one["resourceSpans"][0], other["resourceSpans"][0]]});
    p.write("two.json", both.to_string());
}

#[test]
fn a_file_with_two_traces_is_refused_naming_both_and_never_merged() {
    let p = Project::empty();
    two_traces(&p);
    let out = p.stateval(&["import", "two.json"]);
    out.expect_code(2);
    assert!(out.stderr.contains("holds 2 traces"), "{}", out.stderr);
    assert!(out.stderr.contains("4bf92f3577b34da6a3ce929d0e0e4736 (3 spans)"), "{}", out.stderr);
    assert!(out.stderr.contains("0af7651916cd43dd8448eb211c80319c"), "{}", out.stderr);
    assert!(out.stderr.contains("--trace-id"), "{}", out.stderr);
}

#[test]
fn trace_id_picks_one_trace_of_the_file() {
    let p = Project::empty();
    two_traces(&p);
    let out = p.stateval(&["import", "two.json", "--trace-id", "0af7651916cd43dd8448eb211c80319c", "-o", "one.jsonl"]);
    out.expect_code(0);
    assert!(out.stderr.contains("1 turns, 1 tool calls"), "{}", out.stderr);
    p.stateval(&["verify", "one.jsonl"]).expect_code(0);
    let missing = p.stateval(&["import", "two.json", "--trace-id", "ffff"]);
    missing.expect_code(2);
    assert!(missing.stderr.contains("no trace \"ffff\""), "{}", missing.stderr);
}

#[test]
fn output_to_a_directory_writes_one_log_per_trace() {
    let p = Project::empty();
    two_traces(&p);
    p.stateval(&["import", "two.json", "-o", "logs/"]).expect_code(0);
    for id in ["4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"] {
        let log = format!("logs/{id}.jsonl");
        assert!(p.exists(&log), "{log}");
        p.stateval(&["verify", &log]).expect_code(0);
        let text = p.read(&log);
        assert_eq!(text.matches("\"kind\":\"tool_executed\"").count(), 1, "{log}");
    }
}

#[test]
fn an_sse_recording_is_read_through_its_data_lines_and_errors_keep_their_lines() {
    let p = Project::empty();
    let jsonl = real("vercel-anthropic-anthropic-tool-no-args.jsonl");
    let sse: String = jsonl
        .lines()
        .map(|l| {
            let kind =
                serde_json::from_str::<serde_json::Value>(l).ok().and_then(|v| v["type"].as_str().map(String::from));
            format!("event: {}\ndata: {l}\n\n", kind.unwrap_or_default())
        })
        .collect();
    p.write("stream.sse", &sse);
    let out = p.stateval(&["import", "stream.sse", "-o", "s.jsonl"]);
    out.expect_code(0);
    assert!(out.stderr.contains("1 tool calls"), "{}", out.stderr);
    assert!(p.read("s.jsonl").contains("updateIssueList"));
    // a broken data line is named at its own line and column in the SSE file
    let broken = sse.replacen("\"type\":\"ping\"}", "\"type\":\"ping\"", 1);
    p.write("broken.sse", &broken);
    let line =
        broken.lines().position(|l| l.starts_with("data: {\"type\":\"ping\"") && !l.ends_with('}')).unwrap_or(0) + 1;
    let err = p.stateval(&["import", "broken.sse"]);
    err.expect_code(2);
    assert!(err.stderr.contains(&format!("broken.sse:{line}:")), "line {line}: {}", err.stderr);
}

#[test]
fn an_mcp_host_log_with_timestamp_prefixes_imports_its_tool_calls() {
    let p = Project::empty();
    let log = concat!(
        "2025-06-01T10:00:00.000Z [weather] [info] Initializing server...\n",
        "2025-06-01T10:00:00.100Z [weather] [info] Message from client: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"get_alerts\",\"arguments\":{\"state\":\"CA\"}}}\n",
        "2025-06-01T10:00:00.300Z [weather] [info] Message from server: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"No active alerts\"}],\"isError\":false}}\n",
    );
    p.write("mcp-server-weather.log", log);
    let out = p.stateval(&["import", "mcp-server-weather.log", "-o", "m.jsonl"]);
    out.expect_code(0);
    assert!(out.stderr.contains("(mcp)") && out.stderr.contains("1 tool calls"), "{}", out.stderr);
    assert!(p.read("m.jsonl").contains("No active alerts"));
}

/// A zip is read as an Inspect AI `.eval` log (tests/import_world.rs); a damaged one is
/// refused as a zip archive, never as text that is not UTF-8.
#[test]
fn a_damaged_zip_archive_is_refused_as_one() {
    let p = Project::empty();
    p.write("logs.eval", b"PK\x03\x04\x14\x00\x00\x00\x08\x00rest-of-a-zip".as_slice());
    let out = p.stateval(&["import", "logs.eval"]);
    out.expect_code(2);
    assert!(out.stderr.contains("logs.eval:1:1: cannot read the zip archive"), "{}", out.stderr);
    assert!(!out.stderr.contains("UTF-8"), "{}", out.stderr);
}

#[test]
fn proxy_records_of_request_and_streamed_response_become_one_conversation() {
    let p = Project::empty();
    let sse: String =
        real("vercel-anthropic-anthropic-tool-no-args.jsonl").lines().map(|l| format!("data: {l}\n\n")).collect();
    let first = serde_json::json!({
        "request": {"url": "https://api.anthropic.com/v1/messages", "body": {
            "model": "claude-sonnet-4-5", "max_tokens": 64,
            "messages": [{"role": "user", "content": "Please update the issue list"}]}},
        "response": {"status": 200, "body": sse},
    });
    p.write("proxy.jsonl", format!("{first}\n"));
    let out = p.stateval(&["import", "proxy.jsonl", "-o", "x.jsonl"]);
    out.expect_code(0);
    assert!(out.stderr.contains("(anthropic)") && out.stderr.contains("1 tool calls"), "{}", out.stderr);
    let log = p.read("x.jsonl");
    assert!(log.contains("Please update the issue list") && log.contains("updateIssueList"), "{log}");

    // a second record that is another conversation is refused, not merged
    let other = serde_json::json!({
        "request": {"url": "https://api.anthropic.com/v1/messages", "body": {
            "model": "claude-sonnet-4-5", "max_tokens": 64,
            "messages": [{"role": "user", "content": "Something else entirely"}]}},
        "response": {"status": 200, "body": {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}},
    });
    p.write("two.jsonl", format!("{first}\n{other}\n"));
    let err = p.stateval(&["import", "two.jsonl"]);
    err.expect_code(2);
    assert!(err.stderr.contains("not one conversation"), "{}", err.stderr);
    assert!(err.stderr.contains("two.jsonl:1:"), "{}", err.stderr);
}

/// The semconv tool-call example's spans as (key, plain value) lists.
fn semconv_spans() -> Vec<serde_json::Value> {
    let doc: serde_json::Value =
        serde_json::from_str(&real("semconv-tool-calls-content-on.otlp.json")).unwrap_or_default();
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array().cloned().unwrap_or_default()
}

fn plain(v: &serde_json::Value) -> String {
    match (v.get("stringValue"), v.get("intValue"), v.get("doubleValue")) {
        (Some(s), _, _) => s.as_str().unwrap_or_default().to_string(),
        (_, Some(i), _) => i.as_str().unwrap_or_default().to_string(),
        (_, _, Some(d)) => d.to_string(),
        _ => v.to_string(),
    }
}

fn micros(v: &serde_json::Value) -> u64 {
    v.as_str().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0) / 1_000
}

#[test]
fn jaeger_and_zipkin_exports_of_the_same_spans_import_like_otlp() {
    let p = Project::empty();
    let spans = semconv_spans();
    let jaeger_spans: Vec<serde_json::Value> = spans
        .iter()
        .map(|s| {
            let tags: Vec<serde_json::Value> = s["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| serde_json::json!({"key": a["key"], "type": "string", "value": plain(&a["value"])}))
                .collect();
            serde_json::json!({"traceID": s["traceId"], "spanID": s["spanId"], "operationName": s["name"],
                "startTime": micros(&s["startTimeUnixNano"]),
                "duration": micros(&s["endTimeUnixNano"]) - micros(&s["startTimeUnixNano"]), "tags": tags})
        })
        .collect();
    p.write(
        "jaeger.json",
        serde_json::json!({"data": [{"traceID": spans[0]["traceId"], "spans": jaeger_spans}]}).to_string(),
    );
    let zipkin: Vec<serde_json::Value> = spans
        .iter()
        .map(|s| {
            let tags: serde_json::Map<String, serde_json::Value> = s["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| (a["key"].as_str().unwrap_or_default().to_string(), serde_json::json!(plain(&a["value"]))))
                .collect();
            serde_json::json!({"traceId": s["traceId"], "id": s["spanId"], "name": s["name"],
                "timestamp": micros(&s["startTimeUnixNano"]),
                "duration": micros(&s["endTimeUnixNano"]) - micros(&s["startTimeUnixNano"]), "tags": tags})
        })
        .collect();
    p.write("zipkin.json", serde_json::Value::Array(zipkin).to_string());
    for file in ["jaeger.json", "zipkin.json"] {
        let out = p.stateval(&["import", file, "-o", &format!("{file}.log")]);
        out.expect_code(0);
        assert!(
            out.stderr.contains("(otel)") && out.stderr.contains("1 turns, 1 tool calls, 0 warnings"),
            "{file}: {}",
            out.stderr
        );
        let log = p.read(format!("{file}.log"));
        assert!(log.contains("rainy, 57°F") && log.contains("currently rainy"), "{file}");
    }
}
