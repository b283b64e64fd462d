//! OpenAI Chat Completions message lists.
//!
//! Reads, per the public API reference of `POST /v1/chat/completions`:
//! - a JSON array of messages, a request body `{"model", "messages": [...], "tools"}`,
//!   or JSONL with one message per line;
//! - messages with role `system` / `developer` (instructions), `user` (a turn's
//!   input: a string or content parts, text parts concatenated), `assistant` (one
//!   model response: `content` string, text parts or null, `refusal`, and `tool_calls`
//!   `[{id, type: "function", function: {name, arguments}}]` or `type: "custom"`
//!   `{name, input}`), and `tool` (`tool_call_id` and the result content);
//! - response objects (`"object": "chat.completion"`) among the records: their first
//!   choice is the assistant message, with `usage` and the completion id kept.
//!
//! `arguments` arrive as a JSON string and are parsed. A tool message carries no error
//! flag in this API, so `is_error` is absent.
//!
//! The deprecated `function_call` (an assistant message's one call, `{name, arguments}`)
//! and `function` role (its result, `{name, content}`) carry no call id. The call gets
//! the id `NAME#N` (the N-th such call of that name, as OTel calls without ids do) and a
//! `function_call_by_order` warning; a `function` message is the result of the first
//! call of its `name` that has none yet, in emitted order. The request's legacy
//! `functions` list declares tools like `tools`.

use serde_json::{Map, Value, json};

use super::Format;
use super::builder::Builder;
use super::source::Source;
use super::trace::{Args, Call, CallResult, Content, DeclaredTool, Ptr, Step, Trace, provenance, str_field};
use crate::dataset::recording::Usage;
use crate::diag::{InputError, did_you_mean};

const READS: &str =
    "OpenAI Chat Completions messages (POST /v1/chat/completions request messages and chat.completion responses)";
const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

pub fn parse(src: &Source) -> Result<Trace, InputError> {
    let mut b = Builder::new(src, Format::OpenAi, READS);
    for (at, message) in records(&mut b)? {
        read_message(&mut b, &at, message)?;
    }
    b.finish()
}

/// The message records: `messages` of a request body, or the file's records.
fn records<'s>(b: &mut Builder<'s, '_>) -> Result<Vec<(Ptr, &'s Value)>, InputError> {
    let src = b.src();
    if let [doc] = src.docs.as_slice()
        && let Some(messages) = doc.value.get("messages")
    {
        let Value::Array(items) = messages else {
            return Err(src.error(0, "/messages", "\"messages\" must be an array of messages"));
        };
        b.meta("model", doc.value.get("model").cloned().unwrap_or(Value::Null));
        let tools = doc.value.get("tools").and_then(Value::as_array).into_iter().flatten();
        let functions = doc.value.get("functions").and_then(Value::as_array).into_iter().flatten();
        {
            for t in tools.chain(functions) {
                let f = t.get("function").or_else(|| t.get("custom")).unwrap_or(t);
                if let Some(name) = str_field(f, "name") {
                    b.tool(
                        DeclaredTool {
                            name: name.to_string(),
                            description: str_field(f, "description").map(str::to_string),
                            input_schema: f.get("parameters").cloned(),
                            ..DeclaredTool::default()
                        }
                        .classify(f),
                    );
                }
            }
        }
        return Ok(items.iter().enumerate().map(|(i, m)| (Ptr::new(0, format!("/messages/{i}")), m)).collect());
    }
    Ok(src.records().into_iter().map(|(doc, p, v)| (Ptr::new(doc, p), v)).collect())
}

