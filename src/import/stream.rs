//! Streamed responses, assembled into the bodies the API would have returned.
//!
//! A recorded stream is one event per line (JSONL, or SSE `data:` lines once
//! [`super::framing`] has removed the framing). Three streams are read, each per its
//! public API reference:
//!
//! - **OpenAI Chat Completions chunks** (`"object": "chat.completion.chunk"`): chunks
//!   are grouped by completion `id`; the first choice's `delta.content` pieces are
//!   joined, `delta.tool_calls[]` are gathered by `index` (id and name from the first
//!   piece that has them, `function.arguments` joined), `finish_reason` and the final
//!   chunk's `usage` kept → one `chat.completion` per id.
//! - **OpenAI Responses events** (`response.*`): the `response` of the last
//!   `response.completed` / `response.incomplete` / `response.failed` event is the
//!   answer; when the stream stops before one, the `response.output_item.done` items
//!   are gathered instead (with a warning) → one `response` per response id.
//! - **Anthropic Messages events** (`message_start`, `content_block_start`,
//!   `content_block_delta` with `text_delta` / `input_json_delta` / `thinking_delta`,
//!   `content_block_stop`, `message_delta`, `message_stop`): blocks are rebuilt by
//!   `index`, a tool block's `partial_json` pieces joined and parsed as its `input`
//!   → one assistant `message` per `message_start`.
//!
//! `ping` events carry nothing. An `error` event, a stream that ends before its last
//! event, or arguments that do not parse become warnings at the line that says so.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::Format;
use super::source::Source;
use super::trace::{Ptr, str_field};

/// Which stream a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    ChatChunks,
    ResponsesEvents,
    AnthropicEvents,
}

impl Stream {
    /// The format the assembled bodies are read as.
    pub fn format(self) -> Format {
        match self {
            Stream::ChatChunks => Format::OpenAi,
            Stream::ResponsesEvents => Format::OpenAiResponses,
            Stream::AnthropicEvents => Format::Anthropic,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Stream::ChatChunks => "an OpenAI Chat Completions chunk stream (chat.completion.chunk)",
            Stream::ResponsesEvents => "an OpenAI Responses event stream (response.* events)",
            Stream::AnthropicEvents => "an Anthropic Messages event stream (message_start … message_stop)",
        }
    }
}

/// Something the assembly could keep but not fully.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamWarning {
    pub code: &'static str,
    pub at: Ptr,
    pub message: String,
}

/// The bodies a stream assembles to.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    pub stream: Stream,
    /// One response body per response in the stream, in stream order.
    pub bodies: Vec<Value>,
    /// Where each body's first event is in the file.
    pub starts: Vec<Ptr>,
    pub warnings: Vec<StreamWarning>,
}

const ANTHROPIC_EVENTS: [&str; 6] = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
];

/// The stream `src` holds, if it is one: every record is an event of the same stream
/// (`ping` and `error` events allowed in any).
pub fn detect(src: &Source) -> Option<Stream> {
    let records = src.records();
    let mut found = None;
    for (_, _, v) in &records {
        let kind = match (str_field(v, "object"), str_field(v, "type")) {
            (Some("chat.completion.chunk"), _) => Stream::ChatChunks,
            (_, Some(t)) if t.starts_with("response.") => Stream::ResponsesEvents,
            (_, Some(t)) if ANTHROPIC_EVENTS.contains(&t) => Stream::AnthropicEvents,
            (_, Some("ping" | "error")) => continue,
            // Azure OpenAI opens a chunk stream with its prompt filter's verdicts: no
            // choices, an empty `object`; nothing of the conversation is in it
            _ if is_azure_prompt_filter(v) => continue,
            _ => return None,
        };
        match found {
            None => found = Some(kind),
            Some(k) if k == kind => {}
            Some(_) => return None,
        }
    }
    found
}

/// Azure OpenAI's first chunk: `prompt_filter_results`, empty `choices`.
fn is_azure_prompt_filter(v: &Value) -> bool {
    v.get("prompt_filter_results").is_some() && v.get("choices").and_then(Value::as_array).is_some_and(Vec::is_empty)
}

