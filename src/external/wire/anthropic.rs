//! Anthropic Messages: `POST /v1/messages`, whole or streamed as `event:` lines from
//! `message_start` to `message_stop`.

use serde_json::{Map, Value, json};

use super::{DELTA_CHARS, WireAnswer, pieces, text_of};
use crate::external::neutral;

pub fn neutral(body: &Map<String, Value>) -> Result<Value, String> {
    let messages = body.get("messages").and_then(Value::as_array).ok_or("messages: expected an array")?;
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).ok_or_else(|| format!("messages[{i}].role: missing"))?;
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => return Err(format!("messages[{i}].content: expected a string or an array of blocks")),
        };
        match role {
            "user" => {
                // tool results come first in a user turn; each is a message of its own
                let mut text = Vec::new();
                for block in &blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("tool_result") => out.push(json!({
                            "role": "tool", "call_id": block.get("tool_use_id"),
                            "content": text_of(block.get("content")),
                            "is_error": block.get("is_error").and_then(Value::as_bool).unwrap_or(false)})),
                        Some("text") => text.push(block.get("text").and_then(Value::as_str).unwrap_or_default()),
                        _ => {}
                    }
                }
                if !text.is_empty() {
                    out.push(json!({"role": "user", "content": text.join("")}));
                }
            }
            "assistant" => {
                let text: String = blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect();
                let calls: Vec<Value> = blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .map(|b| json!({"id": b.get("id"), "name": b.get("name"), "args": b.get("input").cloned().unwrap_or(json!({}))}))
                    .collect();
                let mut message = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                out.push(message);
            }
            other => return Err(format!("messages[{i}].role: unknown role {other:?}")),
        }
    }
    let system = match body.get("system") {
        None | Some(Value::Null) => None,
        Some(s) => Some(text_of(Some(s))),
    };
    let tools: Vec<Value> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| json!({"name": t.get("name"), "description": t.get("description"), "input_schema": t.get("input_schema")}))
        .collect();
    Ok(
        json!({"system": system, "messages": out, "tools": tools, "params": Value::Object(neutral::params(body, RENAMES))}),
    )
}

/// Messages' spelling of the neutral parameters that have another name here.
const RENAMES: &[(&str, &str)] = &[("stop_sequences", "stop"), ("output_format", "response_format")];

fn stop_reason(answer: &WireAnswer<'_>) -> &'static str {
    if answer.tool_calls.is_empty() { "end_turn" } else { "tool_use" }
}

fn blocks(answer: &WireAnswer<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    if !answer.content.is_empty() || answer.tool_calls.is_empty() {
        out.push(json!({"type": "text", "text": answer.content}));
    }
    for call in &answer.tool_calls {
        out.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args}));
    }
    out
}

pub fn response(answer: &WireAnswer<'_>) -> Value {
    json!({
        "id": format!("msg_{}", answer.id),
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": blocks(answer),
        "stop_reason": stop_reason(answer),
        "stop_sequence": null,
        "usage": {"input_tokens": answer.usage.input_tokens, "output_tokens": answer.usage.output_tokens},
    })
}

pub fn stream(answer: &WireAnswer<'_>) -> String {
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": format!("msg_{}", answer.id), "type": "message", "role": "assistant", "model": answer.model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": answer.usage.input_tokens, "output_tokens": 0}}})];
    for (index, block) in blocks(answer).into_iter().enumerate() {
        if block["type"] == "text" {
            events.push(
                json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
            );
            let text = block["text"].as_str().unwrap_or_default();
            if !text.is_empty() {
                for piece in pieces(text, DELTA_CHARS) {
                    events.push(json!({"type": "content_block_delta", "index": index,
                                       "delta": {"type": "text_delta", "text": piece}}));
                }
            }
        } else {
            events.push(json!({"type": "content_block_start", "index": index, "content_block":
                {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}));
            let input = block["input"].to_string();
            for piece in pieces(&input, DELTA_CHARS) {
                events.push(json!({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "input_json_delta", "partial_json": piece}}));
            }
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(answer), "stop_sequence": null},
                       "usage": {"output_tokens": answer.usage.output_tokens}}));
    events.push(json!({"type": "message_stop"}));
    super::typed_events(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::recording::Usage;
    use crate::external::wire::CallOut;

    #[test]
    fn tool_results_become_tool_messages_and_tool_use_becomes_calls() {
        let body = json!({"model": "claude", "max_tokens": 100, "system": [{"type": "text", "text": "sys"}], "messages": [
            {"role": "user", "content": "pay"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t0", "name": "get", "input": {"a": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": [{"type": "text", "text": "42"}], "is_error": true}]}]});
        let n = neutral(body.as_object().unwrap()).unwrap();
        assert_eq!(n["system"], "sys");
        assert_eq!(n["params"], json!({"model": "claude", "max_tokens": 100}));
        assert_eq!(
            n["messages"][1],
            json!({"role": "assistant", "content": "ok", "tool_calls": [{"id": "t0", "name": "get", "args": {"a": 1}}]})
        );
        assert_eq!(n["messages"][2], json!({"role": "tool", "call_id": "t0", "content": "42", "is_error": true}));
    }

    #[test]
    fn a_stream_is_bracketed_by_message_start_and_stop() {
        let a = WireAnswer {
            id: "x".into(),
            created: 1,
            model: "m".into(),
            content: "",
            tool_calls: vec![CallOut { id: "t0".into(), name: "get".into(), args: json!({"k": "a long value here"}) }],
            usage: Usage { input_tokens: 1, output_tokens: 2 },
        };
        let text = stream(&a);
        let kinds: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
        assert_eq!(kinds.first(), Some(&"message_start"));
        assert_eq!(kinds.last(), Some(&"message_stop"));
        let json: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter_map(|e| e.pointer("/delta/partial_json").and_then(Value::as_str).map(str::to_string))
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), json!({"k": "a long value here"}));
        assert_eq!(response(&a)["stop_reason"], "tool_use");
    }
}
