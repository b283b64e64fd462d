//! The live model API behind `stateval record`: the one place stateval calls anything
//! live, and only when asked to record.
//!
//! The agent's request is forwarded as it came, streamed if the agent asked for a
//! stream (Chat also asks for the usage chunk). A streamed answer is reassembled
//! ([`sse`]) and must have completed; the recording holds the assembled response, and
//! the agent gets the stream it asked for rendered from it, exactly as replay will
//! render it. The key comes from stateval's own
//! environment (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`), which the agent never sees; it
//! travels in a header and is never written anywhere.
//!
//! Every error this module returns is scrubbed first ([`Upstream::call`]): an upstream
//! that refuses a key often quotes it, a gateway may echo the request, and the base URL
//! may carry a password, while `record` prints the message and an agent is handed it.
//!
//! Judge models are asked here too ([`Upstream::ask_judge`]), for `stateval record
//! --judge`: one sample of a rendered judge request per call.

mod sse;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::wire::{Dialect, parse_arguments, text_of};
use crate::dataset::recording::{ToolCall, Usage};
use crate::grade::judge;
use crate::pipeline::judges::JudgeUpstream;
use crate::secrets::{REDACTED, Scrubber};

/// Which vendor a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    pub fn parse(name: &str) -> Result<Provider, String> {
        match name {
            "openai" => Ok(Provider::OpenAi),
            "anthropic" => Ok(Provider::Anthropic),
            other => Err(format!("unknown upstream {other:?} (expected openai or anthropic)")),
        }
    }

    fn of(dialect: Dialect) -> Provider {
        match dialect {
            Dialect::Chat | Dialect::Responses => Provider::OpenAi,
            Dialect::Messages => Provider::Anthropic,
        }
    }

    fn key_variable(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    fn default_url(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com",
        }
    }
}

/// The Anthropic API version sent upstream.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How long one upstream call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// How much of an error answer's body the message quotes.
const SHOWN_CHARS: usize = 300;

/// stateval's own keys are replaced in an error whatever their shape; one shorter than
/// this is not a real key, and replacing it would garble the message instead.
const MIN_KEY_LEN: usize = 8;

pub struct Upstream {
    only: Option<Provider>,
    url: Option<String>,
    keys: [Option<String>; 2],
    agent: ureq::Agent,
}

/// An upstream answer, assembled into the recording's dialect-neutral shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub latency_ms: u64,
    /// The upstream's own response id (Responses chains by it).
    pub upstream_id: Option<String>,
}

