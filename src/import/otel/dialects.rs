//! The instrumentation libraries' own conventions for the same facts.
//!
//! Before (and beside) the GenAI semantic conventions, each library wrote messages its
//! own way. Read here, each into the one [`Msg`] model, when a span carries no
//! semconv messages (the precedence is in the parent module):
//!
//! - **OpenLLMetry** (Traceloop): flattened `gen_ai.prompt.N.{role,content,tool_call_id}`,
//!   `gen_ai.prompt.N.tool_calls.M.{id,name,arguments}` and the same under
//!   `gen_ai.completion.N.*`; tool spans `traceloop.span.kind = tool` with
//!   `traceloop.entity.{name,input,output}`.
//! - **OpenInference** (Arize): `llm.input_messages.N.message.{role,content}`,
//!   `….message.contents.K.message_content.text`,
//!   `….message.tool_calls.M.tool_call.{id,function.name,function.arguments}`,
//!   `….message.tool_call_id`, and `llm.output_messages.N.message.*`; tool spans
//!   `openinference.span.kind = TOOL` with `tool.name`, `input.value`, `output.value`.
//! - **Vercel AI SDK**: `ai.prompt.messages` (a JSON list of `{role, content}` with
//!   `text`, `tool-call {toolCallId, toolName, input|args}` and `tool-result {toolCallId,
//!   output|result}` parts) and `ai.response.text` / `ai.response.toolCalls` on the
//!   provider-call spans (`ai.*.doGenerate` / `ai.*.doStream`); tool spans `ai.toolCall`
//!   with `ai.toolCall.{name,id,args|input,result|output}`.
//! - **Semantic Kernel and OpenLIT** (the pre-v1.28 form): `gen_ai.prompt` and
//!   `gen_ai.completion`, as span attributes or on `gen_ai.content.prompt` /
//!   `gen_ai.content.completion` events — a JSON list of chat messages, or plain text.
//! - **Logfire / Pydantic AI** (before it wrote the v1.37 attributes): an `events`
//!   attribute holding the v1.28 message events as a JSON list of objects, each with
//!   its `event.name`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::super::trace::{Args, Ptr, str_field};
use super::messages::{Msg, Part};
use super::otlp::Span;

/// Messages read from one library's convention, and which convention.
pub(super) struct Read {
    pub dialect: &'static str,
    pub input: Vec<Msg>,
    pub output: Vec<Msg>,
    /// Messages that could not be read, with why: each becomes a warning.
    pub skipped: Vec<(Ptr, String)>,
}

/// The first library convention the span's attributes (or `legacy` event fields) carry.
pub(super) fn read(span: &Span, legacy: &Map<String, Value>) -> Option<Read> {
    if span.attrs.keys().any(|k| k.starts_with("gen_ai.prompt.") || k.starts_with("gen_ai.completion.")) {
        return Some(flattened(
            span,
            "OpenLLMetry flattened gen_ai.prompt.N / gen_ai.completion.N",
            ["gen_ai.prompt.", "gen_ai.completion."],
            "",
        ));
    }
    if span.attrs.keys().any(|k| k.starts_with("llm.input_messages.") || k.starts_with("llm.output_messages.")) {
        return Some(flattened(
            span,
            "OpenInference llm.input_messages.N.message / llm.output_messages.N.message",
            ["llm.input_messages.", "llm.output_messages."],
            "message.",
        ));
    }
    if let Some(messages) = span.attr("ai.prompt.messages") {
        return Some(vercel(span, messages));
    }
    let prompt = span.attr("gen_ai.prompt").or(legacy.get("gen_ai.prompt"));
    let completion = span.attr("gen_ai.completion").or(legacy.get("gen_ai.completion"));
    if prompt.is_some() || completion.is_some() {
        let mut r = Read {
            dialect: "gen_ai.prompt / gen_ai.completion (pre-v1.28: Semantic Kernel, OpenLIT)",
            input: Vec::new(),
            output: Vec::new(),
            skipped: Vec::new(),
        };
        if let Some(p) = prompt {
            r.input = chat_list(span, "gen_ai.prompt", p, "user", &mut r.skipped);
        }
        if let Some(c) = completion {
            r.output = chat_list(span, "gen_ai.completion", c, "assistant", &mut r.skipped);
        }
        return Some(r);
    }
    None
}

