//! OpenTelemetry GenAI spans in OTLP/JSON.
//!
//! **Supported semantic-convention versions** (GenAI conventions are still
//! "Development" stability, so the versions are named exactly):
//!
//! - **Attribute form, semconv v1.37.0 and later.** Inference spans
//!   (`gen_ai.operation.name` = `chat`, `text_completion` or `generate_content`) carry
//!   `gen_ai.input.messages`, `gen_ai.output.messages` and `gen_ai.system_instructions`
//!   — a JSON string or a structured value — shaped as the v1.37.0 JSON schemas define
//!   them: messages `{role, parts}` with `text`, `tool_call {id, name, arguments}` and
//!   `tool_call_response {id, response}` parts (other part types — reasoning, blob,
//!   file, uri, server tool calls — are warned about, not imported). The same
//!   attributes on a `gen_ai.client.inference.operation.details` event are read too.
//!   `execute_tool` spans give each call's outcome: `gen_ai.tool.call.id`,
//!   `gen_ai.tool.name`, span status `ERROR` or `error.type` for a failed call, and the
//!   opt-in `gen_ai.tool.call.arguments` / `gen_ai.tool.call.result` when present.
//! - **Event form, semconv v1.28.0 to v1.36.0** (deprecated in v1.37.0). The events
//!   `gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`
//!   (`content`, `tool_calls [{id, type, function {name, arguments}}]`),
//!   `gen_ai.tool.message` (`content`, `id`) and `gen_ai.choice` (`index`,
//!   `finish_reason`, `message`), either as OTLP log records (`resourceLogs`, the name
//!   in `eventName` or the `event.name` attribute, the fields in the `body`) tied to
//!   their inference span by `spanId`, or as span events on the inference span with the
//!   body's fields as attributes.
//! - Token usage from `gen_ai.usage.input_tokens` / `output_tokens` (and the older
//!   `prompt_tokens` / `completion_tokens`); ids from `gen_ai.response.id`,
//!   `gen_ai.conversation.id`, trace and span ids.
//! - Not read: the pre-v1.28 `gen_ai.content.prompt` / `gen_ai.content.completion`
//!   span events (a warning says so), and OTLP protobuf (export as OTLP/JSON).
//!
//! **Reconstruction.** Inference spans are taken in start-time order. Each one's input
//! messages are the history the model saw: the messages beyond what the previous span
//! saw and answered are new (user messages open turns, tool messages are results);
//! when a span's input does not extend the previous history, the messages after its
//! last assistant message are taken as new, with a warning. Each span's output is one
//! model response. When message content was not captured (content capture off, the
//! instrumentations' default), inputs and texts are absent and each response's calls
//! come from the `execute_tool` spans that ran before the next inference span.

pub mod dialects;
pub mod exports;
pub mod messages;
pub mod otlp;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Format;
use super::builder::Builder;
use super::source::Source;
use super::trace::{Args, Call, CallResult, Content, DeclaredTool, ErrorKind, Ptr, Step, Trace, provenance};
use crate::dataset::recording::Usage;
use crate::diag::InputError;
use messages::{DETAILS_EVENT, Forms, LEGACY_EVENTS, MESSAGE_EVENTS, Msg, Part, read_chat};
use otlp::{Record, Span};