impl Upstream {
    /// `only`: refuse requests for the other vendor; `url`: the base URL instead of the
    /// vendor's (a proxy, a gateway, a test server).
    pub fn new(only: Option<Provider>, url: Option<String>) -> Upstream {
        let config =
            ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(CALL_TIMEOUT)).build();
        Upstream {
            only,
            url: url.map(|u| u.trim_end_matches('/').to_string()),
            keys: [std::env::var("OPENAI_API_KEY").ok(), std::env::var("ANTHROPIC_API_KEY").ok()],
            agent: config.into(),
        }
    }

    /// Forward `body` (as the agent sent it through `dialect`) and assemble the answer.
    /// The error, if any, is scrubbed ([`Upstream::scrubbed`]).
    pub fn call(&self, dialect: Dialect, body: &Value) -> Result<Fetched, String> {
        self.forward(dialect, body).map_err(|e| self.scrubbed(e))
    }

    /// An error message with stateval's own keys and every secret [`Scrubber`] knows
    /// replaced: what an upstream answered, the URL it was reached at.
    fn scrubbed(&self, message: String) -> String {
        let mut message = message;
        for key in self.keys.iter().flatten().filter(|k| k.len() >= MIN_KEY_LEN) {
            message = message.replace(key.as_str(), REDACTED);
        }
        Scrubber::default().text(&message).unwrap_or(message)
    }

    fn forward(&self, dialect: Dialect, body: &Value) -> Result<Fetched, String> {
        let provider = Provider::of(dialect);
        if self.only.is_some_and(|p| p != provider) {
            return Err(format!(
                "the agent called {}, but the upstream is restricted to the other vendor",
                dialect.api()
            ));
        }
        let key = self.keys[provider as usize]
            .as_deref()
            .ok_or_else(|| format!("{} is not set: recording needs the upstream's key", provider.key_variable()))?;
        let base = self.url.as_deref().unwrap_or(provider.default_url());
        let path = match dialect {
            Dialect::Chat => "/chat/completions",
            Dialect::Responses => "/responses",
            Dialect::Messages => "/v1/messages",
        };
        let streamed = body.get("stream") == Some(&json!(true));
        let mut forwarded = body.clone();
        if let Some(map) = forwarded.as_object_mut()
            && streamed
            && dialect == Dialect::Chat
        {
            // without it a Chat stream carries no usage
            map.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let request = self.agent.post(format!("{base}{path}")).header("content-type", "application/json");
        let request = match provider {
            Provider::OpenAi => request.header("authorization", format!("Bearer {key}")),
            Provider::Anthropic => request.header("x-api-key", key).header("anthropic-version", ANTHROPIC_VERSION),
        };
        let started = Instant::now();
        let mut response = request.send(forwarded.to_string()).map_err(|e| format!("upstream {base}: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("upstream {base}: the answer did not arrive whole: {e}"))?;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if !(200..300).contains(&status) {
            // scrubbed before it is cut short, or a secret cut in two would no longer be known
            let shown: String = self.scrubbed(text).chars().take(SHOWN_CHARS).collect();
            return Err(format!("upstream {base}{path} answered HTTP {status}: {shown}"));
        }
        let event_stream = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let value: Value = if event_stream {
            sse::reassemble(dialect, &text).map_err(|e| format!("upstream {base}{path}: {e}; nothing recorded"))?
        } else {
            serde_json::from_str(&text)
                .map_err(|e| format!("upstream {base}{path}: the answer is not whole JSON ({e}); nothing recorded"))?
        };
        let mut fetched = assemble(dialect, &value)?;
        fetched.latency_ms = latency_ms;
        Ok(fetched)
    }
}

/// The one sampling parameter Anthropic Messages cannot take.
const NO_ANTHROPIC_SEED: &str = "seed: Anthropic Messages has no seed; drop it from the profile or ask through openai";

impl Upstream {
    /// Ask a judge model one sample of a rendered judge request (`grade::judge`): the
    /// prompt is [`judge::messages`] of the request, the model and sampling parameters
    /// are the request's own, so what is asked is exactly what the key pins. OpenAI is
    /// also asked for a JSON object (`response_format`), which the prompt demands anyway.
    pub fn ask_judge(&self, api: JudgeUpstream, request: &Value) -> Result<Fetched, String> {
        let messages = judge::messages(request);
        let params = request.get("params").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut body = json!({"model": request["model"]});
        let dialect = match api {
            JudgeUpstream::Openai => {
                body["messages"] = messages;
                body["response_format"] = json!({"type": "json_object"});
                Dialect::Chat
            }
            JudgeUpstream::Anthropic => {
                if params.contains_key("seed") {
                    return Err(NO_ANTHROPIC_SEED.into());
                }
                if !params.contains_key("max_tokens") {
                    return Err("max_tokens: Anthropic Messages needs it; set it in the judge profile \
                                (it is part of the request, so of the key)"
                        .into());
                }
                body["system"] = messages[0]["content"].clone();
                body["messages"] = json!([messages[1]]);
                Dialect::Messages
            }
        };
        if let Some(map) = body.as_object_mut() {
            map.extend(params);
        }
        self.call(dialect, &body)
    }
}

/// A vendor's whole response → content, tool calls, usage.
pub fn assemble(dialect: Dialect, response: &Value) -> Result<Fetched, String> {
    let number = |p: &str| response.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let mut fetched = Fetched {
        content: String::new(),
        tool_calls: Vec::new(),
        usage: Usage::default(),
        latency_ms: 0,
        upstream_id: response.get("id").and_then(Value::as_str).map(str::to_string),
    };
    match dialect {
        Dialect::Chat => {
            let message = response.pointer("/choices/0/message").ok_or("the answer has no choices[0].message")?;
            fetched.content = text_of(message.get("content"));
            for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                fetched.tool_calls.push(ToolCall {
                    id: call.get("id").and_then(Value::as_str).map(str::to_string),
                    name: call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string(),
                    args: parse_arguments(call.pointer("/function/arguments")),
                });
            }
            fetched.usage = Usage {
                input_tokens: number("/usage/prompt_tokens"),
                output_tokens: number("/usage/completion_tokens"),
            };
        }
        Dialect::Responses => {
            for item in response.get("output").and_then(Value::as_array).into_iter().flatten() {
                match item.get("type").and_then(Value::as_str) {
                    Some("message") => fetched.content.push_str(&text_of(item.get("content"))),
                    Some("function_call") => fetched.tool_calls.push(ToolCall {
                        id: item.get("call_id").and_then(Value::as_str).map(str::to_string),
                        name: item.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                        args: parse_arguments(item.get("arguments")),
                    }),
                    _ => {}
                }
            }
            fetched.usage =
                Usage { input_tokens: number("/usage/input_tokens"), output_tokens: number("/usage/output_tokens") };
        }
        Dialect::Messages => {
            for block in response.get("content").and_then(Value::as_array).ok_or("the answer has no content")? {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        fetched.content.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default())
                    }
                    Some("tool_use") => fetched.tool_calls.push(ToolCall {
                        id: block.get("id").and_then(Value::as_str).map(str::to_string),
                        name: block.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                        args: block.get("input").cloned().unwrap_or(json!({})),
                    }),
                    _ => {}
                }
            }
            fetched.usage =
                Usage { input_tokens: number("/usage/input_tokens"), output_tokens: number("/usage/output_tokens") };
        }
    }
    Ok(fetched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_vendors_answer_assembles_into_content_calls_and_usage() {
        let chat = json!({"id": "c", "choices": [{"message": {"content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get", "arguments": "{\"a\":1}"}}]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2}});
        let f = assemble(Dialect::Chat, &chat).unwrap();
        assert_eq!((f.content.as_str(), f.tool_calls[0].args.clone(), f.usage.input_tokens), ("", json!({"a": 1}), 5));
        let responses = json!({"id": "resp_up", "output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c9", "name": "get", "arguments": "{}"}], "usage": {"input_tokens": 3, "output_tokens": 1}});
        let f = assemble(Dialect::Responses, &responses).unwrap();
        assert_eq!(
            (f.content.as_str(), f.tool_calls[0].id.as_deref(), f.upstream_id.as_deref()),
            ("hi", Some("c9"), Some("resp_up"))
        );
        let messages = json!({"content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"b": 2}}],
            "usage": {"input_tokens": 4, "output_tokens": 6}});
        let f = assemble(Dialect::Messages, &messages).unwrap();
        assert_eq!(
            (f.content.as_str(), f.tool_calls[0].args.clone(), f.usage.output_tokens),
            ("ok", json!({"b": 2}), 6)
        );
        assert!(assemble(Dialect::Chat, &json!({"choices": []})).is_err());
    }
}
