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

pub mod otlp;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Format;
use super::source::Source;
use super::trace::{Args, Builder, Call, Content, ErrorKind, Outcome, Ptr, Step, Trace, Usage, provenance, str_field};
use crate::diag::{InputError, did_you_mean};
use otlp::{Record, Span};

const INFERENCE: [&str; 3] = ["chat", "text_completion", "generate_content"];
const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];
const DETAILS_EVENT: &str = "gen_ai.client.inference.operation.details";
const MESSAGE_EVENTS: [&str; 5] = [
    "gen_ai.system.message",
    "gen_ai.user.message",
    "gen_ai.assistant.message",
    "gen_ai.tool.message",
    "gen_ai.choice",
];
const LEGACY_EVENTS: [&str; 2] = ["gen_ai.content.prompt", "gen_ai.content.completion"];

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    ToolCall { id: Option<String>, name: String, args: Args },
    ToolResult { id: Option<String>, response: Value },
    Other(String),
}

/// One message, as either form gives it.
#[derive(Debug, Clone)]
struct Msg {
    role: String,
    parts: Vec<Part>,
    /// The source recorded the message but not its content.
    absent: bool,
    at: Ptr,
}

impl Msg {
    fn same(&self, other: &Msg) -> bool {
        self.role == other.role && self.parts == other.parts && self.absent == other.absent
    }

    fn text(&self) -> Content {
        if self.absent {
            return Content::Absent;
        }
        Content::Text(
            self.parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect(),
        )
    }
}

/// An inference span with its messages (`None`: not captured).
struct Chat<'s> {
    span: &'s Span,
    input: Option<Vec<Msg>>,
    output: Option<Vec<Msg>>,
    system: Option<String>,
}

/// Which forms the file used, for `reads`.
#[derive(Default)]
struct Forms {
    attributes: bool,
    events: bool,
}

pub fn parse(src: &Source) -> Result<Trace, InputError> {
    let data = otlp::collect(src)?;
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
        match span.attr_str("gen_ai.operation.name") {
            Some(op) if INFERENCE.contains(&op) => inference.push(*span),
            Some("execute_tool") => tools.push(*span),
            Some(op) => b.count_other(&format!("span:{op}")),
            None => b.count_other("span:other"),
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
    if !forms.attributes && !forms.events {
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
            b.system(system.clone());
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
    let form = match (forms.attributes, forms.events) {
        (true, true) => "semconv v1.37+ attribute form and v1.28–v1.36 event form",
        (true, false) => "semconv v1.37+ attribute form (gen_ai.input.messages / gen_ai.output.messages)",
        (false, true) => "semconv v1.28–v1.36 event form (gen_ai.*.message / gen_ai.choice events)",
        (false, false) => "no message content captured",
    };
    format!("OpenTelemetry GenAI spans in OTLP/JSON: {form}, execute_tool spans")
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

/// An inference span's messages from its attributes, else from its events.
fn read_chat<'s>(
    b: &mut Builder,
    span: &'s Span,
    events: &[&Record],
    forms: &mut Forms,
) -> Result<Chat<'s>, InputError> {
    let mut attrs = span.attrs.clone();
    let mut attr_ptr: BTreeMap<&str, Ptr> = BTreeMap::new();
    for key in ["gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"] {
        attr_ptr.insert(key, span.attr_ptr(key));
    }
    for e in events.iter().filter(|e| e.name == DETAILS_EVENT) {
        for (k, v) in &e.fields {
            if !attrs.contains_key(k) {
                attrs.insert(k.clone(), v.clone());
                if let Some(slot) = attr_ptr.get_mut(k.as_str()) {
                    *slot = e.at.clone();
                }
            }
        }
    }
    for e in events.iter().filter(|e| LEGACY_EVENTS.contains(&e.name.as_str())) {
        let w = b.warning(
            "unsupported_event",
            &e.at,
            format!("{} is a pre-v1.28 span event; it is not read (use semconv v1.28+)", e.name),
        );
        b.warn_trace(w);
    }
    let mut chat = Chat { span, input: None, output: None, system: None };
    let input = attrs.get("gen_ai.input.messages").filter(|v| !v.is_null());
    let output = attrs.get("gen_ai.output.messages").filter(|v| !v.is_null());
    if input.is_some() || output.is_some() {
        forms.attributes = true;
        if let Some(v) = input {
            chat.input = Some(structured_messages(b, &attr_ptr["gen_ai.input.messages"], v)?);
        }
        if let Some(v) = output {
            chat.output = Some(structured_messages(b, &attr_ptr["gen_ai.output.messages"], v)?);
        }
        if let Some(v) = attrs.get("gen_ai.system_instructions").filter(|v| !v.is_null()) {
            chat.system = Some(system_text(v));
        }
        return Ok(chat);
    }
    let message_events: Vec<&&Record> = events.iter().filter(|e| MESSAGE_EVENTS.contains(&e.name.as_str())).collect();
    if message_events.is_empty() {
        return Ok(chat);
    }
    forms.events = true;
    let (mut input, mut output) = (Vec::new(), Vec::new());
    for e in message_events {
        let (is_output, msg) = event_message(b, e)?;
        if is_output { output.push(msg) } else { input.push(msg) }
    }
    chat.input = Some(input);
    chat.output = (!output.is_empty()).then_some(output);
    Ok(chat)
}

/// `gen_ai.system_instructions`: a string, or text parts.
fn system_text(v: &Value) -> String {
    let parsed = match v {
        Value::String(s) => serde_json::from_str::<Value>(s).unwrap_or_else(|_| v.clone()),
        other => other.clone(),
    };
    match &parsed {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| str_field(p, "content")).collect::<Vec<_>>().join("\n"),
        other => other.to_string(),
    }
}