pub fn parse(src: &Source, trace_id: Option<&str>) -> Result<Trace, InputError> {
    let mut data = otlp::collect(src)?;
    let ids = data.trace_ids();
    let listed = || ids.iter().map(|(id, n)| format!("{id} ({n} spans)")).collect::<Vec<_>>().join(", ");
    match trace_id {
        Some(id) if ids.iter().any(|(t, _)| t == id) => data.keep_trace(id),
        Some(id) => return Err(src.error(0, "", format!("no trace \"{id}\" in this file; its traces: {}", listed()))),
        None if ids.len() > 1 => {
            return Err(src.error(
                0,
                "",
                format!(
                    "this file holds {} traces: {}; read as one they would be merged into one conversation. Pass \
                     --trace-id ID to import one, or -o DIR to write one log per trace",
                    ids.len(),
                    listed()
                ),
            ));
        }
        None => {}
    }
    let mut b = Builder::new(src, Format::Otel, "");
    let mut spans: Vec<&Span> = data.spans.iter().collect();
    spans.sort_by_key(|s| s.start);
    let t0 = spans.iter().map(|s| s.start).chain(data.logs.iter().map(|l| l.time)).filter(|t| *t > 0).min();
    let ms = |ns: u64| t0.map(|t0| ns.saturating_sub(t0) / 1_000_000);

    let mut trace_ids: Vec<&str> = Vec::new();
    let (mut inference, mut tools) = (Vec::new(), Vec::new());
    for span in &spans {
        if !span.trace_id.is_empty() && !trace_ids.contains(&span.trace_id.as_str()) {
            trace_ids.push(&span.trace_id);
        }
        match role(span) {
            SpanRole::Inference => inference.push(*span),
            SpanRole::Tool => tools.push(*span),
            SpanRole::Other(why) => {
                b.count_other(&format!("span:{}", span.attr_str("gen_ai.operation.name").unwrap_or("other")));
                let w = b.warning(
                    "span_skipped",
                    &span.at,
                    format!("span \"{}\" ({}) is not imported: {why}", span.name, span.span_id),
                );
                b.warn_trace(w);
            }
        }
    }
    // gen_ai.tool.definitions (semconv; Pydantic AI on its chat spans, Semantic Kernel
    // on its agent span): `{name, description, parameters}`, or OpenAI's `{function: …}`
    // and the Vercel AI SDK's `ai.prompt.tools`: a list of JSON strings (or one JSON
    // string of a list), each `{type, name, description, inputSchema}` (`parameters`
    // before v5)
    for span in &spans {
        let definitions = match span.attr("gen_ai.tool.definitions").or(span.attr("ai.prompt.tools")) {
            Some(Value::String(text)) => serde_json::from_str::<Value>(text).unwrap_or(Value::Null),
            Some(Value::Array(items)) => Value::Array(
                items
                    .iter()
                    .map(|i| match i {
                        Value::String(text) => serde_json::from_str::<Value>(text).unwrap_or(Value::Null),
                        other => other.clone(),
                    })
                    .collect(),
            ),
            Some(other) => other.clone(),
            None => continue,
        };
        for d in definitions.as_array().into_iter().flatten() {
            let f = d.get("function").unwrap_or(d);
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                b.tool(
                    DeclaredTool {
                        name: name.to_string(),
                        description: f.get("description").and_then(Value::as_str).map(str::to_string),
                        input_schema: f
                            .get("parameters")
                            .or(f.get("parameters_json_schema"))
                            .or(f.get("inputSchema"))
                            .or(f.get("input_schema"))
                            .cloned(),
                        ..DeclaredTool::default()
                    }
                    .classify(f),
                );
            }
        }
    }
    b.meta("trace_ids", json!(trace_ids));
    b.meta("schema_urls", if data.schema_urls.is_empty() { Value::Null } else { json!(data.schema_urls) });
    let first_attr = |key: &str| spans.iter().find_map(|s| s.attr(key)).cloned().unwrap_or(Value::Null);
    b.meta("conversation_id", first_attr("gen_ai.conversation.id"));
    b.meta("provider", spans.iter().find_map(|s| s.attr("gen_ai.provider.name").or(s.attr("gen_ai.system"))).cloned());

    let logs = attach_logs(&mut b, &data.logs, &inference);
    let mut forms = Forms::default();
    let mut chats = Vec::new();
    for span in &inference {
        let mut events: Vec<&Record> = span.events.iter().collect();
        events.extend(logs.get(span.span_id.as_str()).into_iter().flatten());
        events.sort_by_key(|e| e.time);
        chats.push(read_chat(&mut b, span, &events, &mut forms)?);
    }
    b.set_reads(reads(&forms));
    if !forms.attributes && !forms.events && forms.dialects.is_empty() {
        let w = b.warning(
            "content_not_captured",
            &Ptr::new(0, ""),
            "no inference span carries gen_ai.input.messages / gen_ai.output.messages or message events (content \
             capture was off): user input and model text are marked absent",
        );
        b.warn_trace(w);
    }

    let mut results: BTreeMap<String, (Value, Ptr)> = BTreeMap::new();
    let mut used_tools = vec![false; tools.len()];
    let mut seen: Vec<Msg> = Vec::new();
    for (i, chat) in chats.iter().enumerate() {
        let span = chat.span;
        if let Some(system) = &chat.system
            && !b.has_system(system)
        {
            b.system_grown(system.clone());
        }
        if let Some(input) = &chat.input {
            let new = new_messages(&mut b, &seen, input, span);
            for msg in new {
                input_message(&mut b, msg, span, ms(span.start), &mut results)?;
            }
        }
        let mut step = match chat.output.as_deref() {
            Some([first, rest @ ..]) => {
                if !rest.is_empty() {
                    let w = b.warning(
                        "choices_ignored",
                        &rest[0].at,
                        format!("only the first of {} output messages is imported", rest.len() + 1),
                    );
                    b.warn(w);
                }
                output_step(&mut b, first)
            }
            Some([]) | None => {
                // content not captured: the calls are the execute_tool spans that ran
                // before the next inference span
                let until = chats.get(i + 1).map_or(u64::MAX, |c| c.span.start);
                let mut step = Step::new(Content::Absent, span.at.clone());
                for (k, tool) in tools.iter().enumerate() {
                    if !used_tools[k] && tool.start >= span.start && tool.start < until {
                        used_tools[k] = true;
                        step.calls.push(call_from_tool_span(tool, true));
                    }
                }
                step
            }
        };
        step.t = ms(span.end);
        step.latency_ms = Some(span.end.saturating_sub(span.start) / 1_000_000);
        step.usage = usage(span);
        step.source = provenance([
            ("span_id", Some(json!(span.span_id))),
            ("response_id", span.attr("gen_ai.response.id").cloned()),
            ("model", span.attr("gen_ai.response.model").or(span.attr("gen_ai.request.model")).cloned()),
            ("finish_reasons", span.attr("gen_ai.response.finish_reasons").cloned()),
        ]);
        if span.error {
            step.source.insert("status_error".into(), json!(span.status_message.clone().unwrap_or_default()));
        }
        b.step(step)?;
        if let Some(input) = &chat.input {
            seen = input.clone();
        }
        seen.extend(chat.output.iter().flat_map(|o| o.first().cloned()));
    }
    outcomes(&mut b, &tools, &used_tools, results, &ms)?;
    b.finish()
}

