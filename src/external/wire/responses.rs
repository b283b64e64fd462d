//! OpenAI Responses: `POST /v1/responses`, whole or streamed as typed events
//! (`response.created` … `response.completed`), with `previous_response_id` chaining
//! and `item_reference` input items resolved from the run's own earlier exchanges
//! ([`Stored`]).

use serde_json::{Map, Value, json};

use super::{DELTA_CHARS, Stored, WireAnswer, parse_arguments, pieces, text_of};
use crate::external::neutral;

pub fn neutral(body: &Map<String, Value>, stored: &Stored) -> Result<Value, String> {
    let mut messages = match body.get("previous_response_id").and_then(Value::as_str) {
        Some(id) => stored
            .conversation(id)
            .cloned()
            .ok_or_else(|| format!("previous_response_id {id:?} is not a response of this run"))?,
        None => Vec::new(),
    };
    let mut system = body.get("instructions").and_then(Value::as_str).map(str::to_string);
    match body.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                // a reference reads exactly as the item it names would
                let item = match reference(item) {
                    Some(id) => stored.item(id).ok_or_else(|| unknown_reference(i, id))?,
                    None => item,
                };
                read_item(item, &mut messages, &mut system).map_err(|e| format!("input[{i}]: {e}"))?;
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => return Err("input: expected a string or an array of items".into()),
    }
    let tools: Vec<Value> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| json!({"name": t.get("name"), "description": t.get("description"), "input_schema": t.get("parameters")}))
        .collect();
    Ok(json!({
        "system": system,
        "messages": messages,
        "tools": tools,
        "params": params(body),
    }))
}

