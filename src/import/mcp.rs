//! Model Context Protocol JSON-RPC logs.
//!
//! Reads JSON-RPC 2.0 messages as an MCP client and server exchange them (the stdio
//! transport writes one per line; a JSON array of messages and JSON-RPC batches are
//! accepted too), per the MCP specification (2024-11-05 through 2025-06-18):
//! - `tools/call` requests (`params.name`, `params.arguments`) paired with their
//!   responses by JSON-RPC `id`: a `result` (`content`, `structuredContent`, `isError`)
//!   is the call's result — `isError: true` is a **tool error**, the tool ran and
//!   failed — while a JSON-RPC `error` (`code`, `message`) is a **protocol error**: the
//!   call never reached the tool. Both are `tool_executed` with `is_error: true`,
//!   told apart by `error_kind` ("tool" / "protocol");
//! - task-augmented calls (specification 2025-11-25): a `tools/call` answered with a
//!   task (`result.task.taskId`) is followed to its real result, the response to the
//!   `tasks/result` request for that task id; the task handle is kept as provenance,
//!   and a task that never gets its result is a warning with its last known status;
//! - `tools/list` results declare the tools (name, description, input schema);
//!   `initialize` gives the protocol version and server; every other request and
//!   notification is counted in `run_started.source.other_messages`, and a
//!   `notifications/cancelled` of a pending call is a warning.
//!
//! MCP does not carry the user's messages or the model's text: the import is one turn
//! whose input is absent, one model response per `tools/call` (its text absent), in
//! log order. A response whose id matches no request, or a request id used twice, is an
//! error: the result could not be attributed.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Format;
use super::builder::Builder;
use super::source::Source;
use super::trace::{Args, Call, CallResult, Content, DeclaredTool, ErrorKind, Ptr, Step, Trace, str_field};
use crate::diag::InputError;

const READS: &str = "MCP JSON-RPC 2.0 messages (specification 2024-11-05 to 2025-11-25): tools/call, tasks/result, \
                     tools/list, initialize";

/// Task-augmented calls in flight.
#[derive(Default)]
struct Tasks {
    /// task id → (the call's id, the last status seen, where the task was created)
    calls: BTreeMap<String, (String, String, Ptr)>,
    /// JSON-RPC id of a `tasks/result` or `tasks/get` request → its task id
    asked: BTreeMap<String, String>,
    /// task ids whose result arrived
    done: Vec<String>,
}

/// The canonical text of a JSON-RPC id (so `1` and `"1"` stay distinct).
fn id_key(id: &Value) -> String {
    id.to_string()
}

/// The call id in the log: the JSON-RPC id's value as text.
fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn parse(src: &Source) -> Result<Trace, InputError> {
    let mut b = Builder::new(src, Format::Mcp, READS);
    b.warn_trace(b.warning(
        "conversation_absent",
        &Ptr::new(0, ""),
        "MCP logs carry tool calls only: the user's messages and the model's text are marked absent",
    ));
    let calls = src.records().iter().any(|(_, _, r)| {
        let one = |m: &Value| m.get("method").and_then(Value::as_str) == Some("tools/call");
        one(r) || r.as_array().is_some_and(|batch| batch.iter().any(one))
    });
    if !calls {
        return Err(src.error(0, "", "the log has no tools/call request: there is no tool call to import"));
    }
    // the one turn MCP can show: its input is not in the protocol
    b.user(Content::Absent, Default::default(), None, &Ptr::new(0, ""));
    // JSON-RPC id → (method, where the request is)
    let mut pending: BTreeMap<String, (String, Ptr)> = BTreeMap::new();
    let mut tasks = Tasks::default();
    let mut messages = Vec::new();
    for (doc, pointer, record) in src.records() {
        match record {
            Value::Array(batch) => {
                messages.extend(batch.iter().enumerate().map(|(i, m)| (Ptr::new(doc, format!("{pointer}/{i}")), m)))
            }
            other => messages.push((Ptr::new(doc, pointer), other)),
        }
    }
    for (at, message) in messages {
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(b.error(&at, "not a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\" is missing)"));
        }
        let method = str_field(message, "method");
        let id = message.get("id").filter(|v| !v.is_null());
        match (method, id) {
            (Some(method), Some(id)) => {
                if matches!(method, "tasks/result" | "tasks/get")
                    && let Some(task) = message.pointer("/params/taskId").and_then(Value::as_str)
                {
                    tasks.asked.insert(id_key(id), task.to_string());
                }
                request(&mut b, &mut pending, &at, method, id, message)?
            }
            (Some(method), None) => {
                if method == "notifications/cancelled"
                    && let Some(request_id) = message.pointer("/params/requestId")
                    && pending.get(&id_key(request_id)).is_some_and(|(m, _)| m == "tools/call")
                {
                    let reason = message.pointer("/params/reason").and_then(Value::as_str).unwrap_or("no reason given");
                    let w = b.warning(
                        "call_cancelled",
                        &at,
                        format!("tools/call {} was cancelled by the client ({reason})", id_text(request_id)),
                    );
                    b.warn(w);
                }
                b.count_other(method);
            }
            (None, Some(id)) => response(&mut b, &mut pending, &mut tasks, &at, id, message)?,
            (None, None) => return Err(b.error(&at, "JSON-RPC message with neither \"method\" nor \"id\"")),
        }
    }
    for (task, (call, status, at)) in &tasks.calls {
        if !tasks.done.contains(task) {
            let w = b.warning(
                "task_unresolved",
                at,
                format!(
                    "tools/call {call} became task {task}, whose result the log never shows (last status: {status}): \
                     its result is marked absent"
                ),
            );
            b.warn_trace(w);
        }
    }
    b.finish()
}

