//! The live model behind the built-in runtime, for `stateval record`: a
//! [`ModelProvider`] that renders what the runtime compiled as an upstream request,
//! sends it through [`Upstream`] and hands the answer back as a recording line.
//!
//! The runtime gives it the document its request digest covers
//! (`{"memory","messages","system","tools"}`, [`ModelRequest::compiled`]). That becomes
//! an OpenAI Chat Completions request (the default) or an Anthropic Messages one
//! (`--upstream anthropic`): the system prompt — followed, when memory holds anything,
//! by `Memory (JSON):` and the memory view — the windowed messages, and the offered
//! tools with their input schemas; the model is `--model` or [`default_model`], and
//! Messages also gets `max_tokens` = [`ANTHROPIC_MAX_TOKENS`].
//!
//! The answer is scrubbed (its text and every tool call's arguments) before the runtime
//! sees it, so the conversation the run goes on with is exactly the one replay will
//! rebuild from the recording: the digests of later requests, taken by the runtime as
//! in replay, reproduce. The line carries that digest and the document it covers
//! (scrubbed too, so a secret a fixture or a case carries is never written; a scrubbed
//! document then no longer digests to the hash, which stays the runtime's).

use serde_json::{Map, Value, json};

use super::RecordMode;
use super::upstream::Provider;
use super::wire::Dialect;
use crate::dataset::recording::{ModelResponse, RecordedResponse};
use crate::replay::{ModelProvider, ModelRequest, ProviderError, Replayed};
use crate::secrets::Scrubber;

/// What Anthropic Messages is asked for at most per answer (it needs a limit).
pub const ANTHROPIC_MAX_TOKENS: u64 = 4096;

/// The model asked when `--model` is not given.
pub fn default_model(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAi => "gpt-4o-mini",
        Provider::Anthropic => "claude-3-5-haiku-latest",
    }
}

pub struct LiveProvider<'r> {
    record: &'r RecordMode,
    dialect: Dialect,
    model: String,
    scrubber: Scrubber,
}

impl<'r> LiveProvider<'r> {
    /// `scrub`: the profile's own secret patterns, beside the built-in ones.
    pub fn new(record: &'r RecordMode, scrub: &[String]) -> LiveProvider<'r> {
        let provider = record.provider.unwrap_or(Provider::OpenAi);
        let dialect = match provider {
            Provider::OpenAi => Dialect::Chat,
            Provider::Anthropic => Dialect::Messages,
        };
        let model = record.model.clone().unwrap_or_else(|| default_model(provider).to_string());
        LiveProvider { record, dialect, model, scrubber: Scrubber::new(scrub) }
    }
}

impl ModelProvider for LiveProvider<'_> {
    fn wants_compiled(&self) -> bool {
        true
    }

    fn waits(&self) -> bool {
        true
    }

    fn complete(&mut self, request: &ModelRequest) -> Result<Replayed<'_>, ProviderError> {
        let compiled = request.compiled.as_ref().ok_or_else(|| ProviderError::Live("no compiled request".into()))?;
        let body = render(self.dialect, &self.model, compiled);
        let scrubbed = |e: String| ProviderError::Live(self.scrubber.text(&e).unwrap_or(e));
        let fetched = self.record.upstream.call(self.dialect, &body).map_err(scrubbed)?;
        let mut response = ModelResponse { content: fetched.content, tool_calls: fetched.tool_calls, confidence: None };
        if let Some(clean) = self.scrubber.text(&response.content) {
            response.content = clean;
        }
        for call in &mut response.tool_calls {
            self.scrubber.value(&mut call.args);
        }
        let mut document = compiled.clone();
        self.scrubber.value(&mut document);
        let recorded = RecordedResponse {
            turn: Some(request.turn),
            step: Some(request.step),
            request_hash: Some(request.hash),
            request: Some(document),
            response,
            usage: fetched.usage,
            latency_ms: fetched.latency_ms,
        };
        let position = {
            let mut lines =
                self.record.lines.lock().map_err(|_| ProviderError::Live("recording lock poisoned".into()))?;
            lines.push(recorded.clone());
            lines.len() - 1
        };
        Ok(Replayed { position, recorded: std::borrow::Cow::Owned(recorded), divergence: None, renormalized: false })
    }
}

/// The upstream request for a compiled document: Chat or Messages.
pub fn render(dialect: Dialect, model: &str, compiled: &Value) -> Value {
    let mut system = compiled.get("system").and_then(Value::as_str).unwrap_or_default().to_string();
    if compiled.get("memory").and_then(Value::as_object).is_some_and(|m| m.values().any(|t| t != &json!({}))) {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str("Memory (JSON):\n");
        system.push_str(&compiled["memory"].to_string());
    }
    let messages = compiled.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let tools = compiled.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let schema = |t: &Value| match t.get("input_schema") {
        Some(s) if s.is_object() => s.clone(),
        _ => json!({"type": "object"}),
    };
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    match dialect {
        Dialect::Messages => {
            body.insert("max_tokens".into(), json!(ANTHROPIC_MAX_TOKENS));
            if !system.is_empty() {
                body.insert("system".into(), json!(system));
            }
            body.insert("messages".into(), Value::Array(anthropic_messages(messages)));
            if !tools.is_empty() {
                let tools = tools.iter().map(|t| {
                    let mut tool = json!({"name": t["name"], "input_schema": schema(t)});
                    if let Some(d) = t.get("description").filter(|d| d.is_string()) {
                        tool["description"] = d.clone();
                    }
                    tool
                });
                body.insert("tools".into(), tools.collect());
            }
        }
        Dialect::Chat | Dialect::Responses => {
            let mut out = Vec::new();
            if !system.is_empty() {
                out.push(json!({"role": "system", "content": system}));
            }
            out.extend(messages.iter().map(chat_message));
            body.insert("messages".into(), Value::Array(out));
            if !tools.is_empty() {
                let tools = tools.iter().map(|t| {
                    let mut function = json!({"name": t["name"], "parameters": schema(t)});
                    if let Some(d) = t.get("description").filter(|d| d.is_string()) {
                        function["description"] = d.clone();
                    }
                    json!({"type": "function", "function": function})
                });
                body.insert("tools".into(), tools.collect());
            }
        }
    }
    Value::Object(body)
}

