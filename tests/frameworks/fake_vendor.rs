//! A deterministic stand-in for the vendors' model APIs on 127.0.0.1, for `stateval
//! record --upstream-url`: OpenAI Chat Completions (`…/chat/completions`), Responses
//! (`…/responses`) and Anthropic Messages (`…/messages`), whole or streamed as each
//! vendor streams.
//!
//! It plays one small, fixed model: when the request offers tools and its last input is
//! not a tool result, it calls the first tool it was offered (`get_order` when there is
//! one) with `{"order": "1042"}`; otherwise it answers [`REPLY`] in text. Nothing
//! depends on time or on the order requests arrive in: the same request gets the same
//! answer, so a recording made through it is the same on every machine.
//!
//! The request bodies it received are kept ([`FakeVendor::seen`]) so a test can check
//! what went upstream.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// The fixed model's text answer.
pub const REPLY: &str = "Order 1042 left the warehouse today and arrives on Thursday.";

/// The arguments of the one tool call the fixed model makes.
pub fn call_args() -> Value {
    json!({"order": "1042"})
}

/// A running fake vendor; it serves until the test process ends.
pub struct FakeVendor {
    /// `http://127.0.0.1:PORT/v1`: the base URL for `--upstream-url`.
    pub url: String,
    seen: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FakeVendor {
    pub fn start() -> FakeVendor {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let url = format!("http://{}/v1", listener.local_addr().expect("a local address"));
        let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || serve(stream, &kept));
            }
        });
        FakeVendor { url, seen }
    }

    /// `(path, body)` of every request so far, in arrival order.
    #[allow(dead_code)]
    pub fn seen(&self) -> Vec<(String, Value)> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// Answer one request on `stream` (the connection closes after it).
fn serve(stream: TcpStream, seen: &Mutex<Vec<(String, Value)>>) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_string();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.trim_end().split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Ok(mut seen) = seen.lock() {
        seen.push((path.clone(), body.clone()));
    }
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let (content_type, text) = match answer(&path, &body) {
        None => ("application/json", json!({"error": {"message": format!("no such endpoint {path}")}}).to_string()),
        Some(turn) => match (api(&path), stream) {
            (Some(api), false) => ("application/json", whole(api, &turn, &body).to_string()),
            (Some(api), true) => ("text/event-stream", streamed(api, &turn, &body)),
            (None, _) => unreachable!("answer() is None for an unknown path"),
        },
    };
    let status = if api(&path).is_some() { "200 OK" } else { "404 Not Found" };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        text.len()
    );
    let mut stream = reader.into_inner();
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(text.as_bytes());
}

#[derive(Clone, Copy, PartialEq)]
enum Api {
    Chat,
    Responses,
    Messages,
}

fn api(path: &str) -> Option<Api> {
    let path = path.split('?').next().unwrap_or_default();
    if path.ends_with("/chat/completions") {
        Some(Api::Chat)
    } else if path.ends_with("/responses") {
        Some(Api::Responses)
    } else if path.ends_with("/messages") {
        Some(Api::Messages)
    } else {
        None
    }
}

/// What the fixed model does with a request.
enum Turn {
    /// Call this tool (id, name).
    Call(String, String),
    Text,
}

