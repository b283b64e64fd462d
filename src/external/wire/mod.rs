//! The model APIs an external agent may speak: each dialect reads its request into the
//! neutral shape (`neutral`) and renders a recorded response the way that vendor's SDK
//! parses it, whole or as server-sent events.
//!
//! Nothing here is random or reads a clock: ids come from [`WireAnswer::id`] (derived from
//! the run id, the case run and the recording position) and `created` from the run's
//! virtual clock, so the same run serves the same bytes. Streams are synthesised from
//! the assembled response, cut into deltas of [`DELTA_CHARS`] characters, so a client's
//! stream assembly is exercised on every call.

pub mod anthropic;
pub mod chat;
pub mod responses;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::dataset::recording::Usage;

/// Characters per streamed text or argument delta: small enough that an answer arrives
/// in several pieces, as real streams do.
pub const DELTA_CHARS: usize = 16;

/// Seconds since the Unix epoch at virtual time 0 (2025-01-01T00:00:00Z): `created`
/// fields are this plus the run's virtual clock, never the wall clock.
pub const EPOCH: u64 = 1_735_689_600;

/// Which API a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI Chat Completions, `POST /v1/chat/completions`.
    Chat,
    /// OpenAI Responses, `POST /v1/responses`.
    Responses,
    /// Anthropic Messages, `POST /v1/messages`.
    Messages,
}

impl Dialect {
    /// The name written into `model_called.api`.
    pub fn api(self) -> &'static str {
        match self {
            Dialect::Chat => "openai.chat.completions",
            Dialect::Responses => "openai.responses",
            Dialect::Messages => "anthropic.messages",
        }
    }

    /// The request in neutral form. `stored` resolves what a Responses request points
    /// at instead of sending it: `previous_response_id`, `item_reference` items.
    pub fn neutral(self, body: &Value, stored: &Stored) -> Result<Value, String> {
        let Some(object) = body.as_object() else {
            return Err("the request body is not a JSON object".into());
        };
        match self {
            Dialect::Chat => chat::neutral(object),
            Dialect::Responses => responses::neutral(object, stored),
            Dialect::Messages => anthropic::neutral(object),
        }
    }

    /// The answer as this API returns it; streamed when the request said `stream: true`.
    pub fn render(self, answer: &WireAnswer<'_>, body: &Value) -> Reply {
        let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        match (self, stream) {
            (Dialect::Chat, false) => Reply::json(200, &chat::response(answer)),
            (Dialect::Chat, true) => {
                let usage = body.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false);
                Reply::sse(chat::stream(answer, usage))
            }
            (Dialect::Responses, false) => Reply::json(200, &responses::response(answer, "completed")),
            (Dialect::Responses, true) => Reply::sse(responses::stream(answer)),
            (Dialect::Messages, false) => Reply::json(200, &anthropic::response(answer)),
            (Dialect::Messages, true) => Reply::sse(anthropic::stream(answer)),
        }
    }

    /// An error in this API's error shape. 4xx statuses are not retried by the SDKs,
    /// so a replay miss is reported once, not three times.
    pub fn error(self, status: u16, code: &str, message: &str) -> Reply {
        let body = match self {
            Dialect::Messages => json!({"type": "error", "error": {"type": code, "message": message}}),
            _ => json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}}),
        };
        Reply::json(status, &body)
    }
}

/// What a run's Responses exchanges leave behind for later requests to point at, as
/// the API stores them when `store` is true (its default): each response's
/// conversation, for `previous_response_id`, and each output item by its id, for an
/// input item `{"type": "item_reference", "id": …}` (the Vercel AI SDK sends its
/// earlier assistant messages and calls so). Only ids stateval issued in this case run
/// resolve.
#[derive(Debug, Default)]
pub struct Stored {
    /// `resp_…` → the request's messages plus the assistant's answer.
    responses: BTreeMap<String, Vec<Value>>,
    /// `msg_…`, `fc_…` → the output item, as the input item that repeats it.
    items: BTreeMap<String, Value>,
}

