//! OpenAI Chat Completions: `POST /v1/chat/completions`, whole or streamed as
//! `chat.completion.chunk` events ending in `data: [DONE]`.

use serde_json::{Map, Value, json};

use super::{DELTA_CHARS, WireAnswer, parse_arguments, pieces, text_of};
use crate::external::neutral;

pub fn neutral(body: &Map<String, Value>) -> Result<Value, String> {
    let messages = body.get("messages").and_then(Value::as_array).ok_or("messages: expected an array")?;
    let mut system = Vec::new();
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).ok_or_else(|| format!("messages[{i}].role: missing"))?;
        match role {
            "system" | "developer" => system.push(text_of(m.get("content"))),
            "user" => out.push(json!({"role": "user", "content": text_of(m.get("content"))})),
            "assistant" => {
                let mut message = json!({"role": "assistant", "content": text_of(m.get("content"))});
                if let Some(calls) = m.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty()) {
                    message["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.get("id"), "name": c.pointer("/function/name"),
                                   "args": parse_arguments(c.pointer("/function/arguments"))})
                        })
                        .collect();
                }
                out.push(message);
            }
            "tool" => out.push(json!({"role": "tool", "call_id": m.get("tool_call_id"),
                                      "content": text_of(m.get("content")), "is_error": false})),
            other => return Err(format!("messages[{i}].role: unknown role {other:?}")),
        }
    }
    let tools: Vec<Value> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| {
            let f = t.get("function").unwrap_or(t);
            json!({"name": f.get("name"), "description": f.get("description"), "input_schema": f.get("parameters")})
        })
        .collect();
    Ok(json!({
        "system": (!system.is_empty()).then(|| system.join("\n")),
        "messages": out,
        "tools": tools,
        "params": params(body),
    }))
}

/// Chat's answer-changing parameters under their neutral names (`neutral::PARAMS`).
fn params(body: &Map<String, Value>) -> Value {
    let mut out = neutral::params(body, &[("max_completion_tokens", "max_tokens")]);
    if let Some(effort) = body.get("reasoning_effort").filter(|v| !v.is_null()) {
        out.insert("reasoning".into(), json!({"effort": effort}));
    }
    if let Some(format) = out.get_mut("response_format") {
        *format = neutral::flat_response_format(format);
    }
    Value::Object(out)
}

fn finish_reason(answer: &WireAnswer<'_>) -> &'static str {
    if answer.tool_calls.is_empty() { "stop" } else { "tool_calls" }
}

fn usage(answer: &WireAnswer<'_>) -> Value {
    let (i, o) = (answer.usage.input_tokens, answer.usage.output_tokens);
    json!({"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o})
}

pub fn response(answer: &WireAnswer<'_>) -> Value {
    let mut message = json!({"role": "assistant", "refusal": null,
        "content": if answer.content.is_empty() && !answer.tool_calls.is_empty() { Value::Null } else { json!(answer.content) }});
    if !answer.tool_calls.is_empty() {
        message["tool_calls"] = answer
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.args.to_string()}}))
            .collect();
    }
    json!({
        "id": format!("chatcmpl-{}", answer.id),
        "object": "chat.completion",
        "created": answer.created,
        "model": answer.model,
        "system_fingerprint": null,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason(answer)}],
        "usage": usage(answer),
    })
}

pub fn stream(answer: &WireAnswer<'_>, include_usage: bool) -> String {
    let id = format!("chatcmpl-{}", answer.id);
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": answer.created, "model": answer.model,
               "system_fingerprint": null,
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    if !answer.content.is_empty() {
        for piece in pieces(answer.content, DELTA_CHARS) {
            events.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (index, call) in answer.tool_calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        let arguments = call.args.to_string();
        for piece in pieces(&arguments, DELTA_CHARS) {
            events
                .push(chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), Value::Null));
        }
    }
    events.push(chunk(json!({}), json!(finish_reason(answer))));
    if include_usage {
        events.push(json!({"id": id, "object": "chat.completion.chunk", "created": answer.created,
                           "model": answer.model, "system_fingerprint": null, "choices": [], "usage": usage(answer)}));
    }
    let mut out = String::new();
    for event in events {
        out.push_str(&format!("data: {event}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::recording::Usage;
    use crate::external::wire::CallOut;

    fn answer(content: &str, calls: usize) -> WireAnswer<'_> {
        WireAnswer {
            id: "abc".into(),
            created: 7,
            model: "m".into(),
            content,
            tool_calls: (0..calls)
                .map(|j| CallOut {
                    id: format!("c{j}"),
                    name: "get".into(),
                    args: json!({"q": "a long argument value"}),
                })
                .collect(),
            usage: Usage { input_tokens: 3, output_tokens: 2 },
        }
    }

    #[test]
    fn a_request_reads_into_the_neutral_shape() {
        let body = json!({"model": "gpt", "stream": true, "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "get", "arguments": "{\"q\":1}"}}]},
            {"role": "tool", "tool_call_id": "c0", "content": "42"}],
            "tools": [{"type": "function", "function": {"name": "get", "description": "d", "parameters": {"type": "object"}}}]});
        let n = neutral(body.as_object().unwrap()).unwrap();
        assert_eq!(
            n,
            json!({"system": "be brief", "params": {"model": "gpt"},
                   "messages": [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "name": "get", "args": {"q": 1}}]},
                                {"role": "tool", "call_id": "c0", "content": "42", "is_error": false}],
                   "tools": [{"name": "get", "description": "d", "input_schema": {"type": "object"}}]})
        );
    }

    #[test]
    fn a_stream_reassembles_to_the_whole_response() {
        let a = answer("hello there, a longer answer", 2);
        let text = stream(&a, true);
        assert!(text.ends_with("data: [DONE]\n\n"));
        let (mut content, mut args) = (String::new(), vec![String::new(), String::new()]);
        for line in text.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|l| *l != "[DONE]") {
            let chunk: Value = serde_json::from_str(line).unwrap();
            if let Some(c) = chunk.pointer("/choices/0/delta/content").and_then(Value::as_str) {
                content.push_str(c);
            }
            for call in chunk.pointer("/choices/0/delta/tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let i = call["index"].as_u64().unwrap() as usize;
                args[i].push_str(call.pointer("/function/arguments").and_then(Value::as_str).unwrap_or_default());
            }
        }
        assert_eq!(content, a.content);
        assert!(
            args.iter().all(|s| serde_json::from_str::<Value>(s).unwrap() == json!({"q": "a long argument value"}))
        );
        let whole = response(&a);
        assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(whole["usage"]["total_tokens"], 5);
    }
}
