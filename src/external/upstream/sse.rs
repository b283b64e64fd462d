//! A vendor's streamed answer (server-sent events), reassembled into the whole answer
//! the same vendor returns without streaming, so one assembler reads both.
//!
//! A stream counts only when it completed: Chat Completions ends with `data: [DONE]`,
//! Responses with a `response.completed` event (which carries the whole response),
//! Anthropic Messages with `message_stop`. A stream cut short before its end, or one
//! carrying an error event, is an error — a recording is never made from half an answer.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::external::wire::Dialect;

/// `(event name, data)` of each event, in order.
fn events(text: &str) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    let (mut name, mut data): (Option<String>, Vec<&str>) = (None, Vec::new());
    for line in text.lines().chain([""]) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !data.is_empty() {
                out.push((name.take(), data.join("\n")));
            }
            name = None;
            data.clear();
        } else if let Some(v) = line.strip_prefix("event:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    out
}

/// Reassemble `text`, a whole stream in `dialect`, into the vendor's whole answer.
pub fn reassemble(dialect: Dialect, text: &str) -> Result<Value, String> {
    let parsed = |data: &str| -> Result<Value, String> {
        serde_json::from_str(data).map_err(|e| format!("a stream event is not JSON ({e})"))
    };
    let mut chunks = Vec::new();
    let mut done = false;
    for (name, data) in events(text) {
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let value = parsed(&data)?;
        let kind = name.or_else(|| value.get("type").and_then(Value::as_str).map(str::to_string));
        if matches!(kind.as_deref(), Some("error" | "response.failed"))
            || value.get("error").is_some_and(|e| !e.is_null())
        {
            return Err(format!("the upstream streamed an error: {data}"));
        }
        chunks.push((kind, value));
    }
    match dialect {
        Dialect::Chat => chat(&chunks, done),
        Dialect::Responses => chunks
            .iter()
            .find(|(kind, _)| kind.as_deref() == Some("response.completed"))
            .and_then(|(_, v)| v.get("response").cloned())
            .ok_or_else(|| cut("a response.completed event")),
        Dialect::Messages => messages(&chunks),
    }
}

fn cut(end: &str) -> String {
    format!("the stream ended before {end}: it did not complete")
}

/// Chat chunks → a `chat.completion`: content deltas joined, tool-call deltas joined by
/// their index, usage from the chunk that carries it.
fn chat(chunks: &[(Option<String>, Value)], done: bool) -> Result<Value, String> {
    if !done {
        return Err(cut("data: [DONE]"));
    }
    let (mut id, mut content, mut usage) = (Value::Null, String::new(), Value::Null);
    let mut calls: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
    for (_, chunk) in chunks {
        if let Some(v) = chunk.get("id") {
            id = v.clone();
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            usage = u.clone();
        }
        let Some(delta) = chunk.pointer("/choices/0/delta") else { continue };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            content.push_str(text);
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let entry = calls.entry(index).or_default();
            let piece = |p: &str| call.pointer(p).and_then(Value::as_str).unwrap_or_default();
            entry.0.push_str(piece("/id"));
            entry.1.push_str(piece("/function/name"));
            entry.2.push_str(piece("/function/arguments"));
        }
    }
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .into_values()
            .map(
                |(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}),
            )
            .collect();
        message["tool_calls"] = json!(calls);
    }
    Ok(json!({"id": id, "choices": [{"index": 0, "message": message}], "usage": usage}))
}

/// Messages events → a whole `message`: blocks opened by `content_block_start`, text and
/// tool input joined from their deltas, usage from `message_start` and `message_delta`.
fn messages(chunks: &[(Option<String>, Value)]) -> Result<Value, String> {
    let (mut id, mut usage) = (Value::Null, json!({}));
    let mut blocks: BTreeMap<u64, (Value, String)> = BTreeMap::new();
    let mut stopped = false;
    for (kind, event) in chunks {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind.as_deref() {
            Some("message_start") => {
                id = event.pointer("/message/id").cloned().unwrap_or(Value::Null);
                if let Some(u) = event.pointer("/message/usage").and_then(Value::as_object) {
                    usage.as_object_mut().into_iter().for_each(|m| m.extend(u.clone()));
                }
            }
            Some("content_block_start") => {
                let block = event.get("content_block").cloned().unwrap_or(json!({}));
                blocks.insert(index, (block, String::new()));
            }
            Some("content_block_delta") => {
                let (block, json_text) = blocks.get_mut(&index).ok_or("a delta for a block that never started")?;
                let delta = event.get("delta").cloned().unwrap_or(Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = block.get("text").and_then(Value::as_str).unwrap_or_default().to_string();
                        block["text"] = json!(text + delta.get("text").and_then(Value::as_str).unwrap_or_default());
                    }
                    Some("input_json_delta") => {
                        json_text.push_str(delta.get("partial_json").and_then(Value::as_str).unwrap_or_default())
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(u) = event.get("usage").and_then(Value::as_object) {
                    usage.as_object_mut().into_iter().for_each(|m| m.extend(u.clone()));
                }
            }
            Some("message_stop") => stopped = true,
            _ => {}
        }
    }
    if !stopped {
        return Err(cut("message_stop"));
    }
    let mut content = Vec::new();
    for (block, json_text) in blocks.into_values() {
        let mut block = block;
        if !json_text.is_empty() {
            block["input"] = serde_json::from_str(&json_text)
                .map_err(|e| format!("a tool_use block's streamed input is not JSON ({e})"))?;
        }
        content.push(block);
    }
    Ok(json!({"id": id, "content": content, "usage": usage}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::external::upstream::assemble;

    #[test]
    fn a_chat_stream_reassembles_into_the_answer_it_streamed_and_a_cut_one_is_refused() {
        let stream = concat!(
            "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"get\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"lo\",\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n"
        );
        let f = assemble(Dialect::Chat, &reassemble(Dialect::Chat, stream).unwrap()).unwrap();
        assert_eq!(
            (f.content.as_str(), f.tool_calls[0].args.clone(), f.usage.input_tokens),
            ("Hello", json!({"a": 1}), 7)
        );
        let cut_at = stream.find("data: [DONE]").unwrap();
        assert!(reassemble(Dialect::Chat, &stream[..cut_at]).unwrap_err().contains("did not complete"));
    }

    #[test]
    fn a_messages_stream_reassembles_text_and_tool_input_and_needs_message_stop() {
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":9}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"b\\\":\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"2}\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":4}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        );
        let f = assemble(Dialect::Messages, &reassemble(Dialect::Messages, stream).unwrap()).unwrap();
        assert_eq!((f.content.as_str(), f.tool_calls[0].args.clone()), ("ok", json!({"b": 2})));
        assert_eq!((f.usage.input_tokens, f.usage.output_tokens, f.upstream_id.as_deref()), (9, 4, Some("msg_1")));
        let cut_at = stream.find("event: message_stop").unwrap();
        assert!(reassemble(Dialect::Messages, &stream[..cut_at]).unwrap_err().contains("message_stop"));
    }

    #[test]
    fn a_responses_stream_is_its_completed_response_and_an_error_event_is_an_error() {
        let done = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n\
                    event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"output\":[]}}\n\n";
        assert_eq!(reassemble(Dialect::Responses, done).unwrap()["id"], "resp_1");
        let partial = &done[..done.find("event: response.completed").unwrap()];
        assert!(reassemble(Dialect::Responses, partial).is_err());
        let failed = "event: error\ndata: {\"type\":\"error\",\"message\":\"overloaded\"}\n\n";
        assert!(reassemble(Dialect::Chat, failed).unwrap_err().contains("overloaded"));
    }
}