fn reads(forms: &Forms) -> String {
    let mut found = Vec::new();
    if forms.attributes {
        found.push("semconv v1.37+ attribute form (gen_ai.input.messages / gen_ai.output.messages)");
    }
    if forms.events {
        found.push("semconv v1.28–v1.36 event form (gen_ai.*.message / gen_ai.choice events)");
    }
    found.extend(forms.dialects.iter().copied());
    if found.is_empty() {
        found.push("no message content captured");
    }
    format!("OpenTelemetry GenAI spans in OTLP/JSON: {}; tool spans", found.join(", "))
}

/// What a span is, told by what it carries rather than by its operation name alone.
enum SpanRole {
    Inference,
    Tool,
    Other(String),
}

/// Operation names of model calls across conventions and libraries.
const INFERENCE_OPS: [&str; 4] = ["chat", "text_completion", "generate_content", "completion"];
/// Attributes (or prefixes) that only a model call carries.
const MESSAGE_KEYS: [&str; 8] = [
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.prompt",
    "gen_ai.completion",
    "llm.input_messages.",
    "llm.output_messages.",
    "ai.prompt.messages",
    "events",
];

fn role(span: &Span) -> SpanRole {
    let op = span.attr_str("gen_ai.operation.name");
    let kind = span.attr_str("openinference.span.kind").or(span.attr_str("traceloop.span.kind"));
    // OpenLIT's OpenAI spans name the calls the model asked for in gen_ai.tool.*: an
    // inference operation is a model call whatever tool attributes it carries
    let inference_op = op.is_some_and(|o| INFERENCE_OPS.contains(&o));
    let is_tool = matches!(op, Some("execute_tool" | "tool"))
        || matches!(kind, Some("TOOL" | "tool"))
        || span.attr("gen_ai.tool.name").is_some()
        || span.attr("ai.toolCall.name").is_some();
    if is_tool && !inference_op {
        return SpanRole::Tool;
    }
    let carries_messages = span.attrs.keys().any(|k| {
        MESSAGE_KEYS.iter().any(|m| k == m || k.starts_with(m) && m.ends_with('.') || k.starts_with(&format!("{m}.")))
    }) || span.events.iter().any(|e| {
        MESSAGE_EVENTS.contains(&e.name.as_str()) || e.name == DETAILS_EVENT || LEGACY_EVENTS.contains(&e.name.as_str())
    });
    if let Some(op @ ("invoke_agent" | "create_agent" | "invoke_workflow")) = op {
        // Semantic Kernel's agent span repeats the conversation's messages: the model
        // calls inside it are the conversation, read once
        return SpanRole::Other(format!(
            "operation \"{op}\" is an agent span around the model and tool calls inside it, which are read instead"
        ));
    }
    if op.is_none() && span.attr("function.args").is_some() && span.attr("function.kwargs").is_some() {
        // its gen_ai.output.messages is the function's return value, not messages
        return SpanRole::Other(
            "an OpenLIT @openlit.trace function span around the model calls inside it, which are read instead".into(),
        );
    }
    let vercel_outer = span.attr_str("ai.operationId").is_some_and(|o| !o.contains(".do"));
    if vercel_outer {
        return SpanRole::Other(
            "a Vercel AI SDK call around its provider-call (doGenerate / doStream) spans, which are read instead"
                .into(),
        );
    }
    if carries_messages || op.is_some_and(|o| INFERENCE_OPS.contains(&o)) || kind == Some("LLM") {
        return SpanRole::Inference;
    }
    if op.is_none() && ["gen_ai.request.model", "gen_ai.response.model"].iter().any(|k| span.attr(k).is_some()) {
        // content capture off and no operation name: a model call all the same
        return SpanRole::Inference;
    }
    SpanRole::Other(match op {
        Some(op) => format!("operation \"{op}\" is neither a model call nor a tool call"),
        None => "it carries no GenAI messages, model or tool attributes".into(),
    })
}