/// Every message convention a span carries, in the order of precedence they are read
/// in (the first is the one read). `events` / `legacy`: the span has v1.28 message
/// events / pre-v1.28 `gen_ai.content.*` events.
pub(super) fn present(span: &Span, events: bool, legacy: bool) -> Vec<&'static str> {
    let key = |k: &str| span.attrs.contains_key(k);
    let prefix = |p: &str| span.attrs.keys().any(|k| k.starts_with(p));
    let mut out = Vec::new();
    if key("gen_ai.input.messages") || key("gen_ai.output.messages") {
        out.push("semconv v1.37+ gen_ai.input.messages / gen_ai.output.messages");
    }
    if events {
        out.push("semconv v1.28–v1.36 message events");
    }
    if logfire_events(span).is_some() {
        out.push("Logfire events attribute");
    }
    if prefix("gen_ai.prompt.") || prefix("gen_ai.completion.") {
        out.push("OpenLLMetry gen_ai.prompt.N / gen_ai.completion.N");
    }
    if prefix("llm.input_messages.") || prefix("llm.output_messages.") {
        out.push("OpenInference llm.input_messages / llm.output_messages");
    }
    if key("ai.prompt.messages") {
        out.push("Vercel AI SDK ai.prompt.messages");
    }
    if key("gen_ai.prompt") || key("gen_ai.completion") || legacy {
        out.push("gen_ai.prompt / gen_ai.completion");
    }
    out
}

/// Pydantic AI / Logfire's `events` attribute: the v1.28 message events, as fields.
pub(super) fn logfire_events(span: &Span) -> Option<Vec<(String, Map<String, Value>)>> {
    let list = parse_json(span.attr("events")?)?;
    let items = list.as_array()?;
    let events: Vec<(String, Map<String, Value>)> = items
        .iter()
        .filter_map(|e| {
            let obj = e.as_object()?;
            let name = obj.get("event.name").and_then(Value::as_str)?.to_string();
            Some((name, obj.clone()))
        })
        .collect();
    (!events.is_empty()).then_some(events)
}

fn parse_json(v: &Value) -> Option<Value> {
    match v {
        Value::String(s) => serde_json::from_str(s).ok(),
        other => Some(other.clone()),
    }
}

/// `PREFIX.N.[inner]field…` attributes → per-index maps of `field…` → value.
fn indexed(span: &Span, prefix: &str, inner: &str) -> BTreeMap<usize, (Ptr, Map<String, Value>)> {
    let mut out: BTreeMap<usize, (Ptr, Map<String, Value>)> = BTreeMap::new();
    for (key, value) in &span.attrs {
        let Some(rest) = key.strip_prefix(prefix) else { continue };
        let Some((n, field)) = rest.split_once('.') else { continue };
        let Ok(n) = n.parse::<usize>() else { continue };
        let field = field.strip_prefix(inner).unwrap_or(field);
        let entry = out.entry(n).or_insert_with(|| (span.attr_ptr(key), Map::new()));
        entry.1.insert(field.to_string(), value.clone());
    }
    out
}

