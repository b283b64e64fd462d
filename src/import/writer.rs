//! The intermediate → a canonical, hash-chained event log, through the one log writer.
//!
//! The log has the shape of a run's log where the source allows it:
//!
//! ```text
//! run_started                       imported: {format, reads, file, digest}, source, system, declared_tools
//! [error import_warning]…           about the trace as a whole
//! turn_started {turn, input}        per user turn
//!   model_called {response, usage}  per model response, tool calls in emitted order
//!   tool_executed…                  one per call, in the order the model emitted them
//!   [error import_warning]…         about this response or turn
//! turn_completed {turn, response}   when the turn ended with an answer
//! run_completed {status: "imported"}
//! ```
//!
//! Policy, approval and context events are not written: the source does not show
//! them. Every event that carries a source id has it under `source`; every field the
//! source did not capture is `null` and listed in `absent` (JSON Pointers into `data`).
//! Virtual time `t` comes from the source's timestamps (ms since its first) when it has
//! them, else from recorded latencies; it never decreases.

use serde_json::{Value, json};

use super::trace::{Args, Call, Content, Step, Trace, Warning};
use crate::canon::{Context, digest};
use crate::dataset::recording::Usage;
use crate::event::writer::{LogWriter, WriteError};
use crate::event::{Event, Kind};

/// `run_completed.status` of an imported log: what the source run did is not known.
pub const IMPORTED_STATUS: &str = "imported";

/// `error.kind` of an import warning.
pub const WARNING_KIND: &str = "import_warning";

/// Write `trace` (read from `file`, whose bytes are `bytes`) as an event log for case
/// `case`. Returns the log's bytes and its events.
pub fn write(trace: &Trace, case: &str, file: &str, bytes: &[u8]) -> Result<(Vec<u8>, Vec<Event>), WriteError> {
    let mut w = Writer { log: LogWriter::new(Vec::new()), events: Vec::new(), clock: 0 };
    let tools: Vec<Value> = trace
        .tools
        .iter()
        .map(|t| {
            let mut tool = json!({"name": t.name, "description": t.description, "input_schema": t.input_schema});
            // only what the source stated: a log of a source that states none is unchanged
            for (key, value) in
                [("safety_class", &t.safety_class), ("trust", &t.trust), ("classified_by", &t.classified_by)]
            {
                if let Some(v) = value {
                    tool[key] = json!(v);
                }
            }
            if t.destructive {
                tool["destructive"] = json!(true);
            }
            tool
        })
        .collect();
    w.emit(
        None,
        None,
        Kind::RunStarted,
        json!({
            "case": case,
            "run": 0,
            "agent": null,
            "imported": {
                "format": trace.format.as_str(),
                "reads": trace.reads,
                "file": file,
                "digest": digest(Context::Content, bytes).to_string(),
            },
            "source": trace.meta,
            "system": trace.system,
            "declared_tools": tools,
            "sandbox": {},
        }),
    )?;
    w.warnings(None, &trace.warnings)?;
    let mut position = 0usize;
    let mut tokens = 0u64;
    for (i, turn) in trace.turns.iter().enumerate() {
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        let mut data = json!({"turn": index, "input": turn.input.text(), "source": turn.source});
        absent(&mut data, &[("/input", turn.input == Content::Absent)]);
        w.emit(Some(index), turn.t, Kind::TurnStarted, data)?;
        w.warnings(Some(index), &turn.warnings)?;
        for (s, step) in turn.steps.iter().enumerate() {
            tokens += step.usage.map_or(0, |u| u.input_tokens + u.output_tokens);
            w.step(index, s, position, step)?;
            position += 1;
        }
        if let Some(last) = turn.steps.last().filter(|s| s.calls.is_empty()) {
            let mut data = json!({"turn": index, "response": last.content.text()});
            absent(&mut data, &[("/response", last.content == Content::Absent)]);
            w.emit(Some(index), None, Kind::TurnCompleted, data)?;
        }
        w.log.flush()?;
    }
    w.emit(
        None,
        None,
        Kind::RunCompleted,
        json!({"status": IMPORTED_STATUS, "turns": trace.turns.len(), "tokens": tokens}),
    )?;
    let (bytes, _) = w.log.finish()?;
    Ok((bytes, w.events))
}

/// The log's call id of call `j` of response `s` in turn `turn`: the source's id, or
/// the runtime's own scheme when the source has none.
pub fn call_id(call: &Call, turn: u32, s: usize, j: usize) -> String {
    call.id.clone().unwrap_or_else(|| format!("call-{turn}-{s}-{j}"))
}

struct Writer {
    log: LogWriter<Vec<u8>>,
    events: Vec<Event>,
    clock: u64,
}

impl Writer {
    /// Append at the source's time `at` when known (never going back), else now.
    fn emit(&mut self, turn: Option<u32>, at: Option<u64>, kind: Kind, data: Value) -> Result<(), WriteError> {
        if let Some(at) = at {
            self.clock = self.clock.max(at);
        }
        let event = self.log.append(turn, self.clock, kind, data)?;
        self.events.push(event);
        Ok(())
    }

    fn warnings(&mut self, turn: Option<u32>, warnings: &[Warning]) -> Result<(), WriteError> {
        for w in warnings {
            self.emit(
                turn,
                None,
                Kind::Error,
                json!({"kind": WARNING_KIND, "code": w.code, "message": w.message, "at": w.at}),
            )?;
        }
        Ok(())
    }

