//! `--from auto`: tell the format from the content.
//!
//! Each format has evidence only it shows: OTLP's `resourceSpans` / `resourceLogs`,
//! JSON-RPC's `"jsonrpc": "2.0"`, the envelope's `tool_calls` / `conversation`,
//! Responses items (`function_call`, `input_text`, a `response` object), Anthropic
//! blocks (`tool_use`, `tool_result`, a top-level `system`), Chat Completions fields
//! (`tool_calls`, `tool_call_id`, a `system` / `developer` / `tool` role, a
//! `chat.completion` object). Exactly one format with evidence is the answer. None, or
//! several — a bare list of user/assistant text messages reads the same in three APIs —
//! is an error that lists the formats and asks for `--from`.

use serde_json::Value;

use super::source::Source;
use super::{Format, ImportError};

/// The format of `src`, or an error saying why it cannot be told.
pub fn detect(src: &Source) -> Result<Format, ImportError> {
    let first = src.docs.first().map(|d| &d.value);
    if first.is_some_and(|v| v.get("hash").is_some() && v.get("seq").is_some() && v.get("kind").is_some()) {
        return Err(ImportError::Detect {
            path: src.path.clone(),
            message: "this is already a stateval event log: verify, show or reconstruct it directly".into(),
        });
    }
    if let Some(message) = api_error(src) {
        return Err(ImportError::Detect { path: src.path.clone(), message });
    }
    if let Some(what) = super::foreign::recognise(src) {
        return Err(ImportError::Detect { path: src.path.clone(), message: format!("this is {what}") });
    }
    let found: Vec<Format> = Format::ALL.into_iter().filter(|f| evidence(src, *f)).collect();
    let fail = |message: String| ImportError::Detect { path: src.path.clone(), message };
    match found.as_slice() {
        [one] => Ok(*one),
        [] if looks_like_chat(src) => Err(fail(format!(
            "ambiguous format: a list of plain user/assistant messages reads the same as openai, openai-responses \
             and anthropic, and none of their own marks is present ({}); pass --from FORMAT (one of: {})",
            Format::ALL.iter().map(|f| format!("{f}: {}", looks_for(*f))).collect::<Vec<_>>().join("; "),
            Format::list()
        ))),
        [] => Err(fail(format!(
            "unknown format: the content has the marks of no format read — {}; pass --from FORMAT (one of: {}) if \
             you know it",
            Format::ALL.iter().map(|f| format!("{f}: {}", looks_for(*f))).collect::<Vec<_>>().join("; "),
            Format::list()
        ))),
        several => Err(fail(format!(
            "ambiguous format: the content has marks of several formats — {}; pass --from FORMAT (one of: {})",
            several.iter().map(|f| format!("{f} ({})", looks_for(*f))).collect::<Vec<_>>().join(", "),
            Format::list()
        ))),
    }
}

/// What `auto` looks for in each format, for messages that say why a format was or
/// was not taken.
fn looks_for(format: Format) -> &'static str {
    match format {
        Format::OpenAi => {
            "no tool_calls, tool_call_id, tool role, chat.completion object or gpt/o-series model beside messages"
        }
        Format::OpenAiResponses => {
            "no function_call / function_call_output / reasoning item, input_text / output_text part or response \
             object"
        }
        Format::Anthropic => {
            "no tool_use / tool_result / thinking block, message with stop_reason, top-level system or claude model"
        }
        Format::Otel => "no resourceSpans / resourceLogs, Jaeger data[].spans or Zipkin span list",
        Format::Mcp => "no \"jsonrpc\": \"2.0\" message",
        Format::Envelope => "no tool_calls list, conversation.turns or trace.tool_calls",
        Format::AgentsSdk => "no trace / trace.span object with span_data",
        Format::LangSmith => "no run with run_type and inputs / child_runs",
    }
}

/// A provider's error body (`{"error": {"type", "code", "message"}}`, as OpenAI and
/// Anthropic return it) holds no conversation: say what it is and what it says.
fn api_error(src: &Source) -> Option<String> {
    let [doc] = src.docs.as_slice() else { return None };
    let error = doc.value.get("error").filter(|e| e.get("message").is_some())?;
    let conversational = ["messages", "input", "output", "choices", "content"];
    if conversational.iter().any(|k| doc.value.get(k).is_some()) {
        return None;
    }
    let kind = ["type", "code"].iter().find_map(|k| error.get(*k).and_then(Value::as_str)).unwrap_or("unknown");
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    Some(format!(
        "this is an API error response ({kind}: {message}), not a conversation: there is nothing to import; import \
         the request that led to it, or the trace around it"
    ))
}

/// The top-level values to look at: each document, the elements of a top-level
/// array, and the `messages` / `input` / `output` lists of a request or response body.
fn items<'s>(src: &'s Source) -> Vec<&'s Value> {
    let mut out = Vec::new();
    for (_, _, record) in src.records() {
        out.push(record);
        for key in ["messages", "input", "output"] {
            if let Some(Value::Array(list)) = record.get(key) {
                out.extend(list);
            }
        }
    }
    out
}

