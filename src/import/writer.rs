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

use serde_json::Value;

use super::trace::{Args, Call, Content, Ptr, Step, Trace, Warning};
use crate::canon::{Context, digest};
use crate::dataset::recording::Usage;
use crate::event::Event;
use crate::event::payload::{Out, Written, write};
use crate::event::writer::{LogWriter, WriteError};

/// `run_completed.status` of an imported log: what the source run did is not known.
pub const IMPORTED_STATUS: &str = "imported";

/// `error.kind` of an import warning.
pub const WARNING_KIND: &str = "import_warning";

/// An event the trace cannot be written as (an integer past ±(2^53−1), say), with the
/// place in the source of the response it came from when it came from one.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Unwritable {
    pub error: WriteError,
    pub at: Option<Ptr>,
}

impl From<WriteError> for Unwritable {
    fn from(error: WriteError) -> Self {
        Unwritable { error, at: None }
    }
}

impl From<std::io::Error> for Unwritable {
    fn from(error: std::io::Error) -> Self {
        WriteError::from(error).into()
    }
}

/// Write `trace` (read from `file`, whose bytes are `bytes`) as an event log for case
/// `case`. Returns the log's bytes and its events.
pub fn write(trace: &Trace, case: &str, file: &str, bytes: &[u8]) -> Result<(Vec<u8>, Vec<Event>), Unwritable> {
    let mut w = Writer { log: LogWriter::new(Vec::new()), events: Vec::new(), clock: 0 };
    let tools: Vec<write::DeclaredTool> = trace
        .tools
        .iter()
        .map(|t| write::DeclaredTool {
            name: (&t.name).into(),
            description: t.description.as_ref().into(),
            input_schema: t.input_schema.as_ref().into(),
            // only what the source stated: a log of a source that states none is unchanged
            safety_class: t.safety_class.as_ref().map_or(Out::Absent, Out::from),
            trust: t.trust.as_ref().map_or(Out::Absent, Out::from),
            classified_by: t.classified_by.as_ref().map_or(Out::Absent, Out::from),
            destructive: if t.destructive { true.into() } else { Out::Absent },
        })
        .collect();
    let digest = digest(Context::Content, bytes);
    w.emit(
        None,
        None,
        &write::RunStarted {
            case: case.into(),
            run: 0u64.into(),
            agent: Out::Null,
            dataset_line: Out::Absent,
            profile: Out::Absent,
            tools: Out::Absent,
            recording: Out::Absent,
            sandbox: Out::Canonical("{}"),
            dataset: Out::Absent,
            runtime: Out::Absent,
            imported: Out::Object(&write::Imported {
                format: trace.format.as_str().into(),
                reads: (&trace.reads).into(),
                file: file.into(),
                digest: (&digest).into(),
            }),
            system: Out::Array(&trace.system),
            declared_tools: Out::Array(&tools),
            source: Out::Map(&trace.meta),
        },
    )?;
    w.warnings(None, &trace.warnings)?;
    let mut position = 0usize;
    let mut tokens = 0u64;
    for (i, turn) in trace.turns.iter().enumerate() {
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        let absent = absent_fields(&[("/input", turn.input == Content::Absent)]);
        w.emit(
            Some(index),
            turn.t,
            &write::TurnStarted {
                turn: index.into(),
                input: turn.input.text().into(),
                source: Out::Map(&turn.source),
                absent: absent.out(),
            },
        )?;
        w.warnings(Some(index), &turn.warnings)?;
        for (s, step) in turn.steps.iter().enumerate() {
            tokens += step.usage.map_or(0, |u| u.input_tokens + u.output_tokens);
            w.step(index, s, position, step).map_err(|error| Unwritable { error, at: Some(step.at.clone()) })?;
            position += 1;
        }
        if let Some(last) = turn.steps.last().filter(|s| s.calls.is_empty()) {
            let absent = absent_fields(&[("/response", last.content == Content::Absent)]);
            w.emit(
                Some(index),
                None,
                &write::TurnCompleted {
                    turn: index.into(),
                    response: last.content.text().into(),
                    absent: absent.out(),
                },
            )?;
        }
        w.log.flush()?;
    }
    w.emit(
        None,
        None,
        &write::RunCompleted { status: IMPORTED_STATUS.into(), turns: trace.turns.len().into(), tokens: tokens.into() },
    )?;
    let (bytes, _) = w.log.finish()?;
    Ok((bytes, w.events))
}

/// The log's call id of call `j` of response `s` in turn `turn`: the source's id, or
/// the runtime's own scheme when the source has none.
pub fn call_id(call: &Call, turn: u32, s: usize, j: usize) -> String {
    call.id.clone().unwrap_or_else(|| crate::dataset::recording::ToolCall::default_id(turn, s, j))
}

struct Writer {
    log: LogWriter<Vec<u8>>,
    events: Vec<Event>,
    clock: u64,
}

