//! The intermediate every importer produces, and the builder that keeps it consistent.
//!
//! A [`Trace`] is a list of user [`Turn`]s; each turn holds the model's responses
//! ([`Step`]s, one per model call, in order), each response its text and its tool
//! [`Call`]s in the order the model emitted them, and each call its [`Outcome`] when
//! the source captured one. Original ids travel in `source` maps and `Call::id`, and
//! what the source did not capture is [`Content::Absent`] / `None`, never "".
//!
//! Parsers only say what they read; the [`Builder`] decides what that means: it opens
//! turns, attributes results to calls by id, and refuses what cannot be attributed
//! (a result without its call, a duplicate call id or result) with an error at the
//! offending value. When the parse is done, [`Builder::finish`] adds the warnings that
//! only the whole trace reveals (calls without results, turns without an answer).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::Format;
use super::source::Source;
use crate::diag::{InputError, parse_json_strict};

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
pub struct Outcome {
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
    pub outcome: Option<Outcome>,
    pub source: Map<String, Value>,
    pub at: Ptr,
}

impl Call {
    pub fn new(id: Option<String>, name: impl Into<String>, args: Args, at: Ptr) -> Self {
        Call { id, name: name.into(), args, outcome: None, source: Map::new(), at }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
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

/// A tool the source declared to the model (name, description, input schema).
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredTool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Option<Value>,
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

/// Builds a [`Trace`] while a parser reads its source.
pub struct Builder<'s, 'a> {
    src: &'s Source<'a>,
    trace: Trace,
    /// Source call id → (turn, step, call) and its place.
    calls: BTreeMap<String, ((usize, usize, usize), String)>,
    /// Source call id → place of its result.
    results: BTreeMap<String, String>,
}

impl<'s, 'a> Builder<'s, 'a> {
    pub fn new(src: &'s Source<'a>, format: Format, reads: impl Into<String>) -> Self {
        Builder {
            src,
            trace: Trace {
                format,
                reads: reads.into(),
                meta: Map::new(),
                system: Vec::new(),
                tools: Vec::new(),
                warnings: Vec::new(),
                turns: Vec::new(),
            },
            calls: BTreeMap::new(),
            results: BTreeMap::new(),
        }
    }

    pub fn src(&self) -> &'s Source<'a> {
        self.src
    }

    /// An error at `at`.
    pub fn error(&self, at: &Ptr, message: impl Into<String>) -> InputError {
        self.src.error(at.doc, &at.pointer, message)
    }

    /// A warning about the value at `at`.
    pub fn warning(&self, code: &'static str, at: &Ptr, message: impl Into<String>) -> Warning {
        Warning { code, message: message.into(), at: Some(self.src.at(at.doc, &at.pointer)) }
    }

    pub fn meta(&mut self, key: &str, value: impl Into<Value>) {
        let value = value.into();
        if !value.is_null() {
            self.trace.meta.insert(key.to_string(), value);
        }
    }

    /// Count one message of some kind that is not part of the conversation.
    pub fn count_other(&mut self, what: &str) {
        let other = self.trace.meta.entry("other_messages").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(map) = other {
            let n = map.get(what).and_then(Value::as_u64).unwrap_or(0);
            map.insert(what.to_string(), Value::from(n + 1));
        }
    }

    pub fn system(&mut self, text: String) {
        self.trace.system.push(text);
    }

    pub fn has_system(&self, text: &str) -> bool {
        self.trace.system.iter().any(|s| s == text)
    }

    /// Say what was read, once the parser knows (OTel: which forms the file used).
    pub fn set_reads(&mut self, reads: String) {
        self.trace.reads = reads;
    }

    /// The source id of the first call named `name`, in emitted order, that has no
    /// result yet and is not `taken`: for outcomes that name their tool but not its call.
    pub fn unresolved_call_named(&self, name: &str, taken: impl Fn(&str) -> bool) -> Option<String> {
        self.trace
            .calls()
            .filter(|c| c.name == name && c.outcome.is_none())
            .filter_map(|c| c.id.clone())
            .find(|id| !self.results.contains_key(id) && !taken(id))
    }

    /// Declare a tool; a name declared twice keeps its first declaration.
    pub fn tool(&mut self, tool: DeclaredTool) {
        if !self.trace.tools.iter().any(|t| t.name == tool.name) {
            self.trace.tools.push(tool);
        }
    }

    /// A warning about the trace as a whole (written before the first turn).
    pub fn warn_trace(&mut self, warning: Warning) {
        self.trace.warnings.push(warning);
    }

    /// A warning at the current position: after the current response, else the current
    /// turn's start, else the trace.
    pub fn warn(&mut self, warning: Warning) {
        match self.trace.turns.last_mut() {
            Some(turn) => match turn.steps.last_mut() {
                Some(step) => step.warnings.push(warning),
                None => turn.warnings.push(warning),
            },
            None => self.trace.warnings.push(warning),
        }
    }

    /// A user message. It opens a turn, unless the current turn has no model response
    /// yet: then the model saw both messages in one request, and they are one turn's
    /// input (joined by a blank line, with a warning).
    pub fn user(&mut self, input: Content, source: Map<String, Value>, t: Option<u64>, at: &Ptr) {
        if let Some(turn) = self.trace.turns.last_mut()
            && turn.steps.is_empty()
        {
            let merged = match (&turn.input, &input) {
                (Content::Text(a), Content::Text(b)) => Content::Text(format!("{a}\n\n{b}")),
                _ => Content::Absent,
            };
            turn.input = merged;
            let ids = turn.source.entry("merged").or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = ids {
                list.push(Value::Object(source));
            }
            let n = self.trace.turns.len() - 1;
            let w = self.warning(
                "user_messages_merged",
                at,
                format!("consecutive user messages without a model response between them are one turn (turn {n})"),
            );
            self.warn(w);
            return;
        }
        self.trace.turns.push(Turn { input, steps: Vec::new(), t, source, warnings: Vec::new() });
    }

    /// Does the current turn exist and have no response yet?
    pub fn turn_is_open(&self) -> bool {
        self.trace.turns.last().is_some_and(|t| t.steps.is_empty())
    }

    /// A model response. Refuses a call id already used; opens a turn with an absent
    /// input when the source shows no user message before it.
    pub fn step(&mut self, mut step: Step) -> Result<(), InputError> {
        for (j, call) in step.calls.iter().enumerate() {
            let Some(id) = &call.id else { continue };
            if let Some((_, first)) = self.calls.get(id) {
                return Err(self.error(&call.at, format!("duplicate tool call id \"{id}\" (first used at {first})")));
            }
            if step.calls[..j].iter().any(|c| c.id.as_ref() == Some(id)) {
                return Err(self.error(&call.at, format!("duplicate tool call id \"{id}\" in one response")));
            }
        }
        let unparsed: Vec<Warning> = step
            .calls
            .iter()
            .filter_map(|call| match &call.args {
                Args::Unparsed { error, .. } => Some(self.warning(
                    "arguments_unparsed",
                    &call.at,
                    format!("arguments of {} are not JSON ({error}): kept as the raw text", call.name),
                )),
                _ => None,
            })
            .collect();
        step.warnings.extend(unparsed);
        if self.trace.turns.is_empty() {
            self.trace.turns.push(Turn {
                input: Content::Absent,
                steps: Vec::new(),
                t: step.t,
                source: Map::new(),
                warnings: vec![self.warning(
                    "input_absent",
                    &step.at,
                    "the source has no user message before this model response: turn 0's input is marked absent",
                )],
            });
        }
        let turn_index = self.trace.turns.len() - 1;
        let turn = &mut self.trace.turns[turn_index];
        let step_index = turn.steps.len();
        for (j, call) in step.calls.iter().enumerate() {
            if let Some(id) = &call.id {
                let at = self.src.at(call.at.doc, &call.at.pointer);
                self.calls.insert(id.clone(), ((turn_index, step_index, j), at));
            }
        }
        turn.steps.push(step);
        Ok(())
    }

    pub fn has_call(&self, id: &str) -> bool {
        self.calls.contains_key(id)
    }

    pub fn has_result(&self, id: &str) -> bool {
        self.results.contains_key(id)
    }

    /// The call with source id `id`.
    pub fn call_mut(&mut self, id: &str) -> Option<&mut Call> {
        let ((t, s, c), _) = self.calls.get(id)?;
        self.trace.turns.get_mut(*t)?.steps.get_mut(*s)?.calls.get_mut(*c)
    }

    /// The result of call `id`. A result for a call the source never showed, or a
    /// second result for one call, is an error: it could not be attributed.
    pub fn result(&mut self, id: &str, outcome: Outcome, at: &Ptr) -> Result<(), InputError> {
        if let Some(first) = self.results.get(id) {
            return Err(self.error(at, format!("duplicate result for tool call \"{id}\" (first result at {first})")));
        }
        if !self.calls.contains_key(id) {
            return Err(self.error(
                at,
                format!("tool result for call id \"{id}\" has no tool call before it (it cannot be attributed)"),
            ));
        }
        self.results.insert(id.to_string(), self.src.at(at.doc, &at.pointer));
        if let Some(call) = self.call_mut(id) {
            call.outcome = Some(outcome);
        }
        Ok(())
    }

    /// Check the whole trace and return it: warnings for calls without results, turns
    /// without a final answer, answers followed by more responses in the same turn.
    pub fn finish(mut self) -> Result<Trace, InputError> {
        if self.trace.turns.is_empty() {
            return Err(self.src.error(0, "", "no user message, model response or tool call found: nothing to import"));
        }
        for (i, turn) in self.trace.turns.iter_mut().enumerate() {
            let last = turn.steps.len().saturating_sub(1);
            for (s, step) in turn.steps.iter_mut().enumerate() {
                for call in &step.calls {
                    if call.outcome.is_none() {
                        let id = call.id.as_deref().map(|id| format!(" \"{id}\"")).unwrap_or_default();
                        step.warnings.push(Warning {
                            code: "result_missing",
                            message: format!(
                                "tool call{id} ({}) has no result in the source: its result is marked absent",
                                call.name
                            ),
                            at: Some(self.src.at(call.at.doc, &call.at.pointer)),
                        });
                    }
                }
                if s < last && step.calls.is_empty() {
                    step.warnings.push(Warning {
                        code: "answer_mid_turn",
                        message: format!(
                            "turn {i}: the model answered without tool calls and was called again before the next \
                             user message; a replay ends the turn at this answer"
                        ),
                        at: Some(self.src.at(step.at.doc, &step.at.pointer)),
                    });
                }
            }
            let unanswered = turn.steps.last().is_none_or(|s| !s.calls.is_empty());
            if unanswered {
                let message = if turn.steps.is_empty() {
                    format!("turn {i} has no model response in the source")
                } else {
                    format!("turn {i} ends without a model answer (its last response calls tools)")
                };
                let warning = Warning { code: "turn_unanswered", message, at: None };
                match turn.steps.last_mut() {
                    Some(step) => step.warnings.push(warning),
                    None => turn.warnings.push(warning),
                }
            }
        }
        Ok(self.trace)
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