/// A tool result as the text a vendor takes: a string as it is, anything else as JSON.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn chat_message(m: &Value) -> Value {
    let text = m.get("content").and_then(Value::as_str).unwrap_or_default();
    match m.get("role").and_then(Value::as_str) {
        Some("assistant") => {
            let calls = m.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            if calls.is_empty() {
                return json!({"role": "assistant", "content": text});
            }
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    let args = c.get("args").cloned().unwrap_or(json!({}));
                    json!({"id": c["id"], "type": "function",
                           "function": {"name": c["name"], "arguments": args.to_string()}})
                })
                .collect();
            let content = if text.is_empty() { Value::Null } else { json!(text) };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Some("tool") => {
            json!({"role": "tool", "tool_call_id": m["call_id"], "content": result_text(m.get("content"))})
        }
        _ => json!({"role": "user", "content": text}),
    }
}

/// What stands in for the user message the context window dropped, for Messages (it
/// must open with a user message).
pub const DROPPED: &str = "(Earlier messages were left out to fit the context budget.)";

/// Messages alternate user and assistant: tool results are `tool_result` blocks of a
/// user message, and a user message that follows them joins it. A window that starts
/// with an assistant message (its user message dropped) opens with [`DROPPED`].
fn anthropic_messages(messages: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    if messages.first().is_some_and(|m| m.get("role").and_then(Value::as_str) == Some("assistant")) {
        out.push(json!({"role": "user", "content": [{"type": "text", "text": DROPPED}]}));
    }
    for m in messages {
        let text = m.get("content").and_then(Value::as_str).unwrap_or_default();
        let (role, blocks) = match m.get("role").and_then(Value::as_str) {
            Some("assistant") => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                    blocks.push(json!({"type": "tool_use", "id": c["id"], "name": c["name"],
                                       "input": c.get("args").cloned().unwrap_or(json!({}))}));
                }
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                ("assistant", blocks)
            }
            Some("tool") => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": m["call_id"], "content": result_text(m.get("content"))}),
                ],
            ),
            _ => ("user", vec![json!({"type": "text", "text": text})]),
        };
        match out.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(list) = last["content"].as_array_mut() {
                    list.extend(blocks);
                }
            }
            _ => out.push(json!({"role": role, "content": blocks})),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled() -> Value {
        json!({"memory": {"semantic": {"user.name": "Ada"}},
               "messages": [{"role": "user", "content": "Where is 42?"},
                            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "name": "get_order", "args": {"order": "42"}}]},
                            {"role": "tool", "call_id": "call_1", "content": {"status": "shipped"}}],
               "system": "You help.",
               "tools": [{"name": "get_order", "description": "Look an order up.", "input_schema": {"type": "object"}}]})
    }

    #[test]
    fn a_compiled_request_renders_as_chat_and_reads_back_as_the_same_conversation() {
        let body = render(Dialect::Chat, "m", &compiled());
        assert_eq!(
            body["messages"][0]["content"],
            "You help.\n\nMemory (JSON):\n{\"semantic\":{\"user.name\":\"Ada\"}}"
        );
        assert_eq!(body["tools"][0]["function"]["parameters"], json!({"type": "object"}));
        let neutral = Dialect::Chat.neutral(&body, &Default::default()).unwrap();
        assert_eq!(neutral["messages"][1]["tool_calls"][0]["args"], json!({"order": "42"}));
        assert_eq!(neutral["messages"][2]["call_id"], "call_1");
        assert_eq!(neutral["messages"][2]["content"], "{\"status\":\"shipped\"}");
        assert_eq!(neutral["params"]["model"], "m");
    }

    #[test]
    fn a_compiled_request_renders_as_messages_with_tool_results_in_a_user_turn() {
        let mut doc = compiled();
        doc["memory"] = json!({});
        let body = render(Dialect::Messages, "c", &doc);
        assert_eq!(
            (body["system"].as_str(), body["max_tokens"].as_u64()),
            (Some("You help."), Some(ANTHROPIC_MAX_TOKENS))
        );
        let roles: Vec<&str> =
            body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(
            body["messages"][1]["content"],
            json!([{"type": "tool_use", "id": "call_1", "name": "get_order", "input": {"order": "42"}}])
        );
        let neutral = Dialect::Messages.neutral(&body, &Default::default()).unwrap();
        assert_eq!(neutral["messages"][2]["call_id"], "call_1");
        assert_eq!(neutral["tools"][0]["name"], "get_order");
    }

    #[test]
    fn a_window_that_dropped_its_user_message_still_opens_messages_with_one() {
        let mut doc = compiled();
        doc["messages"].as_array_mut().unwrap().remove(0);
        let body = render(Dialect::Messages, "c", &doc);
        assert_eq!(body["messages"][0], json!({"role": "user", "content": [{"type": "text", "text": DROPPED}]}));
        assert_eq!(body["messages"][1]["role"], "assistant");
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));
    }
}