/// Assemble the stream's events into response bodies.
pub fn assemble(src: &Source, stream: Stream) -> Assembled {
    let events: Vec<(Ptr, &Value)> = src.records().into_iter().map(|(d, p, v)| (Ptr::new(d, p), v)).collect();
    let mut out = Assembled { stream, bodies: Vec::new(), starts: Vec::new(), warnings: Vec::new() };
    for (at, e) in &events {
        if str_field(e, "type") == Some("error") {
            let message = e.pointer("/error/message").and_then(Value::as_str).unwrap_or("(no message)");
            out.warnings.push(StreamWarning {
                code: "stream_error",
                at: at.clone(),
                message: format!("the stream reported an error: {message}"),
            });
        }
    }
    match stream {
        Stream::ChatChunks => chat(&events, &mut out),
        Stream::ResponsesEvents => responses(&events, &mut out),
        Stream::AnthropicEvents => anthropic(&events, &mut out),
    }
    out
}

/// One Chat completion being assembled.
#[derive(Default)]
struct Completion {
    id: String,
    model: Value,
    created: Value,
    content: Option<String>,
    refusal: Option<String>,
    /// By `index`: id, name, joined arguments.
    calls: BTreeMap<u64, (Value, Value, String)>,
    finish: Value,
    usage: Value,
}

fn chat(events: &[(Ptr, &Value)], out: &mut Assembled) {
    let mut order: Vec<String> = Vec::new();
    let mut by_id: BTreeMap<String, Completion> = BTreeMap::new();
    let mut starts: BTreeMap<String, Ptr> = BTreeMap::new();
    for (at, e) in events {
        if str_field(e, "object") != Some("chat.completion.chunk") {
            continue;
        }
        let id = str_field(e, "id").unwrap_or_default().to_string();
        if !by_id.contains_key(&id) {
            order.push(id.clone());
            starts.insert(id.clone(), at.clone());
        }
        let c = by_id.entry(id.clone()).or_insert_with(|| Completion { id, ..Completion::default() });
        for (key, slot) in [("model", &mut c.model), ("created", &mut c.created)] {
            if slot.is_null() {
                *slot = e.get(key).cloned().unwrap_or(Value::Null);
            }
        }
        if let Some(u) = e.get("usage").filter(|u| !u.is_null()) {
            c.usage = u.clone();
        }
        for choice in e.get("choices").and_then(Value::as_array).into_iter().flatten() {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                out.warnings.push(StreamWarning {
                    code: "choices_ignored",
                    at: at.clone(),
                    message: "a chunk of a choice other than the first: only the first choice is imported".into(),
                });
                continue;
            }
            if let Some(f) = choice.get("finish_reason").filter(|f| !f.is_null()) {
                c.finish = f.clone();
            }
            let Some(delta) = choice.get("delta") else { continue };
            if let Some(text) = str_field(delta, "content") {
                c.content.get_or_insert_with(String::new).push_str(text);
            }
            if let Some(text) = str_field(delta, "refusal") {
                c.refusal.get_or_insert_with(String::new).push_str(text);
            }
            for (k, call) in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(k as u64);
                let slot = c.calls.entry(index).or_insert((Value::Null, Value::Null, String::new()));
                if slot.0.is_null() {
                    slot.0 = call.get("id").cloned().unwrap_or(Value::Null);
                }
                let function = call.get("function").unwrap_or(&Value::Null);
                if slot.1.is_null() {
                    slot.1 = function.get("name").cloned().unwrap_or(Value::Null);
                }
                if let Some(args) = str_field(function, "arguments") {
                    slot.2.push_str(args);
                }
            }
        }
    }
    for id in order {
        let (Some(c), Some(start)) = (by_id.remove(&id), starts.remove(&id)) else { continue };
        out.starts.push(start);
        let calls: Vec<Value> = c
            .calls
            .into_values()
            .map(
                |(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}),
            )
            .collect();
        let mut message = json!({"role": "assistant", "content": c.content});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        if let Some(r) = c.refusal {
            message["refusal"] = json!(r);
        }
        let mut body = json!({
            "id": c.id,
            "object": "chat.completion",
            "created": c.created,
            "model": c.model,
            "choices": [{"index": 0, "message": message, "finish_reason": c.finish}],
        });
        if !c.usage.is_null() {
            body["usage"] = c.usage;
        }
        out.bodies.push(body);
    }
}

const RESPONSE_END: [&str; 3] = ["response.completed", "response.incomplete", "response.failed"];