fn answer(path: &str, body: &Value) -> Option<Turn> {
    let api = api(path)?;
    let list = |key: &str| body.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    let tool_names: Vec<String> = list("tools")
        .iter()
        .filter_map(|t| t.pointer("/function/name").or_else(|| t.get("name")).and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    let (inputs, after_tool) = match api {
        Api::Chat => {
            let messages = list("messages");
            let after = messages.last().is_some_and(|m| m["role"] == "tool");
            (messages.len(), after)
        }
        Api::Responses => {
            let items = list("input");
            let after = items.last().is_some_and(|i| i["type"] == "function_call_output");
            (items.len(), after)
        }
        Api::Messages => {
            let messages = list("messages");
            let after = messages
                .last()
                .and_then(|m| m["content"].as_array())
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"));
            (messages.len(), after)
        }
    };
    if tool_names.is_empty() || after_tool {
        return Some(Turn::Text);
    }
    let name = tool_names.iter().find(|n| *n == "get_order").unwrap_or(&tool_names[0]).clone();
    // an id that differs from one call to the next of a conversation, never between runs
    Some(Turn::Call(format!("call_fake_{inputs}"), name))
}

const USAGE_IN: u64 = 120;
const USAGE_OUT: u64 = 30;

fn whole(api: Api, turn: &Turn, body: &Value) -> Value {
    let model = body.get("model").cloned().unwrap_or(json!("fake"));
    match api {
        Api::Chat => {
            let message = match turn {
                Turn::Text => json!({"role": "assistant", "content": REPLY}),
                Turn::Call(id, name) => json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": id, "type": "function", "function": {"name": name, "arguments": call_args().to_string()}}]}),
            };
            let finish = if matches!(turn, Turn::Text) { "stop" } else { "tool_calls" };
            json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": model,
                   "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                   "usage": {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT, "total_tokens": USAGE_IN + USAGE_OUT}})
        }
        Api::Responses => {
            let output = match turn {
                Turn::Text => json!([{"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant",
                                      "content": [{"type": "output_text", "text": REPLY, "annotations": []}]}]),
                Turn::Call(id, name) => json!([{"type": "function_call", "id": "fc_fake", "status": "completed",
                                               "call_id": id, "name": name, "arguments": call_args().to_string()}]),
            };
            json!({"id": "resp_fake", "object": "response", "created_at": 1, "status": "completed", "model": model,
                   "output": output, "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT,
                                               "total_tokens": USAGE_IN + USAGE_OUT}})
        }
        Api::Messages => {
            let (content, stop) = match turn {
                Turn::Text => (json!([{"type": "text", "text": REPLY}]), "end_turn"),
                Turn::Call(id, name) => (
                    json!([{"type": "tool_use", "id": id.replace("call_", "toolu_"), "name": name, "input": call_args()}]),
                    "tool_use",
                ),
            };
            json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": content,
                   "stop_reason": stop, "stop_sequence": null,
                   "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}})
        }
    }
}

fn streamed(api: Api, turn: &Turn, body: &Value) -> String {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let whole = whole(api, turn, body);
    match api {
        Api::Chat => {
            let chunk = |delta: Value, finish: Value| {
                format!(
                    "data: {}\n\n",
                    json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                )
            };
            let mut out = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
            match turn {
                Turn::Text => {
                    let (head, tail) = REPLY.split_at(REPLY.len() / 2);
                    out += &chunk(json!({"content": head}), Value::Null);
                    out += &chunk(json!({"content": tail}), Value::Null);
                    out += &chunk(json!({}), json!("stop"));
                }
                Turn::Call(id, name) => {
                    let args = call_args().to_string();
                    let (head, tail) = args.split_at(args.len() / 2);
                    out += &chunk(
                        json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                                                         "function": {"name": name, "arguments": head}}]}),
                        Value::Null,
                    );
                    out += &chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": tail}}]}), Value::Null);
                    out += &chunk(json!({}), json!("tool_calls"));
                }
            }
            out += &format!(
                "data: {}\n\n",
                json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "choices": [],
                       "usage": whole["usage"]})
            );
            out + "data: [DONE]\n\n"
        }
        Api::Responses => {
            // stateval reads the completed response; the events before it are for show
            let mut created = whole.clone();
            created["status"] = json!("in_progress");
            created["output"] = json!([]);
            event("response.created", json!({"type": "response.created", "sequence_number": 0, "response": created}))
                + &event(
                    "response.completed",
                    json!({"type": "response.completed", "sequence_number": 1, "response": whole}),
                )
        }
        Api::Messages => {
            let mut start = whole.clone();
            start["content"] = json!([]);
            start["stop_reason"] = Value::Null;
            start["usage"] = json!({"input_tokens": USAGE_IN, "output_tokens": 1});
            let mut out = event("message_start", json!({"type": "message_start", "message": start}));
            let block = &whole["content"][0];
            match turn {
                Turn::Text => {
                    out += &event(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0,
                                                                 "content_block": {"type": "text", "text": ""}}),
                    );
                    out += &event(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0,
                                                                 "delta": {"type": "text_delta", "text": REPLY}}),
                    );
                }
                Turn::Call(..) => {
                    let mut empty = block.clone();
                    empty["input"] = json!({});
                    out += &event(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0, "content_block": empty}),
                    );
                    out += &event(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": call_args().to_string()}}),
                    );
                }
            }
            out += &event("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
            out += &event(
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": null},
                "usage": {"output_tokens": USAGE_OUT}}),
            );
            out + &event("message_stop", json!({"type": "message_stop"}))
        }
    }
}
