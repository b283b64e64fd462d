//! Anthropic Messages API conversations.
//!
//! Reads, per the public API reference of `POST /v1/messages`:
//! - a JSON array of messages, a request body `{"model", "system", "messages", "tools"}`,
//!   or JSONL whose records are messages or response objects (`"type": "message"`,
//!   with `id`, `usage` and `stop_reason`, kept);
//! - `user` messages: a string, or blocks — `text` (the turn's input), `tool_result`
//!   (`tool_use_id`, `content` a string or blocks, `is_error`, false when absent);
//! - `assistant` messages, one model response each: `text` blocks and `tool_use`
//!   blocks (`id`, `name`, `input`) in the order the model emitted them; `thinking` is
//!   kept as provenance.
//!
//! A user message holding tool results and text closes the results first, then opens
//! the next turn with the text. Images, documents and server-side tool blocks are
//! warned about and not imported.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Format;
use super::builder::Builder;
use super::source::Source;
use super::trace::{Args, Call, CallResult, Content, DeclaredTool, ErrorKind, Ptr, Step, Trace, provenance, str_field};
use crate::dataset::recording::Usage;
use crate::diag::{InputError, did_you_mean};

const READS: &str = "Anthropic Messages API (POST /v1/messages request messages and message responses)";
const ROLES: [&str; 2] = ["user", "assistant"];

pub fn parse(src: &Source) -> Result<Trace, InputError> {
    let mut b = Builder::new(src, Format::Anthropic, READS);
    let mut ids = BTreeMap::new();
    for (at, message) in records(&mut b)? {
        read_message(&mut b, &mut ids, &at, message)?;
    }
    b.finish()
}

fn records<'s>(b: &mut Builder<'s, '_>) -> Result<Vec<(Ptr, &'s Value)>, InputError> {
    let src = b.src();
    if let [doc] = src.docs.as_slice()
        && let Some(messages) = doc.value.get("messages")
    {
        let Value::Array(items) = messages else {
            return Err(src.error(0, "/messages", "\"messages\" must be an array of messages"));
        };
        b.meta("model", doc.value.get("model").cloned().unwrap_or(Value::Null));
        match doc.value.get("system") {
            Some(Value::String(s)) => b.system(s.clone()),
            Some(Value::Array(blocks)) => {
                b.system(blocks.iter().filter_map(|bl| str_field(bl, "text")).collect::<Vec<_>>().join("\n"))
            }
            _ => {}
        }
        if let Some(Value::Array(tools)) = doc.value.get("tools") {
            for t in tools {
                if let Some(name) = str_field(t, "name") {
                    b.tool(
                        DeclaredTool {
                            name: name.to_string(),
                            description: str_field(t, "description").map(str::to_string),
                            input_schema: t.get("input_schema").cloned(),
                            ..DeclaredTool::default()
                        }
                        .classify(t),
                    );
                }
            }
        }
        return Ok(items.iter().enumerate().map(|(i, m)| (Ptr::new(0, format!("/messages/{i}")), m)).collect());
    }
    Ok(src.records().into_iter().map(|(doc, p, v)| (Ptr::new(doc, p), v)).collect())
}

fn read_message(
    b: &mut Builder,
    ids: &mut BTreeMap<String, String>,
    at: &Ptr,
    message: &Value,
) -> Result<(), InputError> {
    if !message.is_object() {
        return Err(b.error(at, "expected a Messages API message object"));
    }
    if let Some(id) = str_field(message, "id") {
        let here = b.src().at(at.doc, &at.pointer);
        if let Some(first) = ids.insert(id.to_string(), here) {
            return Err(b.error(&at.join("/id"), format!("duplicate message id \"{id}\" (first at {first})")));
        }
    }
    let role = match message.get("role") {
        Some(Value::String(r)) => r.as_str(),
        Some(_) => return Err(b.error(&at.join("/role"), "\"role\" must be a string")),
        None => return Err(b.error(at, "message has no \"role\"")),
    };
    let blocks: Vec<(Ptr, Value)> = match message.get("content") {
        Some(Value::String(s)) => vec![(at.join("/content"), json!({"type": "text", "text": s}))],
        Some(Value::Array(blocks)) => {
            blocks.iter().enumerate().map(|(i, bl)| (at.join(format!("/content/{i}")), bl.clone())).collect()
        }
        _ => return Err(b.error(at, "\"content\" must be a string or an array of content blocks")),
    };
    match role {
        "user" => user(b, at, &blocks),
        "assistant" => assistant(b, at, message, &blocks),
        other => {
            let hint = match other {
                "system" => " (the system prompt is the request's top-level \"system\")".to_string(),
                _ => did_you_mean(other, ROLES).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default(),
            };
            Err(b.error(
                &at.join("/role"),
                format!("unknown role \"{other}\"{hint}; Messages roles are user, assistant"),
            ))
        }
    }
}

