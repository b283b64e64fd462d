//! LangSmith run trees (a run exported with its `child_runs`, or a list of runs).
//!
//! A run has `id`, `name`, `run_type` (`chain`, `llm`, `tool`, `retriever`, …),
//! `inputs`, `outputs`, `error`, `start_time` and `child_runs`. Read here:
//!
//! - every `tool` run, in start order, is one call: `name`, `inputs` as the arguments
//!   (a lone `input` string that is JSON is parsed), `outputs.output` (else `outputs`)
//!   as the result, `error` a failed call (a tool error);
//! - the root run's `inputs.input` (or the last user / human message of
//!   `inputs.messages`) is the turn's input, and its `outputs.output` the answer;
//! - other runs are counted in `source.other_messages`.
//!
//! Like an MCP log, calls are not grouped by model response: each is one response
//! whose text is absent.
//!
//! **A run that carries its conversation** — an `llm` run of a chat model, or a
//! LangGraph run whose state is `messages` — is read from its messages instead, which
//! keep the model's text, each response's calls together and the results by call id
//! ([`conversation`]): `inputs.messages` (a list, or LangChain's list of lists), then
//! what `outputs` holds — `generations[][].message`, OpenAI's `choices[].message`, a
//! message under `output`, or `messages` (the graph's whole state, which repeats the
//! input: only what follows it is new). Messages come as OpenAI chat messages
//! (`role`), LangChain message dicts (`type`: `human`, `ai`, `system`, `tool`) or
//! LangChain's serialised constructors (`{"lc": 1, "id": [..., "AIMessage"], "kwargs":
//! {...}}`); LangChain tool calls (`{name, args, id}`) are put in the Chat shape. Tools
//! declared in `inputs.tools` or `extra.invocation_params.tools` are kept.

use serde_json::{Value, json};

use super::Format;
use super::builder::Builder;
use super::source::Source;
use super::trace::{Args, Call, CallResult, Content, ErrorKind, Ptr, Step, Trace, provenance, str_field};
use crate::diag::InputError;

const READS: &str =
    "LangSmith run tree (run_type, inputs, outputs, child_runs): tool runs and the root's input / output";

/// Is `src` a LangSmith run tree?
pub fn detect(src: &Source) -> bool {
    src.records()
        .iter()
        .any(|(_, _, r)| r.get("run_type").is_some() && (r.get("inputs").is_some() || r.get("child_runs").is_some()))
}

/// The file's one run tree: its root, and every other run in it with its place. A run
/// tree comes as a root with its `child_runs`, or as a list of runs (an export of a
/// trace) whose runs name their parent by `parent_run_id`: a run whose parent is in the
/// file is not a root. Several roots are refused, listing them.
#[allow(clippy::type_complexity)]
fn tree<'s>(src: &'s Source) -> Result<((Ptr, &'s Value), Vec<(Ptr, &'s Value)>), InputError> {
    let all: Vec<(Ptr, &Value)> = src
        .records()
        .into_iter()
        .map(|(d, p, v)| (Ptr::new(d, p), v))
        .filter(|(_, v)| v.get("run_type").is_some())
        .collect();
    let ids: std::collections::BTreeSet<&str> = all.iter().filter_map(|(_, r)| str_field(r, "id")).collect();
    let (roots, linked): (Vec<(Ptr, &Value)>, Vec<(Ptr, &Value)>) =
        all.into_iter().partition(|(_, r)| str_field(r, "parent_run_id").is_none_or(|p| !ids.contains(p)));
    if roots.len() > 1 {
        let ids: Vec<String> = roots.iter().map(|(_, r)| str_field(r, "id").unwrap_or("?").to_string()).collect();
        return Err(src.error(
            0,
            "",
            format!(
                "this file holds {} root runs ({}): each is its own conversation; split it, one run tree per file",
                roots.len(),
                ids.join(", ")
            ),
        ));
    }
    let Some((root_at, root)) = roots.into_iter().next() else {
        return Err(src.error(0, "", "no LangSmith run in this file"));
    };
    let mut runs = Vec::new();
    walk(root_at.clone(), root, &mut runs);
    for (at, run) in linked {
        runs.push((at.clone(), run));
        walk(at, run, &mut runs);
    }
    let mut seen = std::collections::BTreeSet::new();
    runs.retain(|(_, r)| str_field(r, "id").is_none_or(|id| seen.insert(id)));
    runs.sort_by(|a, b| str_field(a.1, "start_time").cmp(&str_field(b.1, "start_time")));
    Ok(((root_at, root), runs))
}