fn request(
    b: &mut Builder,
    pending: &mut BTreeMap<String, (String, Ptr)>,
    at: &Ptr,
    method: &str,
    id: &Value,
    message: &Value,
) -> Result<(), InputError> {
    let key = id_key(id);
    if let Some((first_method, first)) = pending.get(&key) {
        let first = b.src().at(first.doc, &first.pointer);
        return Err(b.error(
            &at.join("/id"),
            format!("duplicate JSON-RPC request id {key}: {first_method} at {first} is still waiting for its response"),
        ));
    }
    pending.insert(key, (method.to_string(), at.clone()));
    if method != "tools/call" {
        b.count_other(method);
        return Ok(());
    }
    let name = message
        .pointer("/params/name")
        .and_then(Value::as_str)
        .ok_or_else(|| b.error(&at.join("/params"), "tools/call has no \"params.name\""))?;
    let args =
        message.pointer("/params/arguments").map_or(Args::Json { value: json!({}), raw: None }, Args::from_value);
    let mut call = Call::new(Some(id_text(id)), name, args, at.clone());
    call.source.insert("jsonrpc_id".into(), id.clone());
    let mut step = Step::new(Content::Absent, at.clone());
    step.calls.push(call);
    b.step(step)
}

fn response(
    b: &mut Builder,
    pending: &mut BTreeMap<String, (String, Ptr)>,
    tasks: &mut Tasks,
    at: &Ptr,
    id: &Value,
    message: &Value,
) -> Result<(), InputError> {
    let Some((method, _)) = pending.remove(&id_key(id)) else {
        return Err(b.error(
            &at.join("/id"),
            format!("response id {} has no request before it (it cannot be attributed)", id_key(id)),
        ));
    };
    let result = message.get("result");
    let error = message.get("error");
    // a task-augmented call answers with the task, not the result (2025-11-25)
    if method == "tools/call"
        && let Some(task) = result.and_then(|r| r.pointer("/task/taskId")).and_then(Value::as_str)
    {
        let status = result.and_then(|r| r.pointer("/task/status")).and_then(Value::as_str).unwrap_or("unknown");
        tasks.calls.insert(task.to_string(), (id_text(id), status.to_string(), at.clone()));
        if let Some(call) = b.call_mut(&id_text(id)) {
            call.source.insert("task_id".into(), json!(task));
        }
        return Ok(());
    }
    let task_call = |tasks: &Tasks| {
        let task = tasks.asked.get(&id_key(id))?;
        Some((task.clone(), tasks.calls.get(task)?.0.clone()))
    };
    if method == "tasks/get" {
        if let (Some((task, _)), Some(status)) = (
            task_call(tasks),
            result.and_then(|r| r.get("status").or(r.pointer("/task/status"))).and_then(Value::as_str),
        ) && let Some(entry) = tasks.calls.get_mut(&task)
        {
            entry.1 = status.to_string();
        }
        return Ok(());
    }
    let (method, call_id) = match (method.as_str(), task_call(tasks)) {
        ("tasks/result", Some((task, call))) => {
            tasks.done.push(task);
            ("tools/call".to_string(), call)
        }
        _ => (method, id_text(id)),
    };
    match method.as_str() {
        "tools/call" => {
            let outcome = match (result, error) {
                (_, Some(error)) => CallResult {
                    result: Some(error.clone()),
                    is_error: Some(true),
                    error_kind: Some(ErrorKind::Protocol),
                    ..CallResult::default()
                },
                (Some(result), None) => {
                    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
                    CallResult {
                        result: Some(result.clone()),
                        is_error: Some(is_error),
                        error_kind: is_error.then_some(ErrorKind::Tool),
                        ..CallResult::default()
                    }
                }
                (None, None) => return Err(b.error(at, "JSON-RPC response with neither \"result\" nor \"error\"")),
            };
            b.result(&call_id, outcome, &at.join("/id"))
        }
        "tools/list" => {
            for t in result.and_then(|r| r.get("tools")).and_then(Value::as_array).into_iter().flatten() {
                if let Some(name) = str_field(t, "name") {
                    b.tool(
                        DeclaredTool {
                            name: name.to_string(),
                            description: str_field(t, "description").map(str::to_string),
                            input_schema: t.get("inputSchema").cloned(),
                            ..DeclaredTool::default()
                        }
                        .classify(t),
                    );
                }
            }
            Ok(())
        }
        "initialize" => {
            if let Some(r) = result {
                b.meta("protocol_version", r.get("protocolVersion").cloned().unwrap_or(Value::Null));
                b.meta("server", r.get("serverInfo").cloned().unwrap_or(Value::Null));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<Trace, InputError> {
        let src = Source::parse(Path::new("mcp.jsonl"), text)?;
        parse(&src)
    }

    const CALL: &str =
        r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}}"#;

    #[test]
    fn a_task_augmented_call_is_followed_to_its_real_result() {
        let text = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"render","arguments":{"doc":"q3"},"task":{"ttl":60000}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-9","status":"working"}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t-9"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"result":{"taskId":"t-9","status":"completed"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t-9"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"rendered"}],"isError":false}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"render","arguments":{"doc":"q4"},"task":{}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":{"task":{"taskId":"t-10","status":"working"}}}"#,
        ]
        .join("\n");
        let trace = parse_text(&text).unwrap();
        let calls: Vec<&Call> = trace.calls().collect();
        let first = calls[0].outcome.as_ref().unwrap();
        // the result, not the task handle
        assert_eq!(first.result.as_ref().unwrap()["content"][0]["text"], "rendered");
        assert_eq!(calls[0].source.get("task_id"), Some(&json!("t-9")));
        assert!(calls[1].outcome.is_none());
        let w = trace.warnings.iter().find(|w| w.code == "task_unresolved").unwrap();
        assert!(w.message.contains("t-10") && w.message.contains("working"), "{}", w.message);
    }

    #[test]
    fn tool_errors_and_protocol_errors_are_told_apart() {
        let text = [
            CALL.replace("ID", "1"),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"denied"}],"isError":true}}"#.into(),
            CALL.replace("ID", "2"),
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Unknown tool"}}"#.into(),
        ]
        .join("\n");
        let trace = parse_text(&text).unwrap();
        let kinds: Vec<_> = trace.calls().map(|c| c.outcome.as_ref().unwrap().error_kind).collect();
        assert_eq!(kinds, [Some(ErrorKind::Tool), Some(ErrorKind::Protocol)]);
    }

    #[test]
    fn an_orphan_response_and_a_reused_pending_id_are_errors_with_their_line() {
        let orphan = parse_text(&format!("{}\n{}", CALL.replace("ID", "1"), r#"{"jsonrpc":"2.0","id":9,"result":{}}"#))
            .unwrap_err();
        assert_eq!(orphan.line, 2, "{orphan}");
        assert!(orphan.message.contains("no request before it"), "{orphan}");
        let dup = parse_text(&format!("{}\n{}", CALL.replace("ID", "1"), CALL.replace("ID", "1"))).unwrap_err();
        assert!(dup.message.contains("duplicate JSON-RPC request id 1"), "{dup}");
    }
}
