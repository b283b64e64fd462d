//! The trace envelope of docs/metrics.md §1, built from a run's events, for metric blocks.
//!
//! `tool_calls` are the executed calls (as everywhere in grading), `conversation.turns`
//! the model responses that carry text, `conversation.tokens.total` the summed usage,
//! and `recovery` the fault and recovery marks of [`super::recovery_input`].

use serde_json::{Value, json};

use crate::event::{Event, Kind, payload};

/// The envelope of one run; `passed` is the run's verdict, set by the runner.
pub fn envelope(events: &[Event], passed: bool) -> Value {
    let mut tool_calls = Vec::new();
    let mut turns = Vec::new();
    let mut tokens = 0u64;
    let mut final_response = Value::Null;
    for e in events {
        match e.kind {
            Kind::ToolExecuted => {
                let call: payload::ToolExecuted = e.view();
                tool_calls.push(json!({"name": call.tool.value(), "args": call.args.value()}));
            }
            Kind::ModelCalled => {
                let called: payload::ModelCalled = e.view();
                let usage: payload::Usage = called.usage.view();
                tokens += usage.input_tokens.as_u64().unwrap_or(0) + usage.output_tokens.as_u64().unwrap_or(0);
                let response: payload::Response = called.response.view();
                if let Some(text) = response.content.as_str().filter(|t| !t.is_empty()) {
                    turns.push(json!({"role": "assistant", "content": text}));
                }
            }
            Kind::TurnCompleted => final_response = e.view::<payload::TurnCompleted>().response.value(),
            _ => {}
        }
    }
    let recovery = super::recovery_input(events).get("recovery").cloned().unwrap_or(Value::Null);
    json!({
        "tool_calls": tool_calls,
        "conversation": {"turns": turns, "tokens": {"total": tokens}},
        "final_response": final_response,
        "passed": passed,
        "recovery": recovery,
    })
}