/// The v1.37 messages value: a JSON string or structured JSON.
fn structured_messages(b: &mut Builder, at: &Ptr, value: &Value) -> Result<Vec<Msg>, InputError> {
    let parsed = match value {
        Value::String(s) => serde_json::from_str::<Value>(s)
            .map_err(|e| b.error(at, format!("the messages attribute is a string that is not JSON: {e}")))?,
        other => other.clone(),
    };
    let Value::Array(items) = parsed else {
        return Err(b.error(at, "the messages attribute must be a JSON array of {role, parts}"));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let role = str_field(item, "role").ok_or_else(|| b.error(at, format!("message {i} has no \"role\"")))?;
        check_role(b, at, role, i)?;
        let mut parts = Vec::new();
        for part in item.get("parts").and_then(Value::as_array).into_iter().flatten() {
            parts.push(match str_field(part, "type") {
                Some("text") => Part::Text(str_field(part, "content").unwrap_or_default().to_string()),
                Some("tool_call") => Part::ToolCall {
                    id: str_field(part, "id").map(str::to_string),
                    name: str_field(part, "name")
                        .ok_or_else(|| b.error(at, format!("message {i}: tool_call part has no \"name\"")))?
                        .to_string(),
                    args: part.get("arguments").map_or(Args::Absent, Args::from_value),
                },
                Some("tool_call_response") => Part::ToolResult {
                    id: str_field(part, "id").map(str::to_string),
                    response: part.get("response").cloned().unwrap_or(Value::Null),
                },
                other => Part::Other(other.unwrap_or("untyped").to_string()),
            });
        }
        out.push(Msg { role: role.to_string(), parts, absent: false, at: at.clone() });
    }
    Ok(out)
}

fn check_role(b: &Builder, at: &Ptr, role: &str, i: usize) -> Result<(), InputError> {
    if ROLES.contains(&role) {
        return Ok(());
    }
    let hint = did_you_mean(role, ROLES).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
    Err(b.error(at, format!("message {i}: unknown role \"{role}\"{hint}; GenAI roles are {}", ROLES.join(", "))))
}

