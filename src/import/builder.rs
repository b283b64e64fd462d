//! The builder parsers fill a [`Trace`] through, which keeps it consistent.
//!
//! Parsers only say what they read; the builder decides what that means: it opens
//! turns, attributes results to calls by id, and refuses what cannot be attributed
//! (a result without its call, a duplicate call id or result) with an error at the
//! offending value. When the parse is done, [`Builder::finish`] adds the warnings that
//! only the whole trace reveals (calls without results, turns without an answer).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::Format;
use super::source::Source;
use super::trace::{Args, Call, CallResult, Content, DeclaredTool, Ptr, Step, Trace, Turn, Warning};
use crate::diag::InputError;

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

    /// System instructions that may grow from call to call (a span's instructions
    /// repeat the earlier ones and add to them): a text that extends the last one
    /// replaces it, any other text is added.
    pub fn system_grown(&mut self, text: String) {
        match self.trace.system.last_mut() {
            Some(last) if text.starts_with(last.as_str()) => *last = text,
            _ => self.trace.system.push(text),
        }
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
    pub fn result(&mut self, id: &str, outcome: CallResult, at: &Ptr) -> Result<(), InputError> {
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
