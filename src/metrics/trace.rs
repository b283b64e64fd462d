//! Lenient reading of the trace envelope (docs/metrics.md §1, §9).
//!
//! ```json
//! {"tool_calls": [{"name": "search", "server": "docs", "args": {"q": "a"}}],
//!  "conversation": {"tokens": {"total": 3000},
//!                   "turns": [{"role": "assistant", "content": "..."}]}}
//! ```
//!
//! Recorded data is read conservatively, never as an error: absent tool calls are none,
//! absent tokens are 0, missing args are `{}`. Also accepted: `trace.tool_calls` and
//! `trace.conversation` (the envelope nested under `trace`), `arguments` as an alias of
//! `args` (a JSON-encoded string, as OpenAI sends it, is decoded when it holds an object),
//! a bare string as a call with that name, and turn `content` as an array of
//! `{"type": "text", "text": …}` blocks whose text is concatenated. An entry that is
//! neither an object nor a string is not a call and is skipped; every call keeps its
//! position in the input array ([`TracedCall::index`]) so reports point at the right entry.

use std::cell::OnceCell;

use serde_json::{Map, Value};

use crate::canon::to_canonical;

/// One recorded tool call.
#[derive(Debug, Clone)]
pub struct TracedCall {
    /// Position in the input `tool_calls` array.
    pub index: usize,
    /// The recorded name, wire prefix included (`docs__search`).
    pub name: String,
    pub server: Option<String>,
    /// The arguments; `{}` when absent.
    pub args: Value,
    /// The args' canonical text, computed the first time a metric asks: only stability
    /// keys calls on it, so trajectory and golden path never pay for it.
    canonical: OnceCell<String>,
}

impl PartialEq for TracedCall {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index && self.name == other.name && self.server == other.server && self.args == other.args
    }
}

impl TracedCall {
    /// A call named `name` with `args`.
    pub fn new(index: usize, name: impl Into<String>, server: Option<String>, args: Value) -> Self {
        TracedCall { index, name: name.into(), server, args, canonical: OnceCell::new() }
    }

    /// A call known only by its args' canonical text, for a reader that canonicalised them
    /// while parsing and a metric that reads nothing else of them (stability keys calls
    /// on it): `args` is left `null`.
    pub(crate) fn with_canonical_args(index: usize, name: String, server: Option<String>, canonical: String) -> Self {
        TracedCall { index, name, server, args: Value::Null, canonical: OnceCell::from(canonical) }
    }

    /// The args' RFC 8785 canonical text, so `{a,b}` and `{b,a}` key the same.
    pub fn canonical_args(&self) -> &str {
        self.canonical.get_or_init(|| canonical_args(&self.args))
    }

    /// The name with any `<server>__` wire prefix removed (the part after the first `__`).
    pub fn bare_name(&self) -> &str {
        bare_name(&self.name)
    }

    /// Does an expectation's `name` designate this call? Either the bare name or the
    /// full recorded name (so an expectation may pin the server by writing the wire name).
    pub fn is_named(&self, expected: &str) -> bool {
        self.bare_name() == expected || self.name == expected
    }
}

/// `name` without its `<server>__` wire prefix.
pub fn bare_name(name: &str) -> &str {
    name.split_once("__").map_or(name, |(_, rest)| rest)
}

/// The canonical text of `args`. Integers beyond ±(2^53−1) cannot be canonicalised (I-JSON
/// guard); such args fall back to serde_json's own text, which is still deterministic.
pub fn canonical_args(args: &Value) -> String {
    match to_canonical(args) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => args.to_string(),
    }
}

/// Everything the metrics read from one trace envelope.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetricTrace {
    pub tool_calls: Vec<TracedCall>,
    /// Text of each assistant turn that has any, in order.
    pub assistant_turns: Vec<String>,
    /// `conversation.tokens.total`; 0 when absent or not a non-negative number.
    pub total_tokens: f64,
}

impl MetricTrace {
    /// Read a trace envelope leniently.
    pub fn read(envelope: &Value) -> MetricTrace {
        let (assistant_turns, total_tokens) = conversation_parts(envelope);
        MetricTrace { tool_calls: read_tool_calls(envelope), assistant_turns, total_tokens }
    }

