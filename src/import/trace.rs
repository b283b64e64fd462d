//! The intermediate every importer produces.
//!
//! A [`Trace`] is a list of user [`Turn`]s; each turn holds the model's responses
//! ([`Step`]s, one per model call, in order), each response its text and its tool
//! [`Call`]s in the order the model emitted them, and each call its [`CallResult`] when
//! the source captured one. Original ids travel in `source` maps and `Call::id`, and
//! what the source did not capture is [`Content::Absent`] / `None`, never "".
//! Parsers fill it through [`super::builder::Builder`], which keeps it consistent.

use serde_json::{Map, Value};

use super::Format;
use crate::dataset::recording::Usage;
use crate::diag::parse_json_strict;

/// Text the source captured, or the fact that it did not.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// Not captured by the source (written `null` and listed in `absent`).
    Absent,
}

impl Content {
    pub fn text(&self) -> Option<&str> {
        match self {
            Content::Text(s) => Some(s),
            Content::Absent => None,
        }
    }
}

/// A call's arguments as the source sent them.
#[derive(Debug, Clone, PartialEq)]
pub enum Args {
    /// JSON arguments; `raw` is the text when the source sent them as a JSON string.
    Json { value: Value, raw: Option<String> },
    /// A string that does not parse as JSON: kept verbatim, with the parse error.
    Unparsed { raw: String, error: String },
    /// The source did not capture the arguments.
    Absent,
}

impl Args {
    /// Arguments that may arrive as a JSON-encoded string (OpenAI, OTel) or as JSON.
    pub fn from_value(value: &Value) -> Args {
        match value {
            Value::String(s) => Args::from_text(s),
            Value::Null => Args::Absent,
            other => Args::Json { value: other.clone(), raw: None },
        }
    }

    /// Parse a JSON string of arguments. An empty string is a call without arguments
    /// (`{}`): the raw text is kept, so the choice stays visible.
    pub fn from_text(text: &str) -> Args {
        if text.trim().is_empty() {
            return Args::Json { value: Value::Object(Map::new()), raw: Some(text.to_string()) };
        }
        match parse_json_strict(text) {
            Ok(value) => Args::Json { value, raw: Some(text.to_string()) },
            Err((line, column, message)) => {
                Args::Unparsed { raw: text.to_string(), error: format!("{message} at line {line} column {column}") }
            }
        }
    }
}

/// Where a value sits in the source: document index and JSON Pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ptr {
    pub doc: usize,
    pub pointer: String,
}

impl Ptr {
    pub fn new(doc: usize, pointer: impl Into<String>) -> Self {
        Ptr { doc, pointer: pointer.into() }
    }

    pub fn join(&self, tail: impl AsRef<str>) -> Ptr {
        Ptr { doc: self.doc, pointer: format!("{}{}", self.pointer, tail.as_ref()) }
    }
}

/// How a failed call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The tool ran and reported an error (`is_error`, an error status).
    Tool,
    /// The call never reached the tool: a protocol-level error (JSON-RPC `error`).
    Protocol,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Tool => "tool",
            ErrorKind::Protocol => "protocol",
        }
    }
}

/// What a call returned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallResult {
    /// `None`: a result came back but its content was not captured.
    pub result: Option<Value>,
    /// `None`: the source does not say whether it failed.
    pub is_error: Option<bool>,
    pub error_kind: Option<ErrorKind>,
    pub duration_ms: Option<u64>,
    /// Virtual time the result arrived, when the source has timestamps.
    pub t: Option<u64>,
    pub source: Map<String, Value>,
}

/// One tool call, as the model emitted it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The source's call id.
    pub id: Option<String>,
    pub name: String,
    pub args: Args,
    /// `None`: the source has no result for this call.
    pub outcome: Option<CallResult>,
    pub source: Map<String, Value>,
    pub at: Ptr,
}

impl Call {
    pub fn new(id: Option<String>, name: impl Into<String>, args: Args, at: Ptr) -> Self {
        Call { id, name: name.into(), args, outcome: None, source: Map::new(), at }
    }
}

/// One model response (one model call).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub content: Content,
    pub calls: Vec<Call>,
    pub usage: Option<Usage>,
    pub latency_ms: Option<u64>,
    /// Virtual time the response arrived, when the source has timestamps.
    pub t: Option<u64>,
    pub source: Map<String, Value>,
    pub warnings: Vec<Warning>,
    pub at: Ptr,
}

impl Step {
    pub fn new(content: Content, at: Ptr) -> Self {
        Step {
            content,
            calls: Vec::new(),
            usage: None,
            latency_ms: None,
            t: None,
            source: Map::new(),
            warnings: Vec::new(),
            at,
        }
    }
}

/// One user turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub input: Content,
    pub steps: Vec<Step>,
    pub t: Option<u64>,
    pub source: Map<String, Value>,
    pub warnings: Vec<Warning>,
}