pub fn parse(src: &Source) -> Result<Trace, InputError> {
    let mut b = Builder::new(src, Format::LangSmith, READS);
    let ((root_at, root), runs) = tree(src)?;
    let (root_at, root) = (&root_at, root);
    b.meta("run_id", root.get("id").cloned().unwrap_or(Value::Null));
    b.meta("run_name", root.get("name").cloned().unwrap_or(Value::Null));
    let input = root.pointer("/inputs/input").and_then(Value::as_str).map(str::to_string).or_else(|| {
        let messages = root.pointer("/inputs/messages")?.as_array()?;
        let flat: Vec<&Value> =
            messages.iter().flat_map(|m| m.as_array().map_or_else(|| vec![m], |a| a.iter().collect())).collect();
        flat.iter().rev().find_map(|m| {
            let role = str_field(m, "role").or(str_field(m, "type"))?;
            matches!(role, "user" | "human").then(|| str_field(m, "content").unwrap_or_default().to_string())
        })
    });
    match input {
        Some(text) => {
            b.user(Content::Text(text), provenance([("run", root.get("id").cloned())]), None, &root_at.join("/inputs"))
        }
        None => b.user(Content::Absent, Default::default(), None, root_at),
    }
    let mut results = Vec::new();
    for (k, (at, run)) in runs.iter().enumerate() {
        let kind = str_field(run, "run_type").unwrap_or("unknown");
        if kind != "tool" {
            b.count_other(&format!("run:{kind}"));
            continue;
        }
        let id = str_field(run, "id").map_or_else(|| format!("tool-{k}"), str::to_string);
        let inputs = run.get("inputs").cloned().unwrap_or(Value::Null);
        let args = match inputs.get("input") {
            Some(Value::String(s)) if inputs.as_object().is_some_and(|o| o.len() == 1) => Args::from_text(s),
            _ => Args::from_value(&inputs),
        };
        let call = Call::new(Some(id.clone()), str_field(run, "name").unwrap_or("unnamed"), args, at.clone());
        let mut step = Step::new(Content::Absent, at.clone());
        step.calls.push(call);
        b.step(step)?;
        let error = run.get("error").filter(|e| !e.is_null());
        let result = run.pointer("/outputs/output").or(run.get("outputs")).filter(|o| !o.is_null()).or(error).cloned();
        let outcome = CallResult {
            result,
            is_error: Some(error.is_some()),
            error_kind: error.map(|_| ErrorKind::Tool),
            ..CallResult::default()
        };
        results.push((id, outcome, at.clone()));
    }
    for (id, outcome, at) in results {
        b.result(&id, outcome, &at)?;
    }
    if let Some(answer) = root.pointer("/outputs/output").and_then(Value::as_str) {
        let mut step = Step::new(Content::Text(answer.to_string()), root_at.join("/outputs"));
        step.source.insert("run".into(), json!(root.get("id")));
        b.step(step)?;
    }
    b.finish()
}