fn read_message(b: &mut Builder, at: &Ptr, message: &Value) -> Result<(), InputError> {
    if !message.is_object() {
        return Err(b.error(at, "expected a Chat Completions message object"));
    }
    if message.get("object").and_then(Value::as_str) == Some("chat.completion") || message.get("choices").is_some() {
        return read_completion(b, at, message);
    }
    let Some(role) = message.get("role") else {
        return Err(b.error(at, "message has no \"role\""));
    };
    let role = role.as_str().ok_or_else(|| b.error(&at.join("/role"), "\"role\" must be a string"))?;
    let source = provenance([("message", Some(json!(at.pointer))), ("name", message.get("name").cloned())]);
    match role {
        "system" | "developer" => {
            let text = text_of(b, at, message.get("content"))?;
            b.system(text.unwrap_or_default());
        }
        "user" => {
            let text = text_of(b, at, message.get("content"))?.unwrap_or_default();
            b.user(Content::Text(text), source, None, at);
        }
        "assistant" => {
            let step = assistant(b, at, message, source)?;
            b.step(step)?;
        }
        "tool" => {
            let Some(id) = str_field(message, "tool_call_id") else {
                return Err(b.error(at, "tool message has no \"tool_call_id\": its result cannot be attributed"));
            };
            let text = text_of(b, at, message.get("content"))?;
            let outcome = CallResult {
                result: text.map(Value::String),
                source: provenance([("result_message", Some(json!(at.pointer)))]),
                ..CallResult::default()
            };
            b.result(id, outcome, &at.join("/tool_call_id"))?;
        }
        "function" => {
            // the legacy result: attributed by order to the first call of its name
            // without a result (the call's function_call_by_order warning says so)
            let Some(name) = str_field(message, "name") else {
                return Err(b.error(
                    at,
                    "a \"function\" message without \"name\": the deprecated role has no call id, so its result \
                     is attributed by the function's name, and this one has none",
                ));
            };
            let Some(id) = b.unresolved_call_named(name, |_| false) else {
                return Err(b.error(
                    &at.join("/name"),
                    format!("a \"function\" result for {name} with no call of {name} before it still waiting for one"),
                ));
            };
            let text = text_of(b, at, message.get("content"))?;
            let outcome = CallResult {
                result: text.map(Value::String),
                source: provenance([("result_message", Some(json!(at.pointer))), ("by_order", Some(json!(true)))]),
                ..CallResult::default()
            };
            b.result(&id, outcome, &at.join("/name"))?;
        }
        other => {
            let hint = did_you_mean(other, ROLES).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
            return Err(b.error(
                &at.join("/role"),
                format!("unknown role \"{other}\"{hint}; Chat Completions roles are {}", ROLES.join(", ")),
            ));
        }
    }
    Ok(())
}

/// A `chat.completion` response object: its first choice's message is one response.
fn read_completion(b: &mut Builder, at: &Ptr, completion: &Value) -> Result<(), InputError> {
    let Some(Value::Array(choices)) = completion.get("choices") else {
        return Err(b.error(at, "a chat.completion object needs a \"choices\" array"));
    };
    let Some(first) = choices.first() else {
        return Err(b.error(&at.join("/choices"), "a chat.completion with no choices has no response to import"));
    };
    let message = first.get("message").ok_or_else(|| b.error(&at.join("/choices/0"), "choice has no \"message\""))?;
    let source = provenance([
        ("completion_id", completion.get("id").cloned()),
        ("model", completion.get("model").cloned()),
        ("finish_reason", first.get("finish_reason").cloned()),
    ]);
    let mut step = assistant(b, &at.join("/choices/0/message"), message, source)?;
    if let Some(usage) = completion.get("usage") {
        step.usage = Some(Usage {
            input_tokens: usage.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
        });
    }
    b.step(step)?;
    if choices.len() > 1 {
        let w = b.warning(
            "choices_ignored",
            &at.join("/choices/1"),
            format!("only the first of {} choices is imported: a replay follows one response", choices.len()),
        );
        b.warn(w);
    }
    Ok(())
}

/// An assistant message → one model response.
fn assistant(b: &mut Builder, at: &Ptr, message: &Value, mut source: Map<String, Value>) -> Result<Step, InputError> {
    let mut text = match message.get("content") {
        None | Some(Value::Null) => String::new(),
        content => text_of(b, at, content)?.unwrap_or_default(),
    };
    if let Some(refusal) = str_field(message, "refusal")
        && text.is_empty()
    {
        text = refusal.to_string();
        source.insert("refusal".into(), Value::Bool(true));
    }
    let mut step = Step::new(Content::Text(text), at.clone());
    step.source = source;
    if let Some(f) = message.get("function_call").filter(|f| !f.is_null()) {
        let here = at.join("/function_call");
        let name = str_field(f, "name").ok_or_else(|| b.error(&here, "function_call has no \"name\""))?;
        let n = (0..).find(|n| !b.has_call(&format!("{name}#{n}"))).unwrap_or(0);
        let id = format!("{name}#{n}");
        let args = match f.get("arguments") {
            Some(v) => Args::from_value(v),
            None => Args::Absent,
        };
        let mut call = Call::new(Some(id.clone()), name, args, here.clone());
        call.source.insert("legacy_function_call".into(), Value::Bool(true));
        step.calls.push(call);
        step.warnings.push(b.warning(
            "function_call_by_order",
            &here,
            format!(
                "the deprecated function_call carries no call id: it is named {id}, and its result is the next \
                 \"function\" message naming {name} (attributed by order, not by id)"
            ),
        ));
    }
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (j, call) in calls.iter().enumerate() {
                step.calls.push(tool_call(b, &at.join(format!("/tool_calls/{j}")), call)?);
            }
        }
        Some(_) => return Err(b.error(&at.join("/tool_calls"), "\"tool_calls\" must be an array")),
    }
    Ok(step)
}