/// Log records by the inference span they belong to: by `spanId`, else by time.
fn attach_logs<'d>(b: &mut Builder, logs: &'d [Record], inference: &[&Span]) -> BTreeMap<String, Vec<&'d Record>> {
    let mut by_span: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for log in logs {
        let relevant = MESSAGE_EVENTS.contains(&log.name.as_str()) || log.name == DETAILS_EVENT;
        if !relevant {
            b.count_other(&format!("log:{}", if log.name.is_empty() { "unnamed" } else { &log.name }));
            continue;
        }
        let owner = match &log.span_id {
            Some(id) => inference.iter().find(|s| &s.span_id == id),
            None => inference.iter().find(|s| s.start <= log.time && log.time <= s.end),
        };
        match owner {
            Some(span) => by_span.entry(span.span_id.clone()).or_default().push(log),
            None => {
                let w = b.warning(
                    "event_unattached",
                    &log.at,
                    format!("{} belongs to no inference span in this file: not imported", log.name),
                );
                b.warn_trace(w);
            }
        }
    }
    by_span
}

/// The messages of this span's input the conversation has not seen yet.
fn new_messages<'m>(b: &mut Builder, seen: &[Msg], input: &'m [Msg], span: &Span) -> &'m [Msg] {
    if input.len() >= seen.len() && seen.iter().zip(input).all(|(a, c)| a.same(c)) {
        return &input[seen.len()..];
    }
    // the longest start of the input that repeats the history in order, leaving some
    // of it out (OpenLIT leaves out the assistant's tool-call messages)
    let mut rest = seen.iter();
    let repeated = input.iter().take_while(|m| rest.any(|s| s.same(m))).count();
    let after_assistant = input.iter().rposition(|m| m.role == "assistant").map_or(0, |i| i + 1);
    let from = repeated.max(after_assistant);
    if !seen.is_empty() {
        let w = b.warning(
            "history_rewritten",
            &span.at,
            format!(
                "span {}: its input does not extend the history of the previous inference span; the {} message(s) \
                 after {} are taken as new",
                span.span_id,
                input.len() - from,
                if from == repeated && repeated > 0 {
                    "the history it repeats (leaving some of it out)"
                } else {
                    "its last assistant message"
                }
            ),
        );
        b.warn_trace(w);
    }
    &input[from..]
}

fn input_message(
    b: &mut Builder,
    msg: &Msg,
    span: &Span,
    t: Option<u64>,
    results: &mut BTreeMap<String, (Value, Ptr)>,
) -> Result<(), InputError> {
    other_parts(b, msg);
    match msg.role.as_str() {
        "system" => {
            if let Content::Text(text) = msg.text()
                && !b.has_system(&text)
            {
                b.system(text);
            }
        }
        // Pydantic AI sends tool results back as user messages of tool_call_response parts:
        // those are results, and a new turn only when the message also has text
        "user" if msg.parts.iter().any(|p| matches!(p, Part::ToolResult { .. })) => {
            tool_results(b, msg, results)?;
            if msg.parts.iter().any(|p| matches!(p, Part::Text(_))) {
                b.user(msg.text(), provenance([("span_id", Some(json!(span.span_id)))]), t, &msg.at);
            }
        }
        "user" => b.user(msg.text(), provenance([("span_id", Some(json!(span.span_id)))]), t, &msg.at),
        "assistant" => {
            // history the file has no inference span for
            let mut step = output_step(b, msg);
            step.source.insert("from_history_of_span".into(), json!(span.span_id));
            b.step(step)?;
        }
        _ => tool_results(b, msg, results)?,
    }
    Ok(())
}