impl Stored {
    /// Keep what answering `request` (neutral) with `answer` stored.
    pub fn remember(&mut self, request: &Value, answer: &WireAnswer<'_>) {
        let mut messages = request.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
        messages.push(answer.assistant_message());
        self.responses.insert(responses::response_id(answer), messages);
        for (id, item) in responses::stored_items(answer) {
            self.items.insert(id, item);
        }
    }

    /// The conversation up to and including response `id`.
    pub fn conversation(&self, id: &str) -> Option<&Vec<Value>> {
        self.responses.get(id)
    }

    /// Output item `id`, as an input item.
    pub fn item(&self, id: &str) -> Option<&Value> {
        self.items.get(id)
    }

    /// `body` with each `item_reference` input item replaced by the item it names, for
    /// an upstream that never saw stateval's ids (record mode).
    pub fn inline(&self, body: &Value) -> Result<Value, String> {
        let mut body = body.clone();
        if let Some(items) = body.get_mut("input").and_then(Value::as_array_mut) {
            for (i, item) in items.iter_mut().enumerate() {
                if let Some(id) = responses::reference(item) {
                    *item = self.item(id).cloned().ok_or_else(|| responses::unknown_reference(i, id))?;
                }
            }
        }
        Ok(body)
    }
}

/// A tool call as served on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOut {
    pub id: String,
    pub name: String,
    pub args: Value,
}

/// A recorded response, ready to render.
#[derive(Debug, Clone)]
pub struct WireAnswer<'a> {
    /// Hex derived from the run id, the case run and the position.
    pub id: String,
    /// Unix seconds (see [`EPOCH`]).
    pub created: u64,
    /// The model the request named (echoed, as providers do).
    pub model: String,
    pub content: &'a str,
    pub tool_calls: Vec<CallOut>,
    pub usage: Usage,
}

impl WireAnswer<'_> {
    /// The answer as a neutral assistant message.
    pub fn assistant_message(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.content});
        if !self.tool_calls.is_empty() {
            message["tool_calls"] =
                self.tool_calls.iter().map(|c| json!({"id": c.id, "name": c.name, "args": c.args})).collect();
        }
        message
    }
}

/// An HTTP response body with its status and content type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(status: u16, value: &Value) -> Reply {
        Reply { status, content_type: "application/json", body: value.to_string().into_bytes() }
    }

    fn sse(body: String) -> Reply {
        Reply { status: 200, content_type: "text/event-stream", body: body.into_bytes() }
    }
}

/// Server-sent events named by their `type` (`event: T` then `data: JSON`), the framing
/// of the Responses and Anthropic streams.
pub fn typed_events(events: impl IntoIterator<Item = Value>) -> String {
    let mut out = String::new();
    for event in events {
        let kind = event["type"].as_str().unwrap_or_default().to_string();
        out.push_str(&format!("event: {kind}\ndata: {event}\n\n"));
    }
    out
}

/// Text cut into pieces of at most `size` characters (at least one piece).
pub fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (count, (i, _)) in text.char_indices().enumerate() {
        if count > 0 && count % size == 0 {
            out.push(&text[start..i]);
            start = i;
        }
    }
    out.push(&text[start..]);
    out
}

/// A message's text: a string, or the text of its content parts.
pub fn text_of(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join(""),
        Some(other) => other.to_string(),
    }
}