/// Flattened, indexed messages (OpenLLMetry, OpenInference).
///
/// Both may leave out call ids (OpenInference's own example does). A call without
/// one gets `NAME#N`, its N-th call of that name in the span's messages, and a tool
/// message without `tool_call_id` is the result of the N-th call of its `name` (or,
/// unnamed, of the N-th call): the span's history repeats every earlier call in
/// order, so the same call gets the same id in every span that shows it.
fn flattened(span: &Span, dialect: &'static str, prefixes: [&str; 2], inner: &str) -> Read {
    let mut r = Read { dialect, input: Vec::new(), output: Vec::new(), skipped: Vec::new() };
    let mut calls_by_name: BTreeMap<String, usize> = BTreeMap::new();
    let mut results_by_name: BTreeMap<String, usize> = BTreeMap::new();
    let mut call_ids: Vec<String> = Vec::new();
    let mut results = 0usize;
    for (side, prefix) in prefixes.iter().enumerate() {
        for (_, (at, fields)) in indexed(span, prefix, inner) {
            let default_role = if side == 0 { "user" } else { "assistant" };
            let role = fields.get("role").and_then(Value::as_str).unwrap_or(default_role);
            let mut parts = Vec::new();
            let text = fields.get("content").and_then(Value::as_str).map(str::to_string).or_else(|| {
                // OpenInference content parts: contents.K.message_content.text
                let texts: Vec<&str> = fields
                    .iter()
                    .filter(|(k, _)| k.starts_with("contents.") && k.ends_with("message_content.text"))
                    .filter_map(|(_, v)| v.as_str())
                    .collect();
                (!texts.is_empty()).then(|| texts.concat())
            });
            let mut call_id = fields.get("tool_call_id").and_then(Value::as_str).map(str::to_string);
            if role == "tool" && call_id.is_none() {
                call_id = match fields.get("name").and_then(Value::as_str) {
                    Some(name) => {
                        let n = results_by_name.entry(name.to_string()).or_insert(0);
                        *n += 1;
                        Some(format!("{name}#{}", *n - 1))
                    }
                    None => call_ids.get(results).cloned(),
                };
            }
            if role == "tool" {
                results += 1;
                parts.push(Part::ToolResult {
                    id: call_id,
                    response: text.clone().map(Value::String).unwrap_or(Value::Null),
                });
            } else if let Some(t) = &text {
                parts.push(Part::Text(t.clone()));
            }
            let mut calls: BTreeMap<usize, Map<String, Value>> = BTreeMap::new();
            for (k, v) in &fields {
                let Some(rest) = k.strip_prefix("tool_calls.") else { continue };
                let Some((m, f)) = rest.split_once('.') else { continue };
                let Ok(m) = m.parse::<usize>() else { continue };
                let f = f.strip_prefix("tool_call.").unwrap_or(f);
                calls.entry(m).or_default().insert(f.to_string(), v.clone());
            }
            for (_, c) in calls {
                let name = c.get("name").or(c.get("function.name")).and_then(Value::as_str);
                let Some(name) = name else {
                    r.skipped.push((at.clone(), format!("{prefix}: a tool call without a name is not imported")));
                    continue;
                };
                let n = calls_by_name.entry(name.to_string()).or_insert(0);
                *n += 1;
                let id =
                    c.get("id").and_then(Value::as_str).map_or_else(|| format!("{name}#{}", *n - 1), str::to_string);
                call_ids.push(id.clone());
                parts.push(Part::ToolCall {
                    id: Some(id),
                    name: name.to_string(),
                    args: c.get("arguments").or(c.get("function.arguments")).map_or(Args::Absent, Args::from_value),
                });
            }
            let absent = text.is_none() && parts.is_empty();
            let msg = Msg { role: role.to_string(), parts, absent, at };
            if side == 0 { r.input.push(msg) } else { r.output.push(msg) }
        }
    }
    r
}

/// Vercel AI SDK provider-call spans.
fn vercel(span: &Span, messages: &Value) -> Read {
    let mut r = Read {
        dialect: "Vercel AI SDK ai.prompt.messages / ai.response.*",
        input: Vec::new(),
        output: Vec::new(),
        skipped: Vec::new(),
    };
    r.input = chat_list(span, "ai.prompt.messages", messages, "user", &mut r.skipped);
    let text = span.attr_str("ai.response.text");
    let calls = span.attr("ai.response.toolCalls").and_then(parse_json);
    if text.is_some() || calls.is_some() {
        let at = span.attr_ptr(if text.is_some() { "ai.response.text" } else { "ai.response.toolCalls" });
        let mut parts = Vec::new();
        if let Some(t) = text {
            parts.push(Part::Text(t.to_string()));
        }
        for c in calls.as_ref().and_then(Value::as_array).into_iter().flatten() {
            match chat_part(c) {
                Some(p) => parts.push(p),
                None => r.skipped.push((at.clone(), "ai.response.toolCalls: an entry without toolName".into())),
            }
        }
        r.output.push(Msg { role: "assistant".into(), parts, absent: false, at });
    }
    r
}

/// A JSON list of chat messages (or plain text) → messages.
fn chat_list(span: &Span, key: &str, value: &Value, text_role: &str, skipped: &mut Vec<(Ptr, String)>) -> Vec<Msg> {
    let at = span.attr_ptr(key);
    let parsed = parse_json(value);
    let list = match parsed {
        Some(Value::Array(items)) => items,
        Some(obj @ Value::Object(_)) => vec![obj],
        _ => {
            // plain text (OpenLIT writes the prompt as text)
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            return vec![Msg { role: text_role.into(), parts: vec![Part::Text(text)], absent: false, at }];
        }
    };
    let mut out = Vec::new();
    for (i, m) in list.iter().enumerate() {
        match chat_message(m, &at) {
            Ok(msg) => out.push(msg),
            Err(why) => skipped.push((at.clone(), format!("{key}: message {i} is not imported: {why}"))),
        }
    }
    out
}

