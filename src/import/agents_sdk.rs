//! OpenAI Agents SDK trace exports.
//!
//! The SDK's tracing processor exports `trace` and `trace.span` objects (as the body
//! `{"data": [...]}` it sends, a JSON array, or JSONL): each span has `id`,
//! `trace_id`, `parent_id`, `started_at` / `ended_at` (ISO 8601), `error` and
//! `span_data` with a `type`. Read here:
//!
//! - `function` spans — one tool call each: `name`, `input` (the arguments as a JSON
//!   string), `output`; a span `error` marks the call failed (a tool error);
//! - `generation` spans (Chat Completions models) — `input` / `output` message lists:
//!   the first user message is the turn's input, the last output text the answer;
//! - `agent`, `response`, `handoff`, `guardrail`, `custom` and other spans are counted
//!   in `source.other_messages`: the export does not carry their content (a `response`
//!   span holds only the response id), so the model's text from the Responses API is
//!   absent.
//!
//! Calls are taken in start order, one model response each (its text absent), in one
//! turn — like an MCP log, the export does not group calls by model response. A file
//! with several traces is refused with their ids unless `--trace-id` names one.

use serde_json::{Value, json};

use super::Format;
use super::builder::Builder;
use super::source::Source;
use super::trace::{Args, Call, CallResult, Content, ErrorKind, Ptr, Step, Trace, provenance, str_field};
use crate::diag::InputError;

const READS: &str = "OpenAI Agents SDK trace export (trace / trace.span objects: function and generation spans)";

/// Is `src` an Agents SDK export?
pub fn detect(src: &Source) -> bool {
    items(src).iter().any(|(_, v)| {
        matches!(str_field(v, "object"), Some("trace.span" | "trace"))
            && (v.get("span_data").is_some() || v.get("workflow_name").is_some())
    })
}

/// Every exported object with where it is.
fn items<'s>(src: &'s Source<'_>) -> Vec<(Ptr, &'s Value)> {
    let mut out = Vec::new();
    for (doc, pointer, record) in src.records() {
        match record.get("data") {
            Some(Value::Array(list)) => {
                out.extend(list.iter().enumerate().map(|(i, v)| (Ptr::new(doc, format!("{pointer}/data/{i}")), v)))
            }
            _ => out.push((Ptr::new(doc, pointer), record)),
        }
    }
    out
}

/// The trace ids of the export, in order.
pub fn trace_ids(src: &Source) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for (_, v) in items(src) {
        let id = match str_field(v, "object") {
            Some("trace") => str_field(v, "id"),
            _ => str_field(v, "trace_id"),
        };
        if let Some(id) = id
            && !ids.iter().any(|i| i == id)
        {
            ids.push(id.to_string());
        }
    }
    ids
}