fn responses(events: &[(Ptr, &Value)], out: &mut Assembled) {
    // response id → (final response, items seen done, where it started)
    let mut order: Vec<String> = Vec::new();
    let mut done: BTreeMap<String, Value> = BTreeMap::new();
    let mut items: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut started: BTreeMap<String, (Ptr, Value)> = BTreeMap::new();
    let mut current = String::new();
    for (at, e) in events {
        let kind = str_field(e, "type").unwrap_or_default();
        if let Some(r) = e.get("response") {
            current = str_field(r, "id").unwrap_or_default().to_string();
            if !order.contains(&current) {
                order.push(current.clone());
                started.insert(current.clone(), (at.clone(), r.clone()));
            }
            if RESPONSE_END.contains(&kind) {
                done.insert(current.clone(), r.clone());
                if kind == "response.failed" {
                    let why = r.pointer("/error/message").and_then(Value::as_str).unwrap_or("(no message)");
                    out.warnings.push(StreamWarning {
                        code: "stream_error",
                        at: at.clone(),
                        message: format!("the response failed: {why}"),
                    });
                }
            }
        } else if kind == "response.output_item.done"
            && let Some(item) = e.get("item")
        {
            items.entry(current.clone()).or_default().push(item.clone());
        }
    }
    for id in order {
        let Some((at, first)) = started.remove(&id) else { continue };
        out.starts.push(at.clone());
        match done.remove(&id) {
            Some(r) => out.bodies.push(r),
            None => {
                let mut r = first;
                out.warnings.push(StreamWarning {
                    code: "stream_truncated",
                    at,
                    message: format!(
                        "response {id}: the stream ends before response.completed; its output is the items the stream \
                         finished"
                    ),
                });
                set(&mut r, "output", Value::Array(items.remove(&id).unwrap_or_default()));
                out.bodies.push(r);
            }
        }
    }
}