impl Writer {
    /// Append at the source's time `at` when known (never going back), else now.
    fn emit<W: Written>(&mut self, turn: Option<u32>, at: Option<u64>, data: &W) -> Result<(), WriteError> {
        if let Some(at) = at {
            self.clock = self.clock.max(at);
        }
        let event = self.log.append_written(turn, self.clock, data)?;
        self.events.push(event);
        Ok(())
    }

    fn warnings(&mut self, turn: Option<u32>, warnings: &[Warning]) -> Result<(), WriteError> {
        for w in warnings {
            self.emit(
                turn,
                None,
                &write::Error {
                    kind: WARNING_KIND.into(),
                    message: (&w.message).into(),
                    code: w.code.into(),
                    at: w.at.as_ref().into(),
                    source: Out::Absent,
                },
            )?;
        }
        Ok(())
    }

    fn step(&mut self, turn: u32, s: usize, position: usize, step: &Step) -> Result<(), WriteError> {
        if step.t.is_none() {
            self.clock += step.latency_ms.unwrap_or(0);
        }
        let ids: Vec<String> = step.calls.iter().enumerate().map(|(j, c)| call_id(c, turn, s, j)).collect();
        let args: Vec<Value> = step.calls.iter().map(|c| args_value(&c.args)).collect();
        let calls: Vec<write::LoggedCall> = step
            .calls
            .iter()
            .zip(ids.iter().zip(&args))
            .map(|(c, (id, args))| write::LoggedCall { id: id.into(), name: (&c.name).into(), args: args.into() })
            .collect();
        let usage = step.usage.map(|Usage { input_tokens, output_tokens }| write::Usage {
            input_tokens: input_tokens.into(),
            output_tokens: output_tokens.into(),
        });
        let absent = absent_fields(&[
            ("/response/content", step.content == Content::Absent),
            ("/usage", step.usage.is_none()),
            ("/latency_ms", step.latency_ms.is_none()),
        ]);
        self.emit(
            Some(turn),
            step.t,
            &write::ModelCalled {
                request_hash: Out::Null,
                position: position.into(),
                response: Out::Object(&write::Response {
                    content: step.content.text().into(),
                    tool_calls: Out::Array(&calls),
                    confidence: Out::Absent,
                }),
                usage: usage.as_ref().map_or(Out::Null, |u| Out::Object(u)),
                latency_ms: step.latency_ms.into(),
                api: Out::Absent,
                source: Out::Map(&step.source),
                absent: absent.out(),
            },
        )?;
        for (call, id) in step.calls.iter().zip(ids) {
            self.call(turn, id, call)?;
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
        let is_error = outcome.and_then(|o| o.is_error);
        let duration = outcome.and_then(|o| o.duration_ms);
        let (args_raw, args_error) = match &call.args {
            Args::Json { raw: Some(raw), .. } => (Some(raw), None),
            Args::Unparsed { raw, error } => (Some(raw), Some(error)),
            _ => (None, None),
        };
        let error_kind = outcome.and_then(|o| o.error_kind).filter(|_| is_error == Some(true));
        let absent = absent_fields(&[
            ("/args", call.args == Args::Absent),
            ("/result", outcome.is_none_or(|o| o.result.is_none())),
            ("/is_error", is_error.is_none()),
            ("/duration_ms", duration.is_none()),
        ]);
        let args = args_value(&call.args);
        self.emit(
            Some(turn),
            outcome.and_then(|o| o.t),
            &write::ToolExecuted {
                call_id: (&id).into(),
                tool: (&call.name).into(),
                args: (&args).into(),
                result: outcome.and_then(|o| o.result.as_ref()).into(),
                is_error: is_error.into(),
                fault: Out::Null,
                duration_ms: duration.into(),
                deduplicated: false.into(),
                effect: Out::Null,
                injected: Out::Absent,
                timeout_ms: Out::Absent,
                idempotency_key: Out::Absent,
                first_execution: Out::Absent,
                error_kind: error_kind.map_or(Out::Absent, |k| k.as_str().into()),
                source: Out::Map(&source),
                args_raw: args_raw.map_or(Out::Absent, Out::from),
                args_error: args_error.map_or(Out::Absent, Out::from),
                absent: absent.out(),
            },
        )
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

/// The pointers of the fields that were not captured.
fn absent_fields<'p>(fields: &[(&'p str, bool)]) -> Absent<'p> {
    Absent(fields.iter().filter(|(_, a)| *a).map(|(p, _)| *p).collect())
}

/// The pointers of an event's fields that were not captured.
struct Absent<'p>(Vec<&'p str>);

impl Absent<'_> {
    /// `absent`: the list, or no member when every field was captured (so a log of a
    /// source that captured everything is unchanged).
    fn out(&self) -> Out<'_> {
        if self.0.is_empty() { Out::Absent } else { Out::Array(&self.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Kind;
    use crate::event::verify::verify_bytes;
    use crate::import::builder::Builder;
    use crate::import::trace::{CallResult, Ptr};
    use crate::import::{Format, Source};
    use serde_json::Map;
    use serde_json::json;
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