/// A v1.28–v1.36 message event → (is it the model's output, the message).
fn event_message(b: &mut Builder, e: &Record) -> Result<(bool, Msg), InputError> {
    let field = |key: &str| -> Option<Value> {
        e.fields.get(key).map(|v| match v {
            // structured fields may arrive JSON-encoded in a span event attribute
            Value::String(s) if key != "content" => serde_json::from_str(s).unwrap_or_else(|_| v.clone()),
            other => other.clone(),
        })
    };
    let (is_output, role, body) = match e.name.as_str() {
        "gen_ai.system.message" => (false, "system", None),
        "gen_ai.user.message" => (false, "user", None),
        "gen_ai.assistant.message" => (false, "assistant", None),
        "gen_ai.tool.message" => (false, "tool", None),
        _ => (true, "assistant", field("message")),
    };
    let get = |key: &str| match &body {
        Some(m) => m.get(key).cloned(),
        None => field(key),
    };
    let content = get("content").filter(|c| !c.is_null());
    let mut parts = Vec::new();
    let text = content.as_ref().map(|c| match c {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    if role == "tool" {
        parts.push(Part::ToolResult {
            id: get("id").and_then(|v| v.as_str().map(str::to_string)),
            response: content.clone().unwrap_or(Value::Null),
        });
    } else if let Some(t) = &text {
        parts.push(Part::Text(t.clone()));
    }
    for (j, call) in get("tool_calls").and_then(|v| v.as_array().cloned()).unwrap_or_default().iter().enumerate() {
        let function = call.get("function").unwrap_or(call);
        let name = str_field(function, "name")
            .ok_or_else(|| b.error(&e.at, format!("{}: tool_calls[{j}] has no function name", e.name)))?;
        parts.push(Part::ToolCall {
            id: str_field(call, "id").map(str::to_string),
            name: name.to_string(),
            args: function.get("arguments").map_or(Args::Absent, Args::from_value),
        });
    }
    let absent = content.is_none() && role != "tool" && parts.is_empty();
    Ok((is_output, Msg { role: role.to_string(), parts, absent, at: e.at.clone() }))
}

/// The messages of this span's input the conversation has not seen yet.
fn new_messages<'m>(b: &mut Builder, seen: &[Msg], input: &'m [Msg], span: &Span) -> &'m [Msg] {
    if input.len() >= seen.len() && seen.iter().zip(input).all(|(a, c)| a.same(c)) {
        return &input[seen.len()..];
    }
    let from = input.iter().rposition(|m| m.role == "assistant").map_or(0, |i| i + 1);
    if !seen.is_empty() {
        let w = b.warning(
            "history_rewritten",
            &span.at,
            format!(
                "span {}: its input does not extend the history of the previous inference span; the {} message(s) \
                 after its last assistant message are taken as new",
                span.span_id,
                input.len() - from
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
        "user" => b.user(msg.text(), provenance([("span_id", Some(json!(span.span_id)))]), t, &msg.at),
        "assistant" => {
            // history the file has no inference span for
            let mut step = output_step(b, msg);
            step.source.insert("from_history_of_span".into(), json!(span.span_id));
            b.step(step)?;
        }
        _ => {
            for part in &msg.parts {
                if let Part::ToolResult { id, response } = part {
                    let Some(id) = id else {
                        return Err(b.error(&msg.at, "a tool_call_response without an id cannot be attributed"));
                    };
                    if results.contains_key(id) {
                        return Err(b.error(&msg.at, format!("duplicate result for tool call \"{id}\"")));
                    }
                    results.insert(id.clone(), (response.clone(), msg.at.clone()));
                }
            }
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
    if msg.parts.iter().any(|p| matches!(p, Part::Other(_) | Part::ToolResult { .. })) {
        let w =
            b.warning("unsupported_part", &msg.at, "a model output part other than text or tool_call is not imported");
        step.warnings.push(w);
    }
    step
}

fn call_from_tool_span(tool: &Span, with_id: bool) -> Call {
    let id = if with_id { tool.attr_str("gen_ai.tool.call.id").map(str::to_string) } else { None };
    let args = tool.attr("gen_ai.tool.call.arguments").map_or(Args::Absent, Args::from_value);
    Call::new(id, tool_name(tool), args, tool.at.clone())
}

fn tool_name(tool: &Span) -> String {
    tool.attr_str("gen_ai.tool.name")
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
        let id = tool.attr_str("gen_ai.tool.call.id").map(str::to_string);
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
        let failed = span.map(|s| s.error || s.attr("error.type").is_some());
        let mut source = Map::new();
        if let Some(s) = span {
            source.insert("tool_span_id".into(), json!(s.span_id));
            if let Some(t) = s.attr("error.type") {
                source.insert("error_type".into(), t.clone());
            }
        }
        let result = message.map(|(v, _)| v).or_else(|| span.and_then(|s| s.attr("gen_ai.tool.call.result").cloned()));
        let outcome = Outcome {
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
        let trace = parse(&src).unwrap();
        assert_eq!(trace.turns.len(), 1);
        assert_eq!(trace.turns[0].steps.len(), 2);
        let outcome = trace.calls().next().unwrap().outcome.clone().unwrap();
        assert_eq!((outcome.result, outcome.is_error), (Some(json!("jammed")), Some(true)));
        assert!(trace.reads.contains("v1.37"), "{}", trace.reads);
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
        let err = parse(&src).unwrap_err();
        assert!(err.message.contains("unknown role \"human\""), "{err}");
    }
}