/// The root run's conversation as a Chat Completions request body, with where the run
/// is: `None` when the run does not carry one (no `inputs.messages`, or `outputs` holds
/// no message), and an error naming the message whose role cannot be told.
///
/// The run is the root when it carries its messages. A tree whose root does not and
/// that has no `tool` runs — an agent traced with `@traceable` around a client wrapped
/// by `wrap_openai`, whose `llm` runs hold each request's messages and the response —
/// is read from its last `llm` run (in start order): each request repeats the history,
/// so the last one and its response are the whole conversation (said in the third
/// value). An earlier `llm` run with more messages than the last is another
/// conversation: refused.
pub fn conversation(src: &Source) -> Result<Option<(Ptr, Value, Option<String>)>, InputError> {
    let Ok(((root_at, root), runs)) = tree(src) else { return Ok(None) };
    let carries = |r: &Value| r.pointer("/inputs/messages").is_some_and(Value::is_array);
    let llm: Vec<&(Ptr, &Value)> =
        runs.iter().filter(|(_, r)| str_field(r, "run_type") == Some("llm") && carries(r)).collect();
    let (at, root, note) = if carries(root) {
        (root_at, root, None)
    } else if !llm.is_empty() && !runs.iter().any(|(_, r)| str_field(r, "run_type") == Some("tool")) {
        let (at, last) = llm[llm.len() - 1];
        let count = |r: &Value| r.pointer("/inputs/messages").and_then(Value::as_array).map_or(0, Vec::len);
        if let Some((other_at, other)) = llm.iter().find(|(_, r)| count(r) > count(last)) {
            return Err(src.error(
                other_at.doc,
                &other_at.pointer,
                format!(
                    "llm run {} has more messages ({}) than the last llm run {} ({}): the llm runs of this tree are \
                     not one conversation",
                    str_field(other, "id").unwrap_or("?"),
                    count(other),
                    str_field(last, "id").unwrap_or("?"),
                    count(last)
                ),
            ));
        }
        let note = format!(
            "the last of {} llm runs under {} \"{}\" ({}), whose request repeats the conversation before it",
            llm.len(),
            str_field(root, "run_type").unwrap_or("run"),
            str_field(root, "name").unwrap_or("?"),
            str_field(last, "id").unwrap_or("?")
        );
        (at.clone(), *last, Some(note))
    } else {
        return Ok(None);
    };
    let (doc, pointer) = (at.doc, at.pointer.clone());
    let Some(inputs) = root.pointer("/inputs/messages").and_then(Value::as_array) else { return Ok(None) };
    let mut messages = Vec::new();
    for (i, m) in inputs.iter().enumerate() {
        match m {
            // LangChain's batch form: one list of messages per prompt
            Value::Array(batch) => {
                for (j, m) in batch.iter().enumerate() {
                    messages.push(chat_message(src, doc, &format!("{pointer}/inputs/messages/{i}/{j}"), m)?);
                }
            }
            m => messages.push(chat_message(src, doc, &format!("{pointer}/inputs/messages/{i}"), m)?),
        }
    }
    let outputs = root.get("outputs").filter(|o| !o.is_null());
    let mut replies: Vec<(String, &Value)> = Vec::new();
    if let Some(out) = outputs {
        let at = format!("{pointer}/outputs");
        if let Some(generations) = out.get("generations").and_then(Value::as_array) {
            for (i, g) in generations.iter().enumerate() {
                let list = g.as_array().map_or_else(
                    || vec![(String::new(), g)],
                    |l| l.iter().enumerate().map(|(j, x)| (format!("/{j}"), x)).collect(),
                );
                // the first generation of each prompt is the answer taken
                if let Some((j, first)) = list.into_iter().next()
                    && let Some(message) = first.get("message")
                {
                    replies.push((format!("{at}/generations/{i}{j}/message"), message));
                }
            }
        } else if let Some(choices) = out.get("choices").and_then(Value::as_array) {
            if let Some(message) = choices.first().and_then(|c| c.get("message")) {
                replies.push((format!("{at}/choices/0/message"), message));
            }
        } else if let Some(state) = out.get("messages").and_then(Value::as_array) {
            // a graph's state repeats its input: what follows it is the run's
            let skip = if state.len() >= inputs.len() { inputs.len() } else { 0 };
            for (i, m) in state.iter().enumerate().skip(skip) {
                replies.push((format!("{at}/messages/{i}"), m));
            }
        } else if let Some(message) = out.get("output").filter(|o| o.is_object()) {
            replies.push((format!("{at}/output"), message));
        } else if out.get("role").is_some() || out.get("type").is_some() {
            replies.push((at, out));
        }
    }
    if replies.is_empty() {
        return Ok(None);
    }
    for (at, m) in replies {
        messages.push(chat_message(src, doc, &at, m)?);
    }
    let tools = root
        .pointer("/inputs/tools")
        .or_else(|| root.pointer("/extra/invocation_params/tools"))
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let model = root
        .pointer("/extra/invocation_params/model")
        .or_else(|| root.pointer("/extra/invocation_params/model_name"))
        .or_else(|| root.pointer("/inputs/model"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut body = json!({"model": model, "messages": messages});
    if tools.as_array().is_some_and(|t| !t.is_empty()) {
        body["tools"] = tools;
    }
    Ok(Some((Ptr::new(doc, pointer), body, note)))
}

/// One message (OpenAI, a LangChain dict or a LangChain constructor) in the Chat shape.
fn chat_message(src: &Source, doc: usize, at: &str, m: &Value) -> Result<Value, InputError> {
    // LangChain's serialised form: the class name says the role, the fields are kwargs
    let (class, fields) = match (m.get("lc"), m.get("kwargs")) {
        (Some(_), Some(kwargs)) => {
            (m.get("id").and_then(Value::as_array).and_then(|id| id.last()).and_then(Value::as_str), kwargs)
        }
        _ => (None, m),
    };
    let kind = str_field(fields, "role").or(str_field(fields, "type")).or(class);
    let role = match kind {
        Some("user" | "human" | "HumanMessage" | "HumanMessageChunk") => "user",
        Some("assistant" | "ai" | "AIMessage" | "AIMessageChunk") => "assistant",
        Some("system" | "developer" | "SystemMessage") => "system",
        Some("tool" | "ToolMessage" | "function" | "FunctionMessage") => "tool",
        other => {
            return Err(src.error(
                doc,
                at,
                format!(
                    "cannot tell this message's role ({}): expected a role (user, assistant, system, tool) or a \
                     LangChain type (human, ai, system, tool)",
                    other.map_or_else(|| "none given".to_string(), |o| format!("{o:?}"))
                ),
            ));
        }
    };
    let mut out = json!({"role": role, "content": fields.get("content").cloned().unwrap_or(Value::Null)});
    if role == "tool" {
        out["tool_call_id"] = fields.get("tool_call_id").cloned().unwrap_or(Value::Null);
    }
    let calls = fields
        .get("tool_calls")
        .filter(|c| c.as_array().is_some_and(|c| !c.is_empty()))
        .or_else(|| fields.pointer("/additional_kwargs/tool_calls"));
    if role == "assistant"
        && let Some(Value::Array(calls)) = calls
    {
        let calls: Vec<Value> = calls
            .iter()
            .map(|c| match c.get("function") {
                Some(_) => c.clone(),
                // LangChain: {name, args, id}; args an object
                None => {
                    let args = match c.get("args") {
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                        None => "{}".into(),
                    };
                    json!({"id": c.get("id"), "type": "function", "function": {"name": c.get("name"), "arguments": args}})
                }
            })
            .collect();
        out["tool_calls"] = Value::Array(calls);
    }
    Ok(out)
}

/// Every run under `run` (itself excluded), with its place.
fn walk<'v>(at: Ptr, run: &'v Value, out: &mut Vec<(Ptr, &'v Value)>) {
    for (i, child) in run.get("child_runs").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let here = at.join(format!("/child_runs/{i}"));
        out.push((here.clone(), child));
        walk(here, child, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn tool_runs_are_the_calls_and_the_root_gives_input_and_answer() {
        let text = r#"{"id": "r0", "name": "AgentExecutor", "run_type": "chain", "start_time": "2024-05-01T10:00:00",
          "inputs": {"input": "what is 2 to the 10th?"}, "outputs": {"output": "1024"}, "error": null,
          "child_runs": [
            {"id": "r1", "name": "ChatOpenAI", "run_type": "llm", "start_time": "2024-05-01T10:00:01", "inputs": {}, "outputs": {}, "child_runs": []},
            {"id": "r2", "name": "power", "run_type": "tool", "start_time": "2024-05-01T10:00:02",
             "inputs": {"input": "{\"base\": 2, \"exp\": 10}"}, "outputs": {"output": "1024"}, "error": null, "child_runs": []},
            {"id": "r3", "name": "notify", "run_type": "tool", "start_time": "2024-05-01T10:00:03",
             "inputs": {"to": "ops"}, "outputs": null, "error": "ConnectionError: refused", "child_runs": []}]}"#;
        let src = Source::parse(Path::new("run.json"), text).unwrap();
        assert!(detect(&src));
        let trace = parse(&src).unwrap();
        assert_eq!(trace.calls().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["power", "notify"]);
        assert_eq!(trace.turns[0].input, Content::Text("what is 2 to the 10th?".into()));
        let first = trace.calls().next().unwrap();
        assert_eq!(
            first.args,
            Args::Json { value: json!({"base": 2, "exp": 10}), raw: Some("{\"base\": 2, \"exp\": 10}".into()) }
        );
        assert_eq!(trace.calls().nth(1).and_then(|c| c.outcome.as_ref()).and_then(|o| o.is_error), Some(true));
        assert_eq!(trace.turns[0].steps.last().map(|s| s.content.clone()), Some(Content::Text("1024".into())));
    }

    #[test]
    fn a_run_with_its_messages_is_read_as_the_conversation() {
        // an llm run of ChatOpenAI: LangChain constructors in, a generation out
        let text = r#"{"id": "r9", "name": "ChatOpenAI", "run_type": "llm",
          "inputs": {"messages": [[
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "SystemMessage"], "kwargs": {"content": "Be brief.", "type": "system"}},
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"], "kwargs": {"content": "Weather in Paris?", "type": "human"}},
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"], "kwargs": {"content": "", "type": "ai",
              "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}]}},
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"], "kwargs": {"content": "18C, clear", "type": "tool", "tool_call_id": "call_1"}}]]},
          "outputs": {"generations": [[{"text": "18C and clear.", "type": "ChatGeneration",
            "message": {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"], "kwargs": {"content": "18C and clear.", "type": "ai"}}}]]},
          "extra": {"invocation_params": {"model": "gpt-4o-mini", "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}}}"#;
        let src = Source::parse(Path::new("run.json"), text).unwrap();
        let (_, body, _) = conversation(&src).unwrap().expect("a conversation");
        let roles: Vec<&str> =
            body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
        assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
        assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
        // a message whose role cannot be told is an error at its place
        let bad = text.replace("\"type\": \"human\"}", "\"type\": \"humman\"}").replace("HumanMessage\"]", "Humman\"]");
        let src = Source::parse(Path::new("run.json"), &bad).unwrap();
        let err = conversation(&src).unwrap_err();
        assert!(err.message.contains("\"humman\""), "{err}");
        assert_eq!(err.line, 4, "{err}");
        // a run tree without messages is not one
        let tree = r#"{"id": "r0", "run_type": "chain", "inputs": {"input": "x"}, "outputs": {"output": "y"}}"#;
        assert!(conversation(&Source::parse(Path::new("t.json"), tree).unwrap()).unwrap().is_none());
    }
}