pub fn parse(src: &Source, trace_id: Option<&str>) -> Result<Trace, InputError> {
    let ids = trace_ids(src);
    let wanted = match (trace_id, ids.len()) {
        (Some(id), _) if ids.iter().any(|i| i == id) => Some(id.to_string()),
        (Some(id), _) => {
            return Err(src.error(0, "", format!("no trace \"{id}\" in this export; its traces: {}", ids.join(", "))));
        }
        (None, n) if n > 1 => {
            return Err(src.error(
                0,
                "",
                format!(
                    "this export holds {n} traces ({}); read as one they would be merged. Pass --trace-id ID to \
                     import one, or -o DIR/ to write one log per trace",
                    ids.join(", ")
                ),
            ));
        }
        _ => None,
    };
    let mut b = Builder::new(src, Format::AgentsSdk, READS);
    let mut spans: Vec<(Ptr, &Value)> = items(src)
        .into_iter()
        .filter(|(_, v)| str_field(v, "object") == Some("trace.span"))
        .filter(|(_, v)| wanted.as_deref().is_none_or(|w| str_field(v, "trace_id") == Some(w)))
        .collect();
    // ISO 8601 timestamps of one clock sort as text
    spans.sort_by(|a, b| str_field(a.1, "started_at").cmp(&str_field(b.1, "started_at")));
    for (_, v) in items(src).iter().filter(|(_, v)| str_field(v, "object") == Some("trace")) {
        if wanted.as_deref().is_none_or(|w| str_field(v, "id") == Some(w)) {
            b.meta("trace_id", v.get("id").cloned().unwrap_or(Value::Null));
            b.meta("workflow_name", v.get("workflow_name").cloned().unwrap_or(Value::Null));
        }
    }
    let generations: Vec<&(Ptr, &Value)> = spans
        .iter()
        .filter(|(_, v)| v.pointer("/span_data/type").and_then(Value::as_str) == Some("generation"))
        .collect();
    let first_user = generations.iter().find_map(|(at, v)| {
        let input = v.pointer("/span_data/input")?.as_array()?;
        let user = input.iter().find(|m| str_field(m, "role") == Some("user"))?;
        Some((at.clone(), text_of(user.get("content")?)))
    });
    match first_user {
        Some((at, text)) => b.user(Content::Text(text), provenance([("span", Some(json!(at.pointer)))]), None, &at),
        None => b.user(Content::Absent, Default::default(), None, &Ptr::new(0, "")),
    }
    let mut pending: Vec<(String, CallResult, Ptr)> = Vec::new();
    for (k, (at, v)) in spans.iter().enumerate() {
        let kind = v.pointer("/span_data/type").and_then(Value::as_str).unwrap_or("untyped");
        if kind != "function" {
            b.count_other(&format!("span:{kind}"));
            continue;
        }
        let data = &v["span_data"];
        let name = str_field(data, "name").unwrap_or("unnamed");
        let id = str_field(v, "id").map_or_else(|| format!("function-{k}"), str::to_string);
        let args = data.get("input").map_or(Args::Absent, Args::from_value);
        let mut call = Call::new(Some(id.clone()), name, args, at.clone());
        call.source.insert("span_id".into(), json!(id));
        let mut step = Step::new(Content::Absent, at.clone());
        step.calls.push(call);
        b.step(step)?;
        let error = v.get("error").filter(|e| !e.is_null());
        let failed = error.is_some();
        let mut source = serde_json::Map::new();
        if let Some(e) = error {
            source.insert("error".into(), e.clone());
        }
        let outcome = CallResult {
            result: data.get("output").cloned().filter(|o| !o.is_null()).or_else(|| error.cloned()),
            is_error: Some(failed),
            error_kind: failed.then_some(ErrorKind::Tool),
            source,
            ..CallResult::default()
        };
        pending.push((id, outcome, at.clone()));
    }
    for (id, outcome, at) in pending {
        b.result(&id, outcome, &at)?;
    }
    // the last generation's output text is the answer, when the export has one
    let last_call = spans
        .iter()
        .filter(|(_, v)| v.pointer("/span_data/type").and_then(Value::as_str) == Some("function"))
        .filter_map(|(_, v)| str_field(v, "started_at"))
        .max();
    if let Some((at, v)) = generations.last().filter(|(_, v)| str_field(v, "started_at") > last_call) {
        let output = v.pointer("/span_data/output").and_then(Value::as_array).cloned().unwrap_or_default();
        let text: String = output.iter().filter_map(|m| m.get("content")).map(text_of).collect();
        if !text.is_empty() {
            b.step(Step::new(Content::Text(text), at.clone()))?;
        }
    }
    b.finish()
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| str_field(p, "text")).collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn export(extra: &str) -> String {
        format!(
            r#"{{"data": [
  {{"object": "trace", "id": "trace_1", "workflow_name": "Support"}},
  {{"object": "trace.span", "id": "span_a", "trace_id": "trace_1", "parent_id": null, "started_at": "2025-03-01T10:00:00.000Z", "ended_at": "2025-03-01T10:00:09.000Z", "span_data": {{"type": "agent", "name": "Support"}}, "error": null}},
  {{"object": "trace.span", "id": "span_g1", "trace_id": "trace_1", "parent_id": "span_a", "started_at": "2025-03-01T10:00:00.100Z", "ended_at": "2025-03-01T10:00:01.000Z", "span_data": {{"type": "generation", "input": [{{"role": "user", "content": "Where is order 7?"}}], "output": [{{"role": "assistant", "content": null}}]}}, "error": null}},
  {{"object": "trace.span", "id": "span_f1", "trace_id": "trace_1", "parent_id": "span_a", "started_at": "2025-03-01T10:00:01.100Z", "ended_at": "2025-03-01T10:00:01.200Z", "span_data": {{"type": "function", "name": "get_order", "input": "{{\"id\": 7}}", "output": "shipped"}}, "error": null}},
  {{"object": "trace.span", "id": "span_f2", "trace_id": "trace_1", "parent_id": "span_a", "started_at": "2025-03-01T10:00:01.300Z", "ended_at": "2025-03-01T10:00:01.400Z", "span_data": {{"type": "function", "name": "track", "input": "{{\"id\": 7}}", "output": null}}, "error": {{"message": "Error running tool", "data": {{"error": "timeout"}}}}}},
  {{"object": "trace.span", "id": "span_g2", "trace_id": "trace_1", "parent_id": "span_a", "started_at": "2025-03-01T10:00:02.000Z", "ended_at": "2025-03-01T10:00:03.000Z", "span_data": {{"type": "generation", "input": [], "output": [{{"role": "assistant", "content": "It shipped."}}]}}, "error": null}}{extra}
]}}"#
        )
    }

    #[test]
    fn function_spans_are_the_calls_in_order_and_generations_give_input_and_answer() {
        let text = export("");
        let src = Source::parse(Path::new("agents.json"), &text).unwrap();
        assert!(detect(&src));
        let trace = parse(&src, None).unwrap();
        let names: Vec<&str> = trace.calls().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["get_order", "track"]);
        assert_eq!(trace.turns[0].input, Content::Text("Where is order 7?".into()));
        let failed = trace.calls().nth(1).and_then(|c| c.outcome.clone()).unwrap();
        assert_eq!((failed.is_error, failed.error_kind), (Some(true), Some(ErrorKind::Tool)));
        assert_eq!(trace.turns[0].steps.last().map(|s| s.content.clone()), Some(Content::Text("It shipped.".into())));
    }

    #[test]
    fn two_traces_are_refused_and_one_is_picked_by_id() {
        let text = export(
            r#",
  {"object": "trace.span", "id": "span_x", "trace_id": "trace_2", "parent_id": null, "started_at": "2025-03-01T11:00:00.000Z", "ended_at": "2025-03-01T11:00:01.000Z", "span_data": {"type": "function", "name": "other", "input": "{}", "output": "ok"}, "error": null}"#,
        );
        let src = Source::parse(Path::new("agents.json"), &text).unwrap();
        let err = parse(&src, None).unwrap_err();
        assert!(err.message.contains("2 traces (trace_1, trace_2)"), "{err}");
        let trace = parse(&src, Some("trace_2")).unwrap();
        assert_eq!(trace.calls().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["other"]);
    }
}