    /// [`MetricTrace::read`] of an envelope the caller no longer needs: the calls' arguments are
    /// moved out of it rather than copied (the batch CLI reads 200 calls a line).
    pub fn take(envelope: &mut Value) -> MetricTrace {
        let (assistant_turns, total_tokens) = conversation_parts(envelope);
        MetricTrace { tool_calls: take_tool_calls(envelope), assistant_turns, total_tokens }
    }

    /// The last assistant turn with text: the final answer the narrative is read from.
    pub fn final_answer(&self) -> Option<&str> {
        self.assistant_turns.last().map(String::as_str)
    }
}

/// The assistant turns' texts and the total tokens of an envelope.
fn conversation_parts(envelope: &Value) -> (Vec<String>, f64) {
    let conversation = field(envelope, "conversation");
    let total_tokens = conversation
        .and_then(|c| c.get("tokens"))
        .and_then(|t| t.get("total"))
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t > 0.0)
        .unwrap_or(0.0);
    let assistant_turns = conversation
        .and_then(|c| c.get("turns"))
        .and_then(Value::as_array)
        .map(|turns| {
            turns
                .iter()
                .filter(|t| t.get("role").and_then(Value::as_str) == Some("assistant"))
                .map(|t| t.get("content").map(content_text).unwrap_or_default())
                .filter(|text| !text.is_empty())
                .collect()
        })
        .unwrap_or_default();
    (assistant_turns, total_tokens)
}

/// `envelope.key`, or `envelope.trace.key` when the envelope is nested under `trace`.
fn field<'a>(envelope: &'a Value, key: &str) -> Option<&'a Value> {
    envelope.get(key).or_else(|| envelope.get("trace").and_then(|t| t.get(key)))
}

/// The tool calls of an envelope (`tool_calls` or `trace.tool_calls`).
pub fn read_tool_calls(envelope: &Value) -> Vec<TracedCall> {
    field(envelope, "tool_calls").map(read_call_list).unwrap_or_default()
}

/// Read a `tool_calls` array; anything else is no calls.
pub fn read_call_list(calls: &Value) -> Vec<TracedCall> {
    let Some(items) = calls.as_array() else {
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(index, item)| match item {
            Value::String(name) => Some(TracedCall::new(index, name.clone(), None, empty_args())),
            Value::Object(call) => Some(read_call(index, call)),
            _ => None,
        })
        .collect()
}

fn read_call(index: usize, call: &Map<String, Value>) -> TracedCall {
    let args = call.get("args").or_else(|| call.get("arguments")).cloned();
    build_call(index, call, args)
}

/// [`read_tool_calls`] of an envelope the caller no longer needs: each call's arguments
/// are moved out of the envelope (left `null` there) instead of copied.
pub fn take_tool_calls(envelope: &mut Value) -> Vec<TracedCall> {
    let calls = if envelope.get("tool_calls").is_some() {
        envelope.get_mut("tool_calls")
    } else {
        envelope.get_mut("trace").and_then(|t| t.get_mut("tool_calls"))
    };
    let Some(Value::Array(items)) = calls else {
        return Vec::new();
    };
    items
        .iter_mut()
        .enumerate()
        .filter_map(|(index, item)| match item {
            Value::String(name) => Some(TracedCall::new(index, std::mem::take(name), None, empty_args())),
            Value::Object(call) => {
                let key = if call.contains_key("args") { "args" } else { "arguments" };
                let args = call.get_mut(key).map(Value::take);
                Some(build_call(index, call, args))
            }
            _ => None,
        })
        .collect()
}

/// A call from its object and its (already read) `args`/`arguments` value.
fn build_call(index: usize, call: &Map<String, Value>, args: Option<Value>) -> TracedCall {
    let name = call.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let server = call.get("server").and_then(Value::as_str).map(str::to_string);
    TracedCall::new(index, name, server, recorded_args(args))
}

/// A call's recorded `args`/`arguments` value as the metrics read it: absent or `null` is
/// `{}`, a string holding a JSON object is that object, anything else is kept.
pub(crate) fn recorded_args(args: Option<Value>) -> Value {
    match args {
        None | Some(Value::Null) => empty_args(),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(decoded @ Value::Object(_)) => decoded,
            _ => Value::String(text),
        },
        Some(other) => other,
    }
}

fn empty_args() -> Value {
    Value::Object(Map::new())
}