/// Something imported but not fully: written as an `error` event of kind `import_warning`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Stable snake_case class (`result_missing`, `unsupported_part`, …).
    pub code: &'static str,
    pub message: String,
    /// `file:line:column`, when the warning concerns one place.
    pub at: Option<String>,
}

/// A tool the source declared to the model (name, description, input schema), with
/// the safety class and trust the source gave it, when it gave one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeclaredTool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Option<Value>,
    /// A fixture manifest's safety class (`read`, `write`, …), as read.
    pub safety_class: Option<String>,
    /// `trusted` or `untrusted`, as read.
    pub trust: Option<String>,
    /// Where the safety class and trust were read from (`MCP annotations readOnlyHint`).
    pub classified_by: Option<String>,
    /// The tool destroys something (a manifest's `destructive`, MCP's `destructiveHint`):
    /// its targets are sensitive and a user's request must ask for it.
    pub destructive: bool,
}

impl DeclaredTool {
    /// The safety class and trust a tool definition `d` states: its own `safety_class`
    /// / `trust` fields (a manifest's names), else MCP's `annotations` — `readOnlyHint`
    /// is `read`, `destructiveHint` is `write`, `openWorldHint` makes what the tool
    /// returns `untrusted` (it comes from outside). `destructive` (or `destructiveHint`)
    /// is read either way.
    pub fn classify(mut self, d: &Value) -> Self {
        const CLASSES: [&str; 5] = ["read", "write", "network", "financial", "privileged"];
        let own = |key: &str, allowed: &[&str]| {
            d.get(key).and_then(Value::as_str).filter(|v| allowed.contains(v)).map(str::to_string)
        };
        self.safety_class = own("safety_class", &CLASSES);
        self.trust = own("trust", &["trusted", "untrusted"]);
        self.destructive = d.get("destructive").and_then(Value::as_bool) == Some(true)
            || d.pointer("/annotations/destructiveHint").and_then(Value::as_bool) == Some(true);
        if self.safety_class.is_some() || self.trust.is_some() {
            self.classified_by = Some("the tool definition's safety_class / trust".into());
            return self;
        }
        let hint = |key: &str| d.pointer(&format!("/annotations/{key}")).and_then(Value::as_bool);
        let mut read = Vec::new();
        if hint("readOnlyHint") == Some(true) {
            self.safety_class = Some("read".into());
            read.push("readOnlyHint");
        } else if hint("destructiveHint") == Some(true) {
            self.safety_class = Some("write".into());
            read.push("destructiveHint");
        }
        if hint("openWorldHint") == Some(true) {
            self.trust = Some("untrusted".into());
            read.push("openWorldHint");
        }
        if !read.is_empty() {
            self.classified_by = Some(format!("MCP annotations {}", read.join(", ")));
        }
        self
    }
}

/// The intermediate.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub format: Format,
    /// Exactly what was read (API and form, or semantic-convention versions).
    pub reads: String,
    /// Source-wide provenance: model, conversation / trace / session ids, counts of
    /// traffic that is not part of the conversation.
    pub meta: Map<String, Value>,
    /// System / developer instructions, in order (empty when the source shows none).
    pub system: Vec<String>,
    pub tools: Vec<DeclaredTool>,
    pub warnings: Vec<Warning>,
    pub turns: Vec<Turn>,
}

impl Trace {
    /// Every call in emitted order.
    pub fn calls(&self) -> impl Iterator<Item = &Call> {
        self.turns.iter().flat_map(|t| t.steps.iter().flat_map(|s| s.calls.iter()))
    }
}

/// A string field of an object.
pub fn str_field<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

/// `{"id": id}`-style provenance maps, skipping nulls.
pub fn provenance<const N: usize>(pairs: [(&str, Option<Value>); N]) -> Map<String, Value> {
    pairs.into_iter().filter_map(|(k, v)| v.filter(|v| !v.is_null()).map(|v| (k.to_string(), v))).collect()
}

/// A non-negative integer that may be written as a string (OTLP/JSON int64).
pub fn as_u64_lenient(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_sent_as_json_strings_are_parsed_and_bad_ones_kept_raw() {
        assert_eq!(
            Args::from_value(&json!("{\"a\": 1}")),
            Args::Json { value: json!({"a": 1}), raw: Some("{\"a\": 1}".into()) }
        );
        assert_eq!(Args::from_value(&json!({"a": 1})), Args::Json { value: json!({"a": 1}), raw: None });
        assert!(matches!(Args::from_value(&json!("{\"a\": ")), Args::Unparsed { .. }));
        assert_eq!(Args::from_value(&Value::Null), Args::Absent);
        // an empty string is a call without arguments, and says so
        assert_eq!(Args::from_text(""), Args::Json { value: json!({}), raw: Some(String::new()) });
    }
}