    fn step(&mut self, turn: u32, s: usize, position: usize, step: &Step) -> Result<(), WriteError> {
        if step.t.is_none() {
            self.clock += step.latency_ms.unwrap_or(0);
        }
        let calls: Vec<Value> = step
            .calls
            .iter()
            .enumerate()
            .map(|(j, c)| json!({"id": call_id(c, turn, s, j), "name": c.name, "args": args_value(&c.args)}))
            .collect();
        let usage = step.usage.map(|Usage { input_tokens, output_tokens }| {
            json!({"input_tokens": input_tokens, "output_tokens": output_tokens})
        });
        let mut data = json!({
            "request_hash": null,
            "position": position,
            "response": {"content": step.content.text(), "tool_calls": calls},
            "usage": usage,
            "latency_ms": step.latency_ms,
            "source": step.source,
        });
        absent(
            &mut data,
            &[
                ("/response/content", step.content == Content::Absent),
                ("/usage", step.usage.is_none()),
                ("/latency_ms", step.latency_ms.is_none()),
            ],
        );
        self.emit(Some(turn), step.t, Kind::ModelCalled, data)?;
        for (j, call) in step.calls.iter().enumerate() {
            self.call(turn, call_id(call, turn, s, j), call)?;
        }
        self.warnings(Some(turn), &step.warnings)
    }

    fn call(&mut self, turn: u32, id: String, call: &Call) -> Result<(), WriteError> {
        let outcome = call.outcome.as_ref();
        let mut source = call.source.clone();
        source.insert("call_id".into(), call.id.clone().map_or(Value::Null, Value::String));
        if let Some(o) = outcome {
            source.extend(o.source.clone());
        }
        let result = outcome.and_then(|o| o.result.clone());
        let is_error = outcome.and_then(|o| o.is_error);
        let duration = outcome.and_then(|o| o.duration_ms);
        let mut data = json!({
            "call_id": id,
            "tool": call.name,
            "args": args_value(&call.args),
            "result": result,
            "is_error": is_error,
            "fault": null,
            "duration_ms": duration,
            "deduplicated": false,
            "effect": null,
            "source": source,
        });
        match &call.args {
            Args::Json { raw: Some(raw), .. } => data["args_raw"] = json!(raw),
            Args::Unparsed { raw, error } => {
                data["args_raw"] = json!(raw);
                data["args_error"] = json!(error);
            }
            _ => {}
        }
        if let Some(kind) = outcome.and_then(|o| o.error_kind).filter(|_| is_error == Some(true)) {
            data["error_kind"] = json!(kind.as_str());
        }
        absent(
            &mut data,
            &[
                ("/args", call.args == Args::Absent),
                ("/result", outcome.is_none_or(|o| o.result.is_none())),
                ("/is_error", is_error.is_none()),
                ("/duration_ms", duration.is_none()),
            ],
        );
        self.emit(Some(turn), outcome.and_then(|o| o.t), Kind::ToolExecuted, data)
    }
}

/// What `args` holds in events: the parsed JSON, the raw text when it did not parse,
/// or null when not captured.
pub fn args_value(args: &Args) -> Value {
    match args {
        Args::Json { value, .. } => value.clone(),
        Args::Unparsed { raw, .. } => Value::String(raw.clone()),
        Args::Absent => Value::Null,
    }
}

/// Add `"absent": [pointers]` for the fields that were not captured (none: no key).
fn absent(data: &mut Value, fields: &[(&str, bool)]) {
    let list: Vec<Value> = fields.iter().filter(|(_, a)| *a).map(|(p, _)| Value::from(*p)).collect();
    if !list.is_empty()
        && let Value::Object(map) = data
    {
        map.insert("absent".into(), Value::Array(list));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::verify::verify_bytes;
    use crate::import::builder::Builder;
    use crate::import::trace::{CallResult, Ptr};
    use crate::import::{Format, Source};
    use serde_json::Map;
    use std::path::Path;

    #[test]
    fn an_imported_trace_is_a_log_that_verifies_with_calls_in_emitted_order() {
        let src = Source::parse(Path::new("t.json"), "{}").unwrap();
        let mut b = Builder::new(&src, Format::OpenAi, "test");
        b.user(Content::Text("pay bob".into()), Map::new(), None, &Ptr::default());
        let mut step = Step::new(Content::Text(String::new()), Ptr::default());
        step.calls.push(Call::new(Some("b".into()), "second_name_first", Args::from_text("{\"x\":1}"), Ptr::default()));
        step.calls.push(Call::new(Some("a".into()), "then_this", Args::from_text("{oops"), Ptr::default()));
        b.step(step).unwrap();
        b.result(
            "a",
            CallResult { result: Some(json!("ok")), is_error: Some(false), ..CallResult::default() },
            &Ptr::default(),
        )
        .unwrap();
        let trace = b.finish().unwrap();
        let (bytes, events) = write(&trace, "c", "t.json", b"{}").unwrap();
        let verified = verify_bytes(&bytes).unwrap();
        assert_eq!(verified.events, events);
        let executed: Vec<&Event> = events.iter().filter(|e| e.kind == Kind::ToolExecuted).collect();
        assert_eq!(
            executed.iter().map(|e| e.str("tool").unwrap()).collect::<Vec<_>>(),
            ["second_name_first", "then_this"]
        );
        // the first call's result was never captured: null, marked absent, and warned about
        assert_eq!(executed[0].get("result"), Value::Null);
        assert!(executed[0].data.tree()["absent"].as_array().is_some_and(|a| a.contains(&json!("/result"))));
        assert_eq!(executed[1].get("args"), json!("{oops"));
        assert!(executed[1].str("args_error").is_some());
        let warnings: Vec<&str> =
            events.iter().filter(|e| e.str("kind") == Some(WARNING_KIND)).filter_map(|e| e.str("code")).collect();
        assert_eq!(warnings, ["arguments_unparsed", "result_missing", "turn_unanswered"]);
    }
}