/// The Responses API's answer-changing parameters under their neutral names
/// (`neutral::PARAMS`): `text` carries the output format and the verbosity.
fn params(body: &Map<String, Value>) -> Value {
    let mut out = neutral::params(body, &[("max_output_tokens", "max_tokens")]);
    if let Some(text) = body.get("text").and_then(Value::as_object) {
        for (key, name) in [("format", "response_format"), ("verbosity", "verbosity")] {
            if let Some(v) = text.get(key).filter(|v| !v.is_null()) {
                out.insert(name.into(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// The id an `item_reference` input item names.
pub fn reference(item: &Value) -> Option<&str> {
    if item.get("type").and_then(Value::as_str) != Some("item_reference") {
        return None;
    }
    item.get("id")?.as_str()
}

/// An `item_reference` to nothing stateval issued in this case run.
pub fn unknown_reference(index: usize, id: &str) -> String {
    format!("input[{index}]: item_reference {id:?} is not an output item of this run")
}

/// The id of the response that serves `answer`.
pub fn response_id(answer: &WireAnswer<'_>) -> String {
    format!("resp_{}", answer.id)
}

fn message_id(answer: &WireAnswer<'_>) -> String {
    format!("msg_{}", answer.id)
}

fn call_item_id(answer: &WireAnswer<'_>, j: usize) -> String {
    format!("fc_{}_{j}", answer.id)
}

/// The output items of `answer` by id, each as the input item that repeats it.
pub fn stored_items(answer: &WireAnswer<'_>) -> Vec<(String, Value)> {
    let mut items = Vec::new();
    if !answer.content.is_empty() || answer.tool_calls.is_empty() {
        items.push((
            message_id(answer),
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": answer.content}]}),
        ));
    }
    for (j, call) in answer.tool_calls.iter().enumerate() {
        items.push((
            call_item_id(answer, j),
            json!({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.args.to_string()}),
        ));
    }
    items
}

fn read_item(item: &Value, messages: &mut Vec<Value>, system: &mut Option<String>) -> Result<(), String> {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
    match kind {
        "message" => {
            let role = item.get("role").and_then(Value::as_str).ok_or("a message needs a role")?;
            let text = text_of(item.get("content"));
            match role {
                "system" | "developer" => {
                    *system = Some(match system.take() {
                        Some(s) => format!("{s}\n{text}"),
                        None => text,
                    })
                }
                "user" => messages.push(json!({"role": "user", "content": text})),
                "assistant" => messages.push(json!({"role": "assistant", "content": text})),
                other => return Err(format!("unknown role {other:?}")),
            }
        }
        "function_call" => {
            let call = json!({"id": item.get("call_id"), "name": item.get("name"),
                              "args": parse_arguments(item.get("arguments"))});
            // calls of one step belong to the assistant message before them
            match messages.last_mut() {
                Some(last) if last["role"] == "assistant" => {
                    match last.get_mut("tool_calls").and_then(Value::as_array_mut) {
                        Some(calls) => calls.push(call),
                        None => last["tool_calls"] = json!([call]),
                    }
                }
                _ => messages.push(json!({"role": "assistant", "content": "", "tool_calls": [call]})),
            }
        }
        "function_call_output" => {
            let output = match item.get("output") {
                Some(Value::String(s)) => s.clone(),
                other => text_of(other),
            };
            messages
                .push(json!({"role": "tool", "call_id": item.get("call_id"), "content": output, "is_error": false}));
        }
        // reasoning summaries and other items the agent echoes back carry nothing
        // the model is asked about; they are not part of the request's meaning
        "reasoning" => {}
        other => return Err(format!("unsupported input item type {other:?}")),
    }
    Ok(())
}

fn output(answer: &WireAnswer<'_>, done: bool) -> Vec<Value> {
    let status = if done { "completed" } else { "in_progress" };
    let mut items = Vec::new();
    if !answer.content.is_empty() || answer.tool_calls.is_empty() {
        items.push(message_item(answer, status, true));
    }
    for (j, call) in answer.tool_calls.iter().enumerate() {
        items.push(call_item(answer, j, call, status, true));
    }
    items
}

fn message_item(answer: &WireAnswer<'_>, status: &str, with_text: bool) -> Value {
    let content = if with_text {
        json!([{"type": "output_text", "text": answer.content, "annotations": [], "logprobs": []}])
    } else {
        json!([])
    };
    json!({"type": "message", "id": message_id(answer), "status": status, "role": "assistant", "content": content})
}

fn call_item(answer: &WireAnswer<'_>, j: usize, call: &super::CallOut, status: &str, with_args: bool) -> Value {
    json!({"type": "function_call", "id": call_item_id(answer, j), "call_id": call.id, "name": call.name,
           "arguments": if with_args { call.args.to_string() } else { String::new() }, "status": status})
}

pub fn response(answer: &WireAnswer<'_>, status: &str) -> Value {
    let done = status == "completed";
    let (i, o) = (answer.usage.input_tokens, answer.usage.output_tokens);
    json!({
        "id": response_id(answer),
        "object": "response",
        "created_at": answer.created,
        "status": status,
        "model": answer.model,
        "output": if done { output(answer, true) } else { Vec::new() },
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "metadata": {},
        "temperature": null,
        "top_p": null,
        "text": {"format": {"type": "text"}},
        "usage": if done {
            json!({"input_tokens": i, "output_tokens": o, "total_tokens": i + o,
                   "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}})
        } else { Value::Null },
    })
}

pub fn stream(answer: &WireAnswer<'_>) -> String {
    let mut events: Vec<Value> = vec![
        json!({"type": "response.created", "response": response(answer, "in_progress")}),
        json!({"type": "response.in_progress", "response": response(answer, "in_progress")}),
    ];
    let mut index = 0;
    if !answer.content.is_empty() || answer.tool_calls.is_empty() {
        let item_id = message_id(answer);
        let part = json!({"type": "output_text", "text": answer.content, "annotations": [], "logprobs": []});
        events.push(json!({"type": "response.output_item.added", "output_index": index,
                           "item": message_item(answer, "in_progress", false)}));
        events.push(json!({"type": "response.content_part.added", "item_id": item_id, "output_index": index,
                           "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}));
        if !answer.content.is_empty() {
            for piece in pieces(answer.content, DELTA_CHARS) {
                events.push(json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": index,
                                   "content_index": 0, "delta": piece, "logprobs": []}));
            }
        }
        events.push(json!({"type": "response.output_text.done", "item_id": item_id, "output_index": index,
                           "content_index": 0, "text": answer.content, "logprobs": []}));
        events.push(json!({"type": "response.content_part.done", "item_id": item_id, "output_index": index,
                           "content_index": 0, "part": part}));
        events.push(json!({"type": "response.output_item.done", "output_index": index,
                           "item": message_item(answer, "completed", true)}));
        index += 1;
    }
    for (j, call) in answer.tool_calls.iter().enumerate() {
        let item_id = call_item_id(answer, j);
        let arguments = call.args.to_string();
        events.push(json!({"type": "response.output_item.added", "output_index": index,
                           "item": call_item(answer, j, call, "in_progress", false)}));
        for piece in pieces(&arguments, DELTA_CHARS) {
            events.push(json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
                               "output_index": index, "delta": piece}));
        }
        events.push(json!({"type": "response.function_call_arguments.done", "item_id": item_id,
                           "output_index": index, "name": call.name, "arguments": arguments}));
        events.push(json!({"type": "response.output_item.done", "output_index": index,
                           "item": call_item(answer, j, call, "completed", true)}));
        index += 1;
    }
    events.push(json!({"type": "response.completed", "response": response(answer, "completed")}));
    super::typed_events(events.into_iter().enumerate().map(|(seq, mut event)| {
        event["sequence_number"] = json!(seq);
        event
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::recording::Usage;
    use crate::external::wire::CallOut;

    fn answer<'a>(id: &str, content: &'a str, calls: &[(&str, Value)]) -> WireAnswer<'a> {
        WireAnswer {
            id: id.into(),
            created: 1,
            model: "m".into(),
            content,
            tool_calls: calls
                .iter()
                .map(|(call, args)| CallOut { id: (*call).into(), name: "get".into(), args: args.clone() })
                .collect(),
            usage: Usage { input_tokens: 1, output_tokens: 1 },
        }
    }

    fn read(body: Value, stored: &Stored) -> Result<Value, String> {
        neutral(body.as_object().unwrap(), stored)
    }

    #[test]
    fn chained_input_items_merge_calls_into_the_assistant_turn() {
        let mut stored = Stored::default();
        stored.remember(&json!({"messages": [{"role": "user", "content": "pay"}]}), &answer("1", "ok", &[]));
        let body = json!({"model": "m", "instructions": "sys", "previous_response_id": "resp_1", "input": [
            {"type": "function_call", "id": "fc_1", "call_id": "c0", "name": "get", "arguments": "{}"},
            {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{\"a\":1}"},
            {"type": "function_call_output", "call_id": "c0", "output": "ok"}]});
        let n = read(body, &stored).unwrap();
        assert_eq!(n["system"], "sys");
        assert_eq!(n["messages"][0], json!({"role": "user", "content": "pay"}));
        assert_eq!(n["messages"][1]["content"], "ok");
        assert_eq!(
            n["messages"][1]["tool_calls"],
            json!([{"id": "c0", "name": "get", "args": {}}, {"id": "c1", "name": "get", "args": {"a": 1}}])
        );
        assert_eq!(n["messages"][2], json!({"role": "tool", "call_id": "c0", "content": "ok", "is_error": false}));
        let unknown = read(json!({"previous_response_id": "resp_9"}), &stored);
        assert!(unknown.unwrap_err().contains("resp_9"));
    }

    #[test]
    fn item_references_read_exactly_as_the_items_they_name() {
        // the first answer proposes two calls, the second says something and calls again
        let mut stored = Stored::default();
        let first = answer("a", "", &[("c0", json!({"q": 1})), ("c1", json!({}))]);
        let second = answer("b", "checking", &[("c2", json!({"q": 2}))]);
        stored.remember(&json!({"messages": []}), &first);
        stored.remember(&json!({"messages": []}), &second);
        let result = |id: &str| json!({"type": "function_call_output", "call_id": id, "output": "r"});
        let sent = json!({"model": "m", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {"type": "function_call", "id": "fc_a_0", "call_id": "c0", "name": "get", "arguments": "{\"q\":1}"},
            {"type": "function_call", "id": "fc_a_1", "call_id": "c1", "name": "get", "arguments": "{}"},
            result("c0"), result("c1"),
            {"type": "message", "id": "msg_b", "role": "assistant",
             "content": [{"type": "output_text", "text": "checking"}]},
            {"type": "function_call", "id": "fc_b_0", "call_id": "c2", "name": "get", "arguments": "{\"q\":2}"},
            result("c2")]});
        let referenced = json!({"model": "m", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {"type": "item_reference", "id": "fc_a_0"}, {"type": "item_reference", "id": "fc_a_1"},
            result("c0"), result("c1"),
            {"type": "item_reference", "id": "msg_b"}, {"type": "item_reference", "id": "fc_b_0"},
            result("c2")]});
        let (n, r) = (read(sent.clone(), &stored).unwrap(), read(referenced.clone(), &stored).unwrap());
        assert_eq!(n, r);
        assert_eq!(n["messages"][4]["tool_calls"][0]["args"], json!({"q": 2}));
        // an upstream that never saw our ids gets the items themselves
        let inlined = stored.inline(&referenced).unwrap();
        assert_eq!(read(inlined.clone(), &Stored::default()).unwrap(), n);
        assert!(!inlined.to_string().contains("item_reference"));
    }

    #[test]
    fn an_item_reference_to_an_id_this_run_never_issued_names_it() {
        let mut stored = Stored::default();
        stored.remember(&json!({"messages": []}), &answer("a", "hi", &[]));
        let body = json!({"input": [{"role": "user", "content": "x"}, {"type": "item_reference", "id": "msg_zz"}]});
        let err = read(body.clone(), &stored).unwrap_err();
        assert_eq!(err, "input[1]: item_reference \"msg_zz\" is not an output item of this run");
        assert_eq!(stored.inline(&body).unwrap_err(), err);
        // an id of the message answer, but no such call
        let err = read(json!({"input": [{"type": "item_reference", "id": "fc_a_0"}]}), &stored).unwrap_err();
        assert!(err.contains("\"fc_a_0\""), "{err}");
    }

    #[test]
    fn events_are_numbered_and_end_with_the_completed_response() {
        let a = answer("x", "hello world, streamed", &[("c0", json!({"k": "v"}))]);
        let text = stream(&a);
        let datas: Vec<Value> =
            text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(datas.iter().enumerate().all(|(i, e)| e["sequence_number"] == i));
        let last = datas.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["output"][1]["arguments"], "{\"k\":\"v\"}");
        let deltas: String = datas
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, a.content);
    }
}