fn evidence(src: &Source, format: Format) -> bool {
    let docs = || src.docs.iter().map(|d| &d.value);
    let items = items(src);
    let has_key = |v: &Value, k: &str| v.get(k).is_some_and(|x| !x.is_null());
    let block_types = |v: &Value| -> Vec<String> {
        match v.get("content") {
            Some(Value::Array(parts)) => {
                parts.iter().filter_map(|p| p.get("type").and_then(Value::as_str).map(str::to_string)).collect()
            }
            _ => Vec::new(),
        }
    };
    match format {
        Format::Otel => docs().any(|d| {
            d.get("resourceSpans").is_some()
                || d.get("resourceLogs").is_some()
                || super::otel::exports::is_jaeger(d)
                || super::otel::exports::is_zipkin(d)
        }),
        Format::Mcp => items.iter().any(|v| {
            v.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
                || v.as_array().is_some_and(|batch| batch.iter().any(|m| m.get("jsonrpc").is_some()))
        }),
        Format::AgentsSdk => super::agents_sdk::detect(src),
        Format::LangSmith => super::langsmith::detect(src),
        Format::Envelope => docs().any(|d| {
            d.is_object()
                && (d.get("tool_calls").is_some_and(Value::is_array)
                    || d.pointer("/conversation/turns").is_some()
                    || d.pointer("/trace/tool_calls").is_some()
                    || d.pointer("/trace/conversation").is_some())
        }),
        Format::OpenAiResponses => {
            docs().any(|d| d.get("object").and_then(Value::as_str) == Some("response"))
                || items.iter().any(|v| {
                    matches!(
                        v.get("type").and_then(Value::as_str),
                        Some(
                            "function_call"
                                | "function_call_output"
                                | "reasoning"
                                | "custom_tool_call"
                                | "custom_tool_call_output"
                                | "mcp_call"
                        )
                    ) || (v.get("type").and_then(Value::as_str) == Some("message")
                        && v.get("role").is_some()
                        && v.get("stop_reason").is_none())
                        || block_types(v).iter().any(|t| matches!(t.as_str(), "input_text" | "output_text"))
                })
        }
        Format::Anthropic => {
            docs().any(|d| {
                has_key(d, "messages")
                    && (has_key(d, "system")
                        || has_key(d, "anthropic_version")
                        || model(d).is_some_and(|m| m.starts_with("claude")))
            }) || items.iter().any(|v| {
                (v.get("type").and_then(Value::as_str) == Some("message")
                    && v.get("role").is_some()
                    && has_key(v, "stop_reason"))
                    || block_types(v)
                        .iter()
                        .any(|t| matches!(t.as_str(), "tool_use" | "tool_result" | "thinking" | "redacted_thinking"))
            })
        }
        Format::OpenAi => {
            docs().any(|d| has_key(d, "messages") && model(d).is_some_and(is_openai_model))
                || items.iter().any(|v| {
                    v.get("object").and_then(Value::as_str) == Some("chat.completion")
                        || has_key(v, "tool_calls") && v.get("role").is_some()
                        || has_key(v, "tool_call_id")
                        || matches!(v.get("role").and_then(Value::as_str), Some("tool" | "function"))
                        || block_types(v).iter().any(|t| t == "image_url")
                })
        }
    }
}

fn model(v: &Value) -> Option<&str> {
    v.get("model").and_then(Value::as_str)
}

/// OpenAI's model families, by name: a request body names its model.
fn is_openai_model(m: &str) -> bool {
    m.starts_with("gpt-") || ["o1", "o3", "o4"].iter().any(|p| m == *p || m.starts_with(&format!("{p}-")))
}

/// Messages with roles and nothing else to go by.
fn looks_like_chat(src: &Source) -> bool {
    let items = items(src);
    !items.is_empty() && items.iter().any(|v| v.get("role").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn detect_text(text: &str) -> Result<Format, ImportError> {
        detect(&Source::parse(Path::new("x.json"), text).unwrap())
    }

    #[test]
    fn each_format_is_told_by_its_own_marks() {
        assert_eq!(detect_text(r#"{"resourceSpans":[]}"#).unwrap(), Format::Otel);
        assert_eq!(detect_text(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap(), Format::Mcp);
        assert_eq!(detect_text(r#"{"tool_calls":[],"conversation":{"turns":[]}}"#).unwrap(), Format::Envelope);
        assert_eq!(
            detect_text(r#"[{"role":"user","content":"x"},{"type":"function_call","call_id":"c","name":"f"}]"#)
                .unwrap(),
            Format::OpenAiResponses
        );
        assert_eq!(
            detect_text(r#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}]"#).unwrap(),
            Format::Anthropic
        );
        assert_eq!(detect_text(r#"[{"role":"tool","tool_call_id":"c","content":"r"}]"#).unwrap(), Format::OpenAi);
    }

    #[test]
    fn a_request_body_names_its_provider_by_its_model() {
        let claude = r#"{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(detect_text(claude).unwrap(), Format::Anthropic);
        let gpt = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(detect_text(gpt).unwrap(), Format::OpenAi);
    }

    #[test]
    fn plain_chat_is_ambiguous_and_unknown_content_lists_the_formats() {
        let err =
            detect_text(r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#).unwrap_err();
        assert!(err.to_string().contains("ambiguous"), "{err}");
        assert!(err.to_string().contains("openai-responses"), "{err}");
        let log = detect_text(r#"{"data":{},"hash":"h","kind":"run_started","prev":null,"seq":0,"t":0,"turn":null}"#);
        assert!(log.unwrap_err().to_string().contains("already a stateval event log"));
        let err = detect_text(r#"{"hello":"world"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown format"), "{err}");
        assert!(err.to_string().contains("envelope: no tool_calls list"), "{err}");
        assert!(err.to_string().contains("otel: no resourceSpans"), "{err}");
    }
}
