//! The two GenAI message forms, read into one model: messages `{role, parts}`.
//!
//! The v1.37+ attribute form (`gen_ai.input.messages`, `gen_ai.output.messages`,
//! `gen_ai.system_instructions`, also on a `gen_ai.client.inference.operation.details`
//! event) and the v1.28–v1.36 per-message events (`gen_ai.*.message`, `gen_ai.choice`)
//! carry the same facts in different shapes; this module reads either into [`Msg`]s so
//! the conversation is rebuilt once (see the parent module for the versions read).

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::builder::Builder;
use super::super::trace::{Args, Content, Ptr, str_field};
use super::otlp::{Record, Span};
use crate::diag::{InputError, did_you_mean};

pub(super) const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];
pub(super) const DETAILS_EVENT: &str = "gen_ai.client.inference.operation.details";
pub(super) const MESSAGE_EVENTS: [&str; 5] = [
    "gen_ai.system.message",
    "gen_ai.user.message",
    "gen_ai.assistant.message",
    "gen_ai.tool.message",
    "gen_ai.choice",
];
pub(super) const LEGACY_EVENTS: [&str; 2] = ["gen_ai.content.prompt", "gen_ai.content.completion"];

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Part {
    Text(String),
    ToolCall { id: Option<String>, name: String, args: Args },
    ToolResult { id: Option<String>, response: Value },
    Other(String),
}

/// One message, as either form gives it.
#[derive(Debug, Clone)]
pub(super) struct Msg {
    pub role: String,
    pub parts: Vec<Part>,
    /// The source recorded the message but not its content.
    pub absent: bool,
    pub at: Ptr,
}

impl Msg {
    /// The same message: a call's arguments compare by value, so a call whose
    /// arguments one span wrote as a JSON string (the AI SDK's `ai.response.toolCalls`)
    /// and the next as an object (its `ai.prompt.messages`) is the same call.
    pub fn same(&self, other: &Msg) -> bool {
        self.role == other.role
            && self.absent == other.absent
            && self.parts.len() == other.parts.len()
            && self.parts.iter().zip(&other.parts).all(|(a, b)| match (a, b) {
                (
                    Part::ToolCall { id: i1, name: n1, args: Args::Json { value: v1, .. } },
                    Part::ToolCall { id: i2, name: n2, args: Args::Json { value: v2, .. } },
                ) => i1 == i2 && n1 == n2 && v1 == v2,
                _ => a == b,
            })
    }

    pub fn text(&self) -> Content {
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
pub(super) struct Chat<'s> {
    pub span: &'s Span,
    pub input: Option<Vec<Msg>>,
    pub output: Option<Vec<Msg>>,
    pub system: Option<String>,
}

/// Which forms the file used, for `reads`.
#[derive(Default)]
pub(super) struct Forms {
    pub attributes: bool,
    pub events: bool,
    /// Library conventions read (OpenLLMetry, OpenInference, …), in first-seen order.
    pub dialects: Vec<&'static str>,
}

/// An inference span's messages from its attributes, else from its events.
pub(super) fn read_chat<'s>(
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
    // the pre-v1.28 events carry gen_ai.prompt / gen_ai.completion (Semantic Kernel, OpenLIT)
    let mut legacy = serde_json::Map::new();
    for e in events.iter().filter(|e| LEGACY_EVENTS.contains(&e.name.as_str())) {
        for key in ["gen_ai.prompt", "gen_ai.completion"] {
            if let Some(v) = e.fields.get(key) {
                legacy.insert(key.to_string(), v.clone());
            }
        }
    }
    // several conventions on one span: the first by precedence is read, and each other
    // one is named so nothing is dropped silently
    let has_events = events.iter().any(|e| MESSAGE_EVENTS.contains(&e.name.as_str()));
    let present = super::dialects::present(span, has_events, !legacy.is_empty());
    if let [read, ignored @ ..] = present.as_slice() {
        for other in ignored {
            let w = b.warning(
                "dialect_ignored",
                &span.at,
                format!(
                    "span {} also carries {other}; {read} is read instead (precedence: docs/import.md)",
                    span.span_id
                ),
            );
            b.warn_trace(w);
        }
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
        // Latitude writes gen_ai.system.instructions
        let system = ["gen_ai.system_instructions", "gen_ai.system.instructions"];
        if let Some(v) = system.iter().find_map(|k| attrs.get(*k)).filter(|v| !v.is_null()) {
            chat.system = Some(system_text(v));
        }
        return Ok(chat);
    }
    // Logfire / Pydantic AI: the v1.28 events as one `events` attribute
    let carried: Vec<Record> = super::dialects::logfire_events(span)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, fields)| Record {
            at: span.attr_ptr("events"),
            name,
            time: span.start,
            fields,
            span_id: None,
            trace_id: None,
        })
        .collect();
    let mut message_events: Vec<&Record> =
        events.iter().copied().filter(|e| MESSAGE_EVENTS.contains(&e.name.as_str())).collect();
    let from_attribute = message_events.is_empty();
    if from_attribute {
        message_events = carried.iter().filter(|e| MESSAGE_EVENTS.contains(&e.name.as_str())).collect();
        if !message_events.is_empty() && !forms.dialects.contains(&LOGFIRE) {
            forms.dialects.push(LOGFIRE);
        }
    }
    if message_events.is_empty() {
        if let Some(read) = super::dialects::read(span, &legacy) {
            for (at, why) in &read.skipped {
                let w = b.warning("message_skipped", at, why.clone());
                b.warn_trace(w);
            }
            if !forms.dialects.contains(&read.dialect) {
                forms.dialects.push(read.dialect);
            }
            let system: Vec<String> = read
                .input
                .iter()
                .filter(|m| m.role == "system")
                .filter_map(|m| m.text().text().map(str::to_string))
                .collect();
            if !system.is_empty() {
                chat.system = Some(system.join("\n"));
            }
            chat.input = Some(read.input);
            chat.output = (!read.output.is_empty()).then_some(read.output);
        }
        return Ok(chat);
    }
    forms.events = true;
    let (mut input, mut output) = (Vec::new(), Vec::new());
    for e in message_events {
        let (is_output, msg) = event_message(b, e)?;
        if is_output { output.push(msg) } else { input.push(msg) }
    }
    // Logfire writes the response as the last assistant message, not as gen_ai.choice
    if from_attribute && output.is_empty() && input.last().is_some_and(|m| m.role == "assistant") {
        output.extend(input.pop());
    }
    chat.input = Some(input);
    chat.output = (!output.is_empty()).then_some(output);
    Ok(chat)
}

const LOGFIRE: &str = "Logfire / Pydantic AI `events` attribute (v1.28 message events)";

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
        if item.get("parts").is_none() {
            // `content` (a string or parts) instead of `parts`, as several
            // instrumentations write it
            let msg =
                super::dialects::chat_message(item, at).map_err(|why| b.error(at, format!("message {i}: {why}")))?;
            out.push(msg);
            continue;
        }
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
                    response: part.get("response").or(part.get("result")).cloned().unwrap_or(Value::Null),
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
            // the v1.28 event body's `id`; Semantic Kernel writes OpenAI's `tool_call_id`
            id: get("id").or_else(|| get("tool_call_id")).and_then(|v| v.as_str().map(str::to_string)),
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