/// One chat message in any of the common JSON shapes: `content` a string or parts
/// (`text`, `tool-call` / `tool_use` / `tool_call`, `tool-result` / `tool_result`),
/// OpenAI `tool_calls` and `tool_call_id`, or v1.37 `parts`.
pub(super) fn chat_message(m: &Value, at: &Ptr) -> Result<Msg, String> {
    let role = str_field(m, "role").ok_or("it has no role")?;
    let role = match role {
        "system" | "developer" => "system",
        "user" | "human" => "user",
        "assistant" | "model" | "ai" => "assistant",
        "tool" | "function" | "ipython" => "tool",
        other => return Err(format!("unknown role \"{other}\"")),
    };
    let mut parts = Vec::new();
    let blocks = m.get("parts").or(m.get("content"));
    // the AI SDK can write a message's content parts as a JSON string
    let decoded = blocks.and_then(Value::as_str).and_then(json_parts);
    let blocks = decoded.as_ref().or(blocks);
    match blocks {
        Some(Value::String(s)) if role == "tool" => parts.push(Part::ToolResult {
            id: str_field(m, "tool_call_id").or(str_field(m, "id")).map(str::to_string),
            response: Value::String(s.clone()),
        }),
        Some(Value::String(s)) => parts.push(Part::Text(s.clone())),
        Some(Value::Array(items)) => {
            for p in items {
                match chat_part(p) {
                    Some(Part::ToolResult { id: None, response }) if role == "tool" => {
                        parts.push(Part::ToolResult { id: str_field(m, "tool_call_id").map(str::to_string), response })
                    }
                    Some(part) => parts.push(part),
                    None => parts.push(Part::Other(str_field(p, "type").unwrap_or("untyped").to_string())),
                }
            }
        }
        _ => {}
    }
    for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        match chat_part(c) {
            Some(p) => parts.push(p),
            None => return Err("a tool call without a name".into()),
        }
    }
    let absent = blocks.is_none_or(Value::is_null) && parts.is_empty();
    Ok(Msg { role: role.to_string(), parts, absent, at: at.clone() })
}

/// A content string that is a JSON list of the AI SDK's typed parts (`text`,
/// `tool-call`, `tool-result`, `reasoning`, `file`, `image`): the parts. Any other
/// string is text, even one that is JSON.
fn json_parts(s: &str) -> Option<Value> {
    const TYPES: [&str; 6] = ["text", "tool-call", "tool-result", "reasoning", "file", "image"];
    if !s.trim_start().starts_with('[') {
        return None;
    }
    let value: Value = serde_json::from_str(s).ok()?;
    let items = value.as_array()?;
    let typed = |p: &Value| str_field(p, "type").is_some_and(|t| TYPES.contains(&t));
    (!items.is_empty() && items.iter().all(typed)).then_some(value)
}

/// The AI SDK (v5 on) wraps a tool result as `{"type": "json" | "text" | "error-json" |
/// "error-text", "value": …}`: the result is the value.
fn typed_output(output: &Value) -> &Value {
    match output {
        Value::Object(m)
            if m.len() == 2
                && matches!(
                    m.get("type").and_then(Value::as_str),
                    Some("json" | "text" | "error-json" | "error-text")
                ) =>
        {
            m.get("value").unwrap_or(output)
        }
        other => other,
    }
}

/// A content part or tool call in any of the common shapes.
fn chat_part(p: &Value) -> Option<Part> {
    let kind = str_field(p, "type").unwrap_or("");
    let function = p.get("function");
    let name = str_field(p, "toolName").or(str_field(p, "name")).or(function.and_then(|f| str_field(f, "name")));
    match kind {
        "text" | "output_text" | "input_text" => {
            Some(Part::Text(str_field(p, "text").or(str_field(p, "content")).unwrap_or_default().to_string()))
        }
        "tool-result" | "tool_result" | "tool_call_response" | "function_call_output" => Some(Part::ToolResult {
            id: str_field(p, "toolCallId").or(str_field(p, "tool_use_id")).or(str_field(p, "id")).map(str::to_string),
            response: p
                .get("output")
                .map(typed_output)
                .or(p.get("result"))
                .or(p.get("response"))
                .or(p.get("content"))
                .cloned()
                .unwrap_or(Value::Null),
        }),
        "tool-call" | "tool_use" | "tool_call" | "function" | "function_call" | "" => Some(Part::ToolCall {
            id: str_field(p, "toolCallId").or(str_field(p, "call_id")).or(str_field(p, "id")).map(str::to_string),
            name: name?.to_string(),
            args: p
                .get("input")
                .or(p.get("args"))
                .or(p.get("arguments"))
                .or(function.and_then(|f| f.get("arguments")))
                .map_or(Args::Absent, Args::from_value),
        }),
        _ => None,
    }
}