fn tool_call(b: &Builder, at: &Ptr, call: &Value) -> Result<Call, InputError> {
    let id = str_field(call, "id").map(str::to_string);
    let kind = str_field(call, "type").unwrap_or("function");
    let (body, args_key) = match kind {
        "function" => (call.get("function"), "arguments"),
        "custom" => (call.get("custom"), "input"),
        other => return Err(b.error(&at.join("/type"), format!("unknown tool call type \"{other}\""))),
    };
    let body = body.ok_or_else(|| b.error(at, format!("tool call of type \"{kind}\" has no \"{kind}\" object")))?;
    let name = str_field(body, "name").ok_or_else(|| b.error(at, "tool call has no name"))?;
    let args = match body.get(args_key) {
        Some(v) => Args::from_value(v),
        None => Args::Absent,
    };
    Ok(Call::new(id, name, args, at.clone()))
}

/// The text of `content`: a string, or text parts concatenated (other parts warned
/// about). `None` when the content is null.
pub(crate) fn text_of(b: &mut Builder, at: &Ptr, content: Option<&Value>) -> Result<Option<String>, InputError> {
    match content {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (i, part) in parts.iter().enumerate() {
                let here = at.join(format!("/content/{i}"));
                match (str_field(part, "type"), str_field(part, "text")) {
                    (Some("text" | "input_text" | "output_text"), Some(t)) => text.push_str(t),
                    (Some("refusal"), _) => text.push_str(str_field(part, "refusal").unwrap_or_default()),
                    (kind, _) => {
                        let kind = kind.unwrap_or("untyped");
                        let w = b.warning(
                            "unsupported_part",
                            &here,
                            format!("a \"{kind}\" content part is not imported (only text is replayed)"),
                        );
                        b.warn(w);
                    }
                }
            }
            Ok(Some(text))
        }
        Some(_) => Err(b.error(&at.join("/content"), "\"content\" must be a string, an array of parts or null")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<Trace, InputError> {
        let src = Source::parse(Path::new("chat.json"), text)?;
        parse(&src)
    }

    #[test]
    fn tool_calls_are_read_in_order_with_results_attributed_by_id() {
        let trace = parse_text(
            r#"[{"role":"system","content":"be brief"},
                {"role":"user","content":"weather in Paris and Rome?"},
                {"role":"assistant","content":null,"tool_calls":[
                  {"id":"c2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}},
                  {"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"18C"},
                {"role":"tool","tool_call_id":"c2","content":"24C"},
                {"role":"assistant","content":"Rome 24C, Paris 18C."}]"#,
        )
        .unwrap();
        assert_eq!(trace.system, ["be brief"]);
        let calls: Vec<_> = trace.calls().map(|c| (c.id.clone().unwrap(), c.outcome.clone().unwrap().result)).collect();
        assert_eq!(calls, [("c2".into(), Some(json!("24C"))), ("c1".into(), Some(json!("18C")))]);
        assert_eq!(trace.turns[0].steps[1].content, Content::Text("Rome 24C, Paris 18C.".into()));
    }

    #[test]
    fn an_unknown_role_is_an_error_at_its_place() {
        let err = parse_text("[\n{\"role\":\"user\",\"content\":\"hi\"},\n{\"role\":\"asistant\",\"content\":\"x\"}]")
            .unwrap_err();
        assert_eq!((err.line, err.column), (3, 2), "{err}");
        assert!(err.message.contains("did you mean \"assistant\""), "{err}");
    }

    #[test]
    fn a_result_without_its_call_and_a_duplicate_call_id_are_errors() {
        let orphan =
            parse_text(r#"[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"r"}]"#)
                .unwrap_err();
        assert!(orphan.message.contains("has no tool call before it"), "{orphan}");
        let call = r#"{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}"#;
        let dup = parse_text(&format!(
            r#"[{{"role":"user","content":"x"}},{{"role":"assistant","tool_calls":[{call}]}},
               {{"role":"tool","tool_call_id":"c1","content":"r"}},{{"role":"assistant","tool_calls":[{call}]}}]"#
        ))
        .unwrap_err();
        assert!(dup.message.contains("duplicate tool call id \"c1\""), "{dup}");
    }

    #[test]
    fn a_completion_object_is_a_response_with_usage() {
        let trace = parse_text(
            "{\"role\":\"user\",\"content\":\"hi\"}\n{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hello\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n",
        )
        .unwrap();
        let step = &trace.turns[0].steps[0];
        assert_eq!(step.usage, Some(Usage { input_tokens: 9, output_tokens: 2 }));
        assert_eq!(step.source["completion_id"], json!("chatcmpl-1"));
    }
}