/// The `tool_call_response` parts of a message, by call id.
fn tool_results(b: &mut Builder, msg: &Msg, results: &mut BTreeMap<String, (Value, Ptr)>) -> Result<(), InputError> {
    for part in &msg.parts {
        if let Part::ToolResult { id, response } = part {
            let Some(id) = id else {
                return Err(b.error(
                    &msg.at,
                    "a tool result without its call's id (toolCallId, tool_call_id or id: a tool message whose \
                     content is plain text carries none) cannot be attributed to a call",
                ));
            };
            if results.contains_key(id) {
                return Err(b.error(&msg.at, format!("duplicate result for tool call \"{id}\"")));
            }
            results.insert(id.clone(), (response.clone(), msg.at.clone()));
        }
    }
    Ok(())
}

fn other_parts(b: &mut Builder, msg: &Msg) {
    for part in &msg.parts {
        if let Part::Other(kind) = part {
            let w = b.warning("unsupported_part", &msg.at, format!("a \"{kind}\" message part is not imported"));
            b.warn(w);
        }
    }
}

/// An assistant message → one model response.
fn output_step(b: &mut Builder, msg: &Msg) -> Step {
    let mut step = Step::new(msg.text(), msg.at.clone());
    for part in &msg.parts {
        if let Part::ToolCall { id, name, args } = part {
            step.calls.push(Call::new(id.clone(), name.clone(), args.clone(), msg.at.clone()));
        }
    }
    for part in &msg.parts {
        let kind = match part {
            Part::Other(kind) => kind.as_str(),
            Part::ToolResult { .. } => "tool_call_response",
            _ => continue,
        };
        let w = b.warning(
            "unsupported_part",
            &msg.at,
            format!("a \"{kind}\" part of the model's output is not imported (text and tool_call are)"),
        );
        step.warnings.push(w);
    }
    step
}

fn call_from_tool_span(tool: &Span, with_id: bool) -> Call {
    let id = if with_id { tool_call_id(tool) } else { None };
    let args = first_attr(tool, &TOOL_ARGS).map_or(Args::Absent, Args::from_value);
    Call::new(id, tool_name(tool), args, tool.at.clone())
}

/// A tool span's attributes in each convention, by precedence: GenAI semconv, Vercel
/// AI SDK, OpenInference, OpenLLMetry.
const TOOL_NAME: [&str; 4] = ["gen_ai.tool.name", "ai.toolCall.name", "tool.name", "traceloop.entity.name"];
const TOOL_ID: [&str; 3] = ["gen_ai.tool.call.id", "ai.toolCall.id", "tool_call.id"];
const TOOL_ARGS: [&str; 5] =
    ["gen_ai.tool.call.arguments", "ai.toolCall.args", "ai.toolCall.input", "input.value", "traceloop.entity.input"];
const TOOL_RESULT: [&str; 6] = [
    "gen_ai.tool.call.result",
    "ai.toolCall.result",
    "ai.toolCall.output",
    "output.value",
    "traceloop.entity.output",
    // Latitude
    "gen_ai.tool.result.value",
];

fn first_attr<'s>(span: &'s Span, keys: &[&str]) -> Option<&'s Value> {
    keys.iter().find_map(|k| span.attr(k)).filter(|v| !v.is_null())
}

fn tool_call_id(tool: &Span) -> Option<String> {
    first_attr(tool, &TOOL_ID).and_then(Value::as_str).map(str::to_string)
}

fn tool_name(tool: &Span) -> String {
    first_attr(tool, &TOOL_NAME)
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| tool.name.strip_prefix("execute_tool ").unwrap_or(&tool.name).to_string())
}

fn usage(span: &Span) -> Option<Usage> {
    let get = |a: &str, b: &str| span.attr(a).or(span.attr(b)).and_then(super::trace::as_u64_lenient);
    let input = get("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens");
    let output = get("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens");
    (input.is_some() || output.is_some())
        .then(|| Usage { input_tokens: input.unwrap_or(0), output_tokens: output.unwrap_or(0) })
}

