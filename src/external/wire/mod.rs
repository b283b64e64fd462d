//! The model APIs an external agent may speak: each dialect reads its request into the
//! neutral shape (`neutral`) and renders a recorded response the way that vendor's SDK
//! parses it, whole or as server-sent events.
//!
//! Nothing here is random or reads a clock: ids come from [`Answer::id`] (derived from
//! the run id, the case run and the recording position) and `created` from the run's
//! virtual clock, so the same run serves the same bytes. Streams are synthesised from
//! the assembled response, cut into deltas of [`DELTA_CHARS`] characters, so a client's
//! stream assembly is exercised on every call.

pub mod anthropic;
pub mod chat;
pub mod responses;

use serde_json::{Value, json};

use crate::replay::Usage;

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

    /// The request in neutral form. `previous` resolves a Responses
    /// `previous_response_id` to the messages of that exchange.
    pub fn neutral(self, body: &Value, previous: &dyn Fn(&str) -> Option<Vec<Value>>) -> Result<Value, String> {
        let Some(object) = body.as_object() else {
            return Err("the request body is not a JSON object".into());
        };
        match self {
            Dialect::Chat => chat::neutral(object),
            Dialect::Responses => responses::neutral(object, previous),
            Dialect::Messages => anthropic::neutral(object),
        }
    }

    /// The answer as this API returns it; streamed when the request said `stream: true`.
    pub fn render(self, answer: &Answer<'_>, body: &Value) -> Reply {
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

    /// The messages one exchange adds to a Responses conversation: the request's own
    /// messages plus the assistant's answer (for a later `previous_response_id`).
    pub fn exchange(request: &Value, answer: &Answer<'_>) -> Vec<Value> {
        let mut messages = request.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
        messages.push(answer.assistant_message());
        messages
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
pub struct Answer<'a> {
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

impl Answer<'_> {
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

    #[test]
    fn text_is_cut_at_character_boundaries() {
        assert_eq!(pieces("naïve ✓ ok", 4), vec!["naïv", "e ✓ ", "ok"]);
        assert_eq!(pieces("", 4), vec![""]);
        assert_eq!(pieces("abcd", 4), vec!["abcd"]);
    }
}