fn user(b: &mut Builder, at: &Ptr, blocks: &[(Ptr, Value)]) -> Result<(), InputError> {
    let mut text: Option<String> = None;
    let mut results = 0;
    for (here, block) in blocks {
        match str_field(block, "type") {
            Some("text") => text.get_or_insert_with(String::new).push_str(str_field(block, "text").unwrap_or_default()),
            Some("tool_result") => {
                results += 1;
                let id = str_field(block, "tool_use_id").ok_or_else(|| {
                    b.error(here, "tool_result has no \"tool_use_id\": its result cannot be attributed")
                })?;
                let is_error = block.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                let outcome = CallResult {
                    result: block.get("content").map(result_value),
                    is_error: Some(is_error),
                    error_kind: is_error.then_some(ErrorKind::Tool),
                    source: provenance([("result_block", Some(json!(here.pointer)))]),
                    ..CallResult::default()
                };
                b.result(id, outcome, &here.join("/tool_use_id"))?;
            }
            kind => unsupported(b, here, kind),
        }
    }
    if text.is_some() || results == 0 {
        let source = provenance([("message", Some(json!(at.pointer)))]);
        b.user(Content::Text(text.unwrap_or_default()), source, None, at);
    }
    Ok(())
}

fn assistant(b: &mut Builder, at: &Ptr, message: &Value, blocks: &[(Ptr, Value)]) -> Result<(), InputError> {
    let mut step = Step::new(Content::Text(String::new()), at.clone());
    step.source = provenance([
        ("message_id", message.get("id").cloned()),
        ("model", message.get("model").cloned()),
        ("stop_reason", message.get("stop_reason").cloned()),
    ]);
    if let Some(usage) = message.get("usage") {
        step.usage = Some(Usage {
            input_tokens: usage.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: usage.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        });
    }
    let mut thinking = Vec::new();
    let mut later = Vec::new();
    for (here, block) in blocks {
        match str_field(block, "type") {
            Some("text") => {
                if let Content::Text(t) = &mut step.content {
                    t.push_str(str_field(block, "text").unwrap_or_default());
                }
            }
            Some("tool_use") => {
                let id = str_field(block, "id").map(str::to_string);
                let name = str_field(block, "name").ok_or_else(|| b.error(here, "tool_use has no \"name\""))?;
                let args = block.get("input").map_or(Args::Absent, Args::from_value);
                step.calls.push(Call::new(id, name, args, here.clone()));
            }
            Some("thinking") => thinking.push(Value::from(str_field(block, "thinking").unwrap_or_default())),
            Some("redacted_thinking") => thinking.push(json!({"redacted": true})),
            kind => later.push((here.clone(), kind.map(str::to_string))),
        }
    }
    if !thinking.is_empty() {
        step.source.insert("thinking".into(), Value::Array(thinking));
    }
    b.step(step)?;
    for (here, kind) in later {
        unsupported(b, &here, kind.as_deref());
    }
    Ok(())
}

/// A tool_result's content: a string, the joined text of text blocks, or the blocks.
fn result_value(content: &Value) -> Value {
    if let Value::Array(blocks) = content
        && blocks.iter().all(|bl| str_field(bl, "type") == Some("text"))
    {
        return Value::String(blocks.iter().filter_map(|bl| str_field(bl, "text")).collect());
    }
    content.clone()
}

fn unsupported(b: &mut Builder, at: &Ptr, kind: Option<&str>) {
    let kind = kind.unwrap_or("untyped");
    let w = b.warning(
        "unsupported_part",
        at,
        format!("a \"{kind}\" content block is not imported (text, tool_use and tool_result are)"),
    );
    b.warn(w);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<Trace, InputError> {
        let src = Source::parse(Path::new("msgs.json"), text)?;
        parse(&src)
    }

    #[test]
    fn tool_use_and_tool_result_blocks_pair_by_id_with_is_error_kept() {
        let trace = parse_text(
            r#"{"system":"You are terse.","messages":[
                {"role":"user","content":"Cancel order 9"},
                {"role":"assistant","content":[{"type":"text","text":"Checking."},
                   {"type":"tool_use","id":"toolu_1","name":"cancel_order","input":{"id":9}}]},
                {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,
                   "content":[{"type":"text","text":"already shipped"}]}]},
                {"role":"assistant","content":"It already shipped."}]}"#,
        )
        .unwrap();
        assert_eq!(trace.system, ["You are terse."]);
        assert_eq!(trace.turns.len(), 1);
        let call = trace.calls().next().unwrap();
        let outcome = call.outcome.as_ref().unwrap();
        assert_eq!((outcome.result.clone(), outcome.is_error), (Some(json!("already shipped")), Some(true)));
        assert_eq!(trace.turns[0].steps[0].content, Content::Text("Checking.".into()));
    }

    #[test]
    fn a_system_role_inside_messages_is_an_error_that_says_where_it_belongs() {
        let err = parse_text(r#"[{"role":"system","content":"x"}]"#).unwrap_err();
        assert!(err.message.contains("top-level \"system\""), "{err}");
    }
}