/// Attribute results (tool messages) and `execute_tool` spans to the calls.
fn outcomes(
    b: &mut Builder,
    tools: &[&Span],
    used: &[bool],
    mut results: BTreeMap<String, (Value, Ptr)>,
    ms: &dyn Fn(u64) -> Option<u64>,
) -> Result<(), InputError> {
    let mut spans_by_call: BTreeMap<String, &Span> = BTreeMap::new();
    for (k, tool) in tools.iter().enumerate() {
        let id = tool_call_id(tool);
        let name = tool_name(tool);
        let target = match id {
            Some(id) if b.has_call(&id) => Some(id),
            Some(_) => None,
            None => b.unresolved_call_named(&name, |id| spans_by_call.contains_key(id)),
        };
        match target {
            Some(id) => {
                spans_by_call.insert(id, tool);
            }
            None if used[k] => {}
            None => {
                let w = b.warning(
                    "tool_span_unmatched",
                    &tool.at,
                    format!("execute_tool span for {name} matches no tool call the model emitted: not imported"),
                );
                b.warn_trace(w);
            }
        }
    }
    let mut ids: Vec<String> = results.keys().chain(spans_by_call.keys()).cloned().collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let message = results.remove(&id);
        let span = spans_by_call.get(&id).copied();
        let at = message.as_ref().map(|(_, at)| at.clone()).or(span.map(|s| s.at.clone())).unwrap_or_default();
        let failed = span.map(|s| {
            s.error
                || s.attr("error.type").is_some()
                || s.attr("gen_ai.tool.result.is_error").and_then(Value::as_bool) == Some(true)
        });
        let mut source = Map::new();
        if let Some(s) = span {
            source.insert("tool_span_id".into(), json!(s.span_id));
            if let Some(t) = s.attr("error.type") {
                source.insert("error_type".into(), t.clone());
            }
        }
        let result = message.map(|(v, _)| v).or_else(|| span.and_then(|s| first_attr(s, &TOOL_RESULT).cloned()));
        let outcome = CallResult {
            result,
            is_error: failed,
            error_kind: failed.filter(|f| *f).map(|_| ErrorKind::Tool),
            duration_ms: span.map(|s| s.end.saturating_sub(s.start) / 1_000_000),
            t: span.and_then(|s| ms(s.end)),
            source,
        };
        b.result(&id, outcome, &at)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn attr(key: &str, value: &str) -> Value {
        json!({"key": key, "value": {"stringValue": value}})
    }

    fn span(id: &str, start: u64, attrs: Vec<Value>) -> Value {
        json!({"traceId": "t1", "spanId": id, "name": "s", "startTimeUnixNano": start.to_string(),
               "endTimeUnixNano": (start + 1_000_000).to_string(), "attributes": attrs})
    }

    fn otlp(spans: Vec<Value>) -> String {
        json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).to_string()
    }

    #[test]
    fn attribute_form_spans_rebuild_turns_and_tool_spans_give_outcomes() {
        let input1 = r#"[{"role":"user","parts":[{"type":"text","content":"lock door"}]}]"#;
        let output1 = r#"[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"lock","arguments":{"door":"front"}}]}]"#;
        let input2 = r#"[{"role":"user","parts":[{"type":"text","content":"lock door"}]},
            {"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"lock","arguments":{"door":"front"}}]},
            {"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"jammed"}]}]"#;
        let output2 = r#"[{"role":"assistant","parts":[{"type":"text","content":"It is jammed."}]}]"#;
        let text = otlp(vec![
            span(
                "a",
                1_000_000_000,
                vec![
                    attr("gen_ai.operation.name", "chat"),
                    attr("gen_ai.input.messages", input1),
                    attr("gen_ai.output.messages", output1),
                ],
            ),
            span(
                "b",
                1_002_000_000,
                vec![
                    attr("gen_ai.operation.name", "execute_tool"),
                    attr("gen_ai.tool.name", "lock"),
                    attr("gen_ai.tool.call.id", "c1"),
                    attr("error.type", "JammedError"),
                ],
            ),
            span(
                "c",
                1_004_000_000,
                vec![
                    attr("gen_ai.operation.name", "chat"),
                    attr("gen_ai.input.messages", input2),
                    attr("gen_ai.output.messages", output2),
                ],
            ),
        ]);
        let src = Source::parse(Path::new("otel.json"), &text).unwrap();
        let trace = parse(&src, None).unwrap();
        assert_eq!(trace.turns.len(), 1);
        assert_eq!(trace.turns[0].steps.len(), 2);
        let outcome = trace.calls().next().unwrap().outcome.clone().unwrap();
        assert_eq!((outcome.result, outcome.is_error), (Some(json!("jammed")), Some(true)));
        assert!(trace.reads.contains("v1.37"), "{}", trace.reads);
    }

    #[test]
    fn spans_are_read_by_what_they_carry_and_the_rest_are_skipped_with_a_reason() {
        // no operation name, messages with `content` instead of `parts`
        let input = r#"[{"role":"user","content":"weather in Oslo?"}]"#;
        let output = r#"[{"role":"assistant","content":[{"type":"tool_call","id":"k1","name":"forecast","arguments":{"city":"Oslo"}}]}]"#;
        let mut tool = span(
            "t",
            3_000_000,
            vec![
                attr("traceloop.span.kind", "tool"),
                attr("traceloop.entity.name", "forecast"),
                attr("traceloop.entity.output", "snow"),
            ],
        );
        tool["name"] = json!("forecast.tool");
        let mut http = span("h", 4_000_000, vec![attr("http.request.method", "POST")]);
        http["name"] = json!("POST /v1/chat/completions");
        let text = otlp(vec![
            span("a", 1_000_000, vec![attr("gen_ai.input.messages", input), attr("gen_ai.output.messages", output)]),
            tool,
            http,
        ]);
        let trace = parse(&Source::parse(Path::new("otel.json"), &text).unwrap(), None).unwrap();
        assert_eq!(trace.turns[0].input, Content::Text("weather in Oslo?".into()));
        let call = trace.calls().next().unwrap();
        assert_eq!(call.name, "forecast");
        // the OpenLLMetry tool span has no call id: matched by name, its output is the result
        assert_eq!(call.outcome.as_ref().and_then(|o| o.result.clone()), Some(json!("snow")));
        let skipped = trace.warnings.iter().find(|w| w.code == "span_skipped").unwrap();
        assert!(
            skipped.message.contains("POST /v1/chat/completions") && skipped.message.contains("no GenAI"),
            "{}",
            skipped.message
        );
    }

    #[test]
    fn a_span_with_two_conventions_reads_the_first_by_precedence_and_names_the_other() {
        let text = otlp(vec![span(
            "a",
            1_000_000,
            vec![
                attr("gen_ai.operation.name", "chat"),
                attr("gen_ai.input.messages", r#"[{"role":"user","parts":[{"type":"text","content":"semconv"}]}]"#),
                attr("gen_ai.output.messages", r#"[{"role":"assistant","parts":[{"type":"text","content":"ok"}]}]"#),
                attr("gen_ai.prompt.0.role", "user"),
                attr("gen_ai.prompt.0.content", "openllmetry"),
            ],
        )]);
        let trace = parse(&Source::parse(Path::new("otel.json"), &text).unwrap(), None).unwrap();
        assert_eq!(trace.turns[0].input, Content::Text("semconv".into()));
        let w = trace.warnings.iter().find(|w| w.code == "dialect_ignored").unwrap();
        assert!(w.message.contains("OpenLLMetry"), "{}", w.message);
    }

    #[test]
    fn pre_v1_28_prompt_and_completion_events_are_read_not_warned_about() {
        // Semantic Kernel: gen_ai.content.prompt / .completion events with JSON message lists
        let mut sk = span("k", 1_000_000, vec![attr("gen_ai.operation.name", "chat.completions")]);
        sk["events"] = json!([
            {"name": "gen_ai.content.prompt", "timeUnixNano": "1000000", "attributes": [
                attr("gen_ai.prompt", r#"[{"role":"system","content":"Be brief."},{"role":"user","content":"Capital of France?"}]"#)]},
            {"name": "gen_ai.content.completion", "timeUnixNano": "1500000", "attributes": [
                attr("gen_ai.completion", r#"[{"role":"assistant","content":"Paris."}]"#)]},
        ]);
        let trace = parse(&Source::parse(Path::new("sk.json"), &otlp(vec![sk])).unwrap(), None).unwrap();
        assert_eq!(trace.system, ["Be brief."]);
        assert_eq!(trace.turns[0].input, Content::Text("Capital of France?".into()));
        assert_eq!(trace.turns[0].steps[0].content, Content::Text("Paris.".into()));
        assert!(trace.warnings.iter().all(|w| w.code != "content_not_captured" && w.code != "unsupported_event"));
        assert!(trace.reads.contains("Semantic Kernel"), "{}", trace.reads);
        // OpenLIT: plain-text gen_ai.prompt / gen_ai.completion attributes
        let lit = span(
            "l",
            1_000_000,
            vec![
                attr("gen_ai.operation.name", "chat"),
                attr("gen_ai.prompt", "user: hi"),
                attr("gen_ai.completion", "hello"),
            ],
        );
        let trace = parse(&Source::parse(Path::new("lit.json"), &otlp(vec![lit])).unwrap(), None).unwrap();
        assert_eq!(trace.turns[0].input, Content::Text("user: hi".into()));
        assert_eq!(trace.turns[0].steps[0].content, Content::Text("hello".into()));
    }

    #[test]
    fn an_unknown_role_in_input_messages_is_an_error() {
        let text = otlp(vec![span(
            "a",
            1,
            vec![
                attr("gen_ai.operation.name", "chat"),
                attr("gen_ai.input.messages", r#"[{"role":"human","parts":[]}]"#),
            ],
        )]);
        let src = Source::parse(Path::new("otel.json"), &text).unwrap();
        let err = parse(&src, None).unwrap_err();
        assert!(err.message.contains("unknown role \"human\""), "{err}");
    }

    #[test]
    fn event_form_span_events_and_tool_spans_rebuild_the_same_conversation() {
        let event = |name: &str, t: u64, attrs: Vec<Value>| json!({"name": name, "timeUnixNano": t.to_string(), "attributes": attrs});
        let calls = r#"[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"sku\":\"A1\"}"}}]"#;
        let mut first = span("a", 1_000, vec![attr("gen_ai.operation.name", "chat")]);
        first["events"] = json!([
            event("gen_ai.user.message", 1_000, vec![attr("content", "is A1 in stock?")]),
            event("gen_ai.choice", 1_500, vec![attr("message", &format!("{{\"tool_calls\":{calls}}}"))]),
        ]);
        let mut second = span("c", 5_000_000, vec![attr("gen_ai.operation.name", "chat")]);
        second["events"] = json!([
            event("gen_ai.user.message", 5_000_000, vec![attr("content", "is A1 in stock?")]),
            event("gen_ai.assistant.message", 5_000_001, vec![attr("tool_calls", calls)]),
            event("gen_ai.tool.message", 5_000_002, vec![attr("content", "3 left"), attr("id", "c1")]),
            event("gen_ai.choice", 5_000_003, vec![attr("message", "{\"content\":\"Yes, 3 left.\"}")]),
        ]);
        let tool = span(
            "b",
            2_000_000,
            vec![attr("gen_ai.operation.name", "execute_tool"), attr("gen_ai.tool.call.id", "c1")],
        );
        let src_text = otlp(vec![first, tool, second]);
        let trace = parse(&Source::parse(Path::new("otel.json"), &src_text).unwrap(), None).unwrap();
        assert!(trace.reads.contains("v1.28–v1.36"), "{}", trace.reads);
        assert_eq!(trace.turns.len(), 1);
        let call = trace.calls().next().unwrap();
        assert_eq!(call.args, Args::Json { value: json!({"sku": "A1"}), raw: Some("{\"sku\":\"A1\"}".into()) });
        let outcome = call.outcome.as_ref().unwrap();
        assert_eq!((outcome.result.clone(), outcome.is_error), (Some(json!("3 left")), Some(false)));
        assert_eq!(trace.turns[0].steps[1].content, Content::Text("Yes, 3 left.".into()));
    }

    #[test]
    fn without_captured_content_the_calls_come_from_execute_tool_spans_and_text_is_absent() {
        let text = otlp(vec![
            span("a", 1_000_000, vec![attr("gen_ai.operation.name", "chat")]),
            span(
                "b",
                3_000_000,
                vec![
                    attr("gen_ai.operation.name", "execute_tool"),
                    attr("gen_ai.tool.name", "ping"),
                    attr("gen_ai.tool.call.id", "x1"),
                ],
            ),
            span("c", 5_000_000, vec![attr("gen_ai.operation.name", "chat")]),
        ]);
        let trace = parse(&Source::parse(Path::new("otel.json"), &text).unwrap(), None).unwrap();
        assert_eq!(trace.turns[0].input, Content::Absent);
        let steps = &trace.turns[0].steps;
        assert_eq!((steps[0].content.clone(), steps[0].calls[0].name.as_str()), (Content::Absent, "ping"));
        assert_eq!(steps[0].calls[0].args, Args::Absent);
        assert_eq!(trace.warnings[0].code, "content_not_captured");
    }
}