fn anthropic(events: &[(Ptr, &Value)], out: &mut Assembled) {
    let mut message: Option<(Ptr, Map<String, Value>)> = None;
    let mut blocks: BTreeMap<u64, (Ptr, Value, String)> = BTreeMap::new();
    let finish = |message: &mut Option<(Ptr, Map<String, Value>)>,
                  blocks: &mut BTreeMap<u64, (Ptr, Value, String)>,
                  out: &mut Assembled,
                  stopped: bool| {
        let Some((at, mut m)) = message.take() else { return };
        let mut content = Vec::new();
        for (_, (block_at, mut block, json_text)) in std::mem::take(blocks) {
            if !json_text.is_empty() {
                match serde_json::from_str::<Value>(&json_text) {
                    Ok(v) => set(&mut block, "input", v),
                    Err(e) => {
                        out.warnings.push(StreamWarning {
                            code: "arguments_unparsed",
                            at: block_at.clone(),
                            message: format!(
                                "the streamed input of this block is not JSON ({e}): kept as the raw text"
                            ),
                        });
                        set(&mut block, "input", Value::String(json_text));
                    }
                }
            }
            content.push(block);
        }
        m.insert("content".into(), Value::Array(content));
        if !stopped {
            out.warnings.push(StreamWarning {
                code: "stream_truncated",
                at: at.clone(),
                message: "the stream ends before message_stop: the message is what had arrived".into(),
            });
        }
        out.starts.push(at);
        out.bodies.push(Value::Object(m));
    };
    for (at, e) in events {
        let index = e.get("index").and_then(Value::as_u64).unwrap_or(0);
        match str_field(e, "type").unwrap_or_default() {
            "message_start" => {
                finish(&mut message, &mut blocks, out, false);
                let m = e.get("message").and_then(Value::as_object).cloned().unwrap_or_default();
                message = Some((at.clone(), m));
            }
            "content_block_start" => {
                let block = e.get("content_block").cloned().unwrap_or(Value::Null);
                blocks.insert(index, (at.clone(), block, String::new()));
            }
            "content_block_delta" => {
                let Some((_, block, json_text)) = blocks.get_mut(&index) else { continue };
                let delta = e.get("delta").unwrap_or(&Value::Null);
                match str_field(delta, "type") {
                    Some("text_delta") => append(block, "text", str_field(delta, "text")),
                    Some("thinking_delta") => append(block, "thinking", str_field(delta, "thinking")),
                    Some("signature_delta") => append(block, "signature", str_field(delta, "signature")),
                    Some("input_json_delta") => json_text.push_str(str_field(delta, "partial_json").unwrap_or("")),
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some((_, m)) = message.as_mut() {
                    if let Some(Value::Object(delta)) = e.get("delta") {
                        for (k, v) in delta {
                            m.insert(k.clone(), v.clone());
                        }
                    }
                    if let Some(Value::Object(usage)) = e.get("usage") {
                        let slot = m.entry("usage").or_insert_with(|| json!({}));
                        if let Value::Object(u) = slot {
                            for (k, v) in usage {
                                u.insert(k.clone(), v.clone());
                            }
                        }
                    }
                }
            }
            "message_stop" => finish(&mut message, &mut blocks, out, true),
            _ => {}
        }
    }
    finish(&mut message, &mut blocks, out, false);
}

fn append(block: &mut Value, key: &str, piece: Option<&str>) {
    let Some(piece) = piece else { return };
    let now = str_field(block, key).unwrap_or_default().to_string();
    set(block, key, Value::String(now + piece));
}

/// `value[key] = to` for an object, or for null (which becomes one, as a missing block
/// does). Anything else is left as the stream had it: the format's parser refuses it
/// at its line, where indexing it here would have panicked.
fn set(value: &mut Value, key: &str, to: Value) {
    match value {
        Value::Object(m) => {
            m.insert(key.to_string(), to);
        }
        Value::Null => *value = json!({ key: to }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn run(text: &str) -> Assembled {
        let src = Source::parse(Path::new("s.jsonl"), text).unwrap();
        let stream = detect(&src).unwrap();
        assemble(&src, stream)
    }

    #[test]
    fn chat_chunks_join_text_and_gather_tool_calls_by_index() {
        let a = run(concat!(
            r#"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"t1","type":"function","function":{"name":"f","arguments":""}}]}}]}"#,
            "\n",
            r#"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
            "\n",
            r#"{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":"tool_calls"}]}"#,
            "\n"
        ));
        assert_eq!(a.bodies.len(), 1);
        let call = &a.bodies[0]["choices"][0]["message"]["tool_calls"][0];
        assert_eq!((call["id"].as_str(), call["function"]["arguments"].as_str()), (Some("t1"), Some("{\"a\":1}")));
        assert_eq!(a.bodies[0]["choices"][0]["message"]["content"], Value::Null);
    }

    #[test]
    fn anthropic_events_rebuild_blocks_and_a_missing_stop_is_a_warning() {
        let a = run(concat!(
            r#"{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","content":[]}}"#,
            "\n",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            "\n",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            "\n",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
            "\n",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\": 2}"}}"#,
            "\n",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
            "\n"
        ));
        let m = &a.bodies[0];
        assert_eq!(m["content"][0]["text"], "Hi");
        assert_eq!(m["content"][1]["input"], json!({"x": 2}));
        assert_eq!(m["stop_reason"], "tool_use");
        assert_eq!(a.warnings[0].code, "stream_truncated");
    }

    #[test]
    fn a_responses_stream_is_its_completed_response() {
        let a = run(concat!(
            r#"{"type":"response.created","response":{"id":"r1","object":"response","output":[]}}"#,
            "\n",
            r#"{"type":"response.completed","response":{"id":"r1","object":"response","output":[{"type":"message","role":"assistant","content":[]}]}}"#,
            "\n"
        ));
        assert_eq!(a.bodies.len(), 1);
        assert_eq!(a.bodies[0]["output"].as_array().map(Vec::len), Some(1));
        assert!(a.warnings.is_empty());
    }

    /// A stream whose `response` or `content_block` is not an object (a string, a
    /// number) is assembled as it stands, for the format's parser to refuse or warn
    /// about at its line: indexing it as an object panicked (`stateval import` exited
    /// 101 on such a file).
    #[test]
    fn a_response_or_block_that_is_no_object_is_kept_as_it_is_not_indexed() {
        let a = run(concat!(
            r#"{"type":"response.created","response":"r1"}"#,
            "\n",
            r#"{"type":"response.output_item.done","item":{"type":"message"}}"#,
            "\n"
        ));
        assert_eq!(a.bodies, [json!("r1")]);
        assert_eq!(a.warnings[0].code, "stream_truncated");

        let a = run(concat!(
            r#"{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","content":[]}}"#,
            "\n",
            r#"{"type":"content_block_start","index":0,"content_block":7}"#,
            "\n",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            "\n",
            r#"{"type":"content_block_start","index":1,"content_block":"tool_use"}"#,
            "\n",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
            "\n",
            r#"{"type":"content_block_start","index":2}"#,
            "\n",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Yes"}}"#,
            "\n",
            r#"{"type":"message_stop"}"#,
            "\n"
        ));
        // a block without `content_block` becomes an object, as before
        assert_eq!(a.bodies[0]["content"], json!([7, "tool_use", {"text": "Yes"}]));
    }

    #[test]
    fn plain_messages_are_not_a_stream() {
        let src =
            Source::parse(Path::new("s.jsonl"), "{\"role\":\"user\",\"content\":\"x\"}\n{\"type\":\"message\"}\n")
                .unwrap();
        assert_eq!(detect(&src), None);
    }
}