/// A turn's text: a string, or the concatenated `text` of its text blocks.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| match block {
                Value::String(s) => Some(s.as_str()),
                Value::Object(b) => {
                    let is_text = b.get("type").is_none_or(|t| t.as_str() == Some("text"));
                    if is_text { b.get("text").and_then(Value::as_str) } else { None }
                }
                _ => None,
            })
            .collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn taking_a_trace_reads_the_same_as_reading_it() {
        let envelopes = [
            json!({"tool_calls": [1, "search", {"name": "a", "arguments": "{\"b\":2}"}, {"name": "c", "args": null, "arguments": {"x": 1}}, {"name": "d", "arguments": {"y": [1]}}],
                   "conversation": {"tokens": {"total": 10}, "turns": [{"role": "assistant", "content": "hi"}]}}),
            json!({"trace": {"tool_calls": [{"name": "srv__e", "server": "srv", "args": {"z": 1}}]}}),
            json!({"tool_calls": "not a list"}),
        ];
        for envelope in envelopes {
            let read = MetricTrace::read(&envelope);
            let mut owned = envelope.clone();
            assert_eq!(MetricTrace::take(&mut owned), read, "{envelope}");
        }
    }

    #[test]
    fn an_empty_envelope_has_no_calls_no_turns_and_no_tokens() {
        assert_eq!(MetricTrace::read(&json!({})), MetricTrace::default());
        assert_eq!(MetricTrace::read(&json!("not an envelope")), MetricTrace::default());
    }

    #[test]
    fn calls_nested_under_trace_and_the_arguments_alias_are_read() {
        let t = MetricTrace::read(&json!({"trace": {"tool_calls": [{"name": "a", "arguments": {"x": 1}}]}}));
        assert_eq!(t.tool_calls.len(), 1);
        assert_eq!(t.tool_calls[0].args, json!({"x": 1}));
    }

    #[test]
    fn an_openai_style_arguments_string_is_decoded_when_it_holds_an_object() {
        let calls =
            read_call_list(&json!([{"name": "a", "arguments": "{\"b\":2,\"a\":1}"}, {"name": "c", "args": "raw"}]));
        assert_eq!(calls[0].canonical_args(), r#"{"a":1,"b":2}"#);
        assert_eq!(calls[1].args, json!("raw"));
    }

    #[test]
    fn missing_args_read_as_an_empty_object_and_key_order_never_matters() {
        let calls = read_call_list(
            &json!([{"name": "a"}, {"name": "a", "args": {}}, {"name": "b", "args": {"y": 1, "x": 2}}, {"name": "b", "args": {"x": 2, "y": 1}}]),
        );
        assert_eq!(calls[0].canonical_args(), calls[1].canonical_args());
        assert_eq!(calls[2].canonical_args(), calls[3].canonical_args());
    }

    #[test]
    fn entries_that_are_not_calls_are_skipped_but_indices_keep_their_place() {
        let calls = read_call_list(&json!([1, "search", null, {"name": "open"}]));
        assert_eq!(calls.iter().map(|c| (c.index, c.name.as_str())).collect::<Vec<_>>(), [(1, "search"), (3, "open")]);
    }

    #[test]
    fn text_blocks_are_concatenated_and_other_blocks_ignored() {
        let t = MetricTrace::read(&json!({"conversation": {"turns": [
            {"role": "assistant", "content": [{"type": "text", "text": "ab"}, {"type": "tool_use", "name": "x"}, {"type": "text", "text": "cd"}]},
            {"role": "user", "content": "ignored"},
            {"role": "assistant", "content": [{"type": "tool_use"}]}
        ]}}));
        assert_eq!(t.assistant_turns, ["abcd"]);
    }

    #[test]
    fn the_wire_prefix_is_everything_up_to_the_first_double_underscore() {
        assert_eq!(bare_name("docs__search"), "search");
        assert_eq!(bare_name("a__b__c"), "b__c");
        assert_eq!(bare_name("search"), "search");
    }

    #[test]
    fn tokens_are_read_from_conversation_and_negative_totals_are_zero() {
        assert_eq!(MetricTrace::read(&json!({"conversation": {"tokens": {"total": 3000}}})).total_tokens, 3000.0);
        assert_eq!(MetricTrace::read(&json!({"conversation": {"tokens": {"total": -5}}})).total_tokens, 0.0);
    }
}