/// Tool arguments as the APIs carry them (a JSON string): parsed, or kept as the
/// string when they are not JSON (the digest still sees exactly what was sent).
pub fn parse_arguments(arguments: Option<&Value>) -> Value {
    match arguments {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        Some(other) => other.clone(),
        None => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::external::neutral;
    use crate::replay::differences::differences;

    /// A minimal request of each dialect, without any optional parameter.
    fn base(dialect: Dialect) -> Value {
        match dialect {
            Dialect::Chat => json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            Dialect::Responses => json!({"model": "m", "input": "hi"}),
            Dialect::Messages => {
                json!({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})
            }
        }
    }

    /// A dialect, where the parameter goes, two values, the pointer naming the change.
    type Case = (Dialect, &'static str, Value, Value, &'static str);

    /// Every answer-changing parameter each dialect carries: where it goes in the body,
    /// two values, and the pointer of the neutral request that must name the change.
    fn answer_changing() -> Vec<Case> {
        use Dialect::{Chat, Messages, Responses};
        let schema = |name: &str| json!({"type": "object", "properties": {name: {"type": "string"}}});
        vec![
            (Chat, "/parallel_tool_calls", json!(true), json!(false), "/params/parallel_tool_calls"),
            (Chat, "/reasoning_effort", json!("low"), json!("high"), "/params/reasoning/effort"),
            (
                Chat,
                "/response_format",
                json!({"type": "json_object"}),
                json!({"type": "text"}),
                "/params/response_format/type",
            ),
            (
                Chat,
                "/response_format",
                json!({"type": "json_schema", "json_schema": {"name": "a", "schema": schema("x")}}),
                json!({"type": "json_schema", "json_schema": {"name": "a", "schema": schema("y")}}),
                "/params/response_format/schema/properties/x",
            ),
            (Chat, "/tool_choice", json!("auto"), json!("required"), "/params/tool_choice"),
            (Chat, "/temperature", json!(0.2), json!(0.9), "/params/temperature"),
            (Chat, "/top_p", json!(0.5), json!(1), "/params/top_p"),
            (Chat, "/max_tokens", json!(10), json!(20), "/params/max_tokens"),
            (Chat, "/max_completion_tokens", json!(10), json!(20), "/params/max_tokens"),
            (Chat, "/stop", json!(["\n"]), json!(["END"]), "/params/stop/0"),
            (Chat, "/seed", json!(1), json!(2), "/params/seed"),
            (Chat, "/frequency_penalty", json!(0.1), json!(0.2), "/params/frequency_penalty"),
            (Chat, "/presence_penalty", json!(0.1), json!(0.2), "/params/presence_penalty"),
            (Chat, "/logit_bias", json!({"50256": -100}), json!({"50256": 100}), "/params/logit_bias/50256"),
            (Chat, "/n", json!(1), json!(2), "/params/n"),
            (Chat, "/verbosity", json!("low"), json!("high"), "/params/verbosity"),
            (Chat, "/modalities", json!(["text"]), json!(["text", "audio"]), "/params/modalities/1"),
            (
                Chat,
                "/web_search_options",
                json!({}),
                json!({"search_context_size": "low"}),
                "/params/web_search_options/search_context_size",
            ),
            (Responses, "/parallel_tool_calls", json!(true), json!(false), "/params/parallel_tool_calls"),
            (Responses, "/reasoning", json!({"effort": "low"}), json!({"effort": "high"}), "/params/reasoning/effort"),
            (
                Responses,
                "/text",
                json!({"format": {"type": "json_object"}}),
                json!({"format": {"type": "text"}}),
                "/params/response_format/type",
            ),
            (Responses, "/text", json!({"verbosity": "low"}), json!({"verbosity": "high"}), "/params/verbosity"),
            (Responses, "/tool_choice", json!("auto"), json!("none"), "/params/tool_choice"),
            (Responses, "/temperature", json!(0.2), json!(0.9), "/params/temperature"),
            (Responses, "/top_p", json!(0.5), json!(1), "/params/top_p"),
            (Responses, "/max_output_tokens", json!(10), json!(20), "/params/max_tokens"),
            (Responses, "/max_tool_calls", json!(1), json!(2), "/params/max_tool_calls"),
            (Responses, "/truncation", json!("auto"), json!("disabled"), "/params/truncation"),
            (Responses, "/prompt", json!({"id": "pmpt_1"}), json!({"id": "pmpt_2"}), "/params/prompt/id"),
            (Messages, "/tool_choice", json!({"type": "auto"}), json!({"type": "any"}), "/params/tool_choice/type"),
            (
                Messages,
                "/tool_choice",
                json!({"type": "auto"}),
                json!({"type": "auto", "disable_parallel_tool_use": true}),
                "/params/tool_choice/disable_parallel_tool_use",
            ),
            (
                Messages,
                "/thinking",
                json!({"type": "disabled"}),
                json!({"type": "enabled", "budget_tokens": 1024}),
                "/params/thinking/budget_tokens",
            ),
            (Messages, "/temperature", json!(0.2), json!(0.9), "/params/temperature"),
            (Messages, "/top_p", json!(0.5), json!(1), "/params/top_p"),
            (Messages, "/top_k", json!(5), json!(50), "/params/top_k"),
            (Messages, "/max_tokens", json!(10), json!(20), "/params/max_tokens"),
            (Messages, "/stop_sequences", json!(["END"]), json!(["STOP"]), "/params/stop/0"),
            (
                Messages,
                "/output_format",
                json!({"type": "json_schema", "schema": schema("x")}),
                json!({"type": "json_schema", "schema": schema("y")}),
                "/params/response_format/schema/properties/x",
            ),
        ]
    }

    fn read(dialect: Dialect, body: &Value) -> Value {
        dialect.neutral(body, &Stored::default()).unwrap()
    }

    #[test]
    fn changing_any_answer_changing_parameter_changes_the_digest_and_names_the_parameter() {
        for (dialect, at, a, b, pointer) in answer_changing() {
            let with = |v: &Value| {
                let mut body = base(dialect);
                body[&at[1..]] = v.clone();
                read(dialect, &body)
            };
            let (with_a, with_b, without) = (with(&a), with(&b), read(dialect, &base(dialect)));
            let what = format!("{dialect:?} {at}: {a} → {b}");
            assert_ne!(neutral::digest(&with_a).unwrap(), neutral::digest(&with_b).unwrap(), "{what}");
            assert_eq!(differences(&with_a, &with_b, 1), vec![pointer.to_string()], "{what}");
            // sending it at all is a change too
            let parameter = pointer.split('/').take(3).collect::<Vec<_>>().join("/");
            assert_eq!(differences(&without, &with_a, 1), vec![parameter], "{what}");
        }
    }

    #[test]
    fn a_request_without_optional_parameters_reads_as_it_always_has() {
        // the neutral form of these requests before the parameters were added: their
        // digests, in every recording and golden made so far, must not move
        assert_eq!(read(Dialect::Chat, &base(Dialect::Chat))["params"], json!({"model": "m"}));
        assert_eq!(read(Dialect::Responses, &base(Dialect::Responses))["params"], json!({"model": "m"}));
        assert_eq!(
            read(Dialect::Messages, &base(Dialect::Messages))["params"],
            json!({"model": "m", "max_tokens": 64})
        );
        // transport never counts: streaming, storage, users, caching keys, metadata
        let mut chat = base(Dialect::Chat);
        for (k, v) in [
            ("stream", json!(true)),
            ("stream_options", json!({"include_usage": true})),
            ("store", json!(true)),
            ("user", json!("u")),
            ("metadata", json!({"a": "b"})),
            ("service_tier", json!("auto")),
            ("prompt_cache_key", json!("k")),
        ] {
            chat[k] = v;
        }
        assert_eq!(read(Dialect::Chat, &chat)["params"], json!({"model": "m"}));
        let mut responses = base(Dialect::Responses);
        for (k, v) in [
            ("stream", json!(true)),
            ("store", json!(false)),
            ("include", json!(["reasoning.encrypted_content"])),
            ("safety_identifier", json!("s")),
            ("background", json!(false)),
        ] {
            responses[k] = v;
        }
        assert_eq!(read(Dialect::Responses, &responses)["params"], json!({"model": "m"}));
    }

    #[test]
    fn the_same_setting_reads_the_same_through_chat_and_responses() {
        let schema = json!({"type": "object", "properties": {"x": {"type": "string"}}});
        let mut chat = base(Dialect::Chat);
        chat["reasoning_effort"] = json!("low");
        chat["response_format"] =
            json!({"type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": true}});
        chat["max_completion_tokens"] = json!(9);
        let mut responses = base(Dialect::Responses);
        responses["reasoning"] = json!({"effort": "low"});
        responses["text"] = json!({"format": {"type": "json_schema", "name": "a", "schema": schema, "strict": true}});
        responses["max_output_tokens"] = json!(9);
        assert_eq!(read(Dialect::Chat, &chat)["params"], read(Dialect::Responses, &responses)["params"]);
    }

    #[test]
    fn text_is_cut_at_character_boundaries() {
        assert_eq!(pieces("naïve ✓ ok", 4), vec!["naïv", "e ✓ ", "ok"]);
        assert_eq!(pieces("", 4), vec![""]);
        assert_eq!(pieces("abcd", 4), vec!["abcd"]);
    }
}
