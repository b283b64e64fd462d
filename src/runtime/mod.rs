//! The built-in runtime: the reference agent loop (docs/design.md §5).
//!
//! Per user turn: compile the context → ask the provider → for each proposed call:
//! policy (deny > escalate > allow) → approval if escalated → execution (built-in
//! memory tools or the fixture sandbox, where declared faults may time a call out, delay
//! it or fail it, in virtual time) → taint bookkeeping → until the model answers without
//! tool calls. Every transition is an event; the runtime keeps no state that is
//! not also a fold over what it has emitted.

pub mod context;
pub mod handoff;
pub mod memory;
use serde_json::{Value, json};
use std::borrow::Cow;

use crate::agent::boundary::ToolBoundary;
use crate::agent::{Agent, Recorder, RunInput, RunStatus, RunSummary};
use crate::canon::{self, Digest};
use crate::dataset::recording::{ModelResponse, ToolCall};
use crate::event::fold::{self, Memory};
use crate::event::payload::{Out, WriteArray, write};
use crate::event::{Kind, writer::WriteError};
use crate::pipeline::manifest::Manifest;
use crate::pipeline::{OnDivergence, SafetyClass};
use crate::replay::{ModelProvider, ModelRequest, ProviderError, ReplayProvider, digest};
use context::{Conversation, approx_tokens};

/// The reference agent.
pub struct BuiltinAgent;

impl BuiltinAgent {
    /// Run with the replay provider over the input's recording.
    pub fn run_replay(&self, input: &RunInput<'_>, rec: &mut Recorder) -> Result<RunSummary, WriteError> {
        let mut provider = ReplayProvider::new(input.recording);
        self.run(input, &mut provider, rec)
    }
}

impl Agent for BuiltinAgent {
    fn run(
        &self,
        input: &RunInput<'_>,
        provider: &mut dyn ModelProvider,
        rec: &mut Recorder,
    ) -> Result<RunSummary, WriteError> {
        Loop::new(input, provider, rec)?.run()
    }
}

struct Loop<'a, 'p> {
    input: &'a RunInput<'a>,
    provider: &'p mut dyn ModelProvider,
    rec: &'p mut Recorder,
    boundary: ToolBoundary<'a>,
    conversation: Conversation,
    memory: Memory,
    /// The memory view sent with each model call, kept while the memory does not change
    /// (`None`: build it again from `memory`).
    memory_view: Option<MemoryView>,
    /// Running as the target of a handoff: the final answer is returned to the caller
    /// instead of completing a user turn.
    nested: bool,
    answer: Option<String>,
    /// The canonical system prompt and tool list, and their request member digests.
    system: Vec<u8>,
    tools: Vec<u8>,
    system_digest: Digest,
    tools_digest: Digest,
    tool_tokens: u64,
    system_tokens: u64,
    tokens_used: u64,
    warnings: Vec<String>,
}

/// The memory as the model sees it: the value, its tokens and its request member digest.
struct MemoryView {
    value: Value,
    tokens: u64,
    digest: Digest,
}

/// A way the run stops early.
struct Stop {
    status: RunStatus,
    error: String,
    /// The `error` event is already in the log (a fixture error, which the tool
    /// boundary records where it happens).
    logged: bool,
}

impl<'a, 'p> Loop<'a, 'p> {
    fn new(
        input: &'a RunInput<'a>,
        provider: &'p mut dyn ModelProvider,
        rec: &'p mut Recorder,
    ) -> Result<Self, WriteError> {
        let canonical = |v: &Value| {
            canon::to_canonical(v).map_err(|source| WriteError::Canon { seq: 0, kind: Kind::RunStarted, source })
        };
        let boundary = ToolBoundary::new(
            input.case,
            input.run_index,
            input.profile,
            input.manifest,
            &[memory::WRITE, memory::READ],
        );
        // a refused tool is never offered to the model
        let mut tools: Vec<Value> = boundary
            .offered()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        if let Value::Array(builtins) = memory::tool_descriptions() {
            tools.extend(builtins);
        }
        if !input.profile.handoffs.is_empty() {
            tools.push(handoff::description(&input.profile.handoffs));
        }
        let tools_value = Value::Array(tools);
        let system = canonical(&json!(input.profile.system))?;
        let tools = canonical(&tools_value)?;
        // sent whole at every call and never compiled: its messages are hashed once
        let context = &input.profile.context;
        let conversation =
            match context.budget_tokens.is_none() && context.history.is_none() && !provider.wants_compiled() {
                true => Conversation::hashing_once(),
                false => Conversation::default(),
            };
        Ok(Loop {
            input,
            provider,
            rec,
            boundary,
            nested: false,
            answer: None,
            conversation,
            memory: Memory::new(),
            memory_view: None,
            system_tokens: approx_tokens(&input.profile.system),
            tool_tokens: approx_tokens(std::str::from_utf8(&tools).unwrap_or_default()),
            system_digest: digest::member(&system),
            tools_digest: digest::member(&tools),
            system,
            tools,
            tokens_used: 0,
            warnings: Vec::new(),
        })
    }

    fn run(mut self) -> Result<RunSummary, WriteError> {
        let case = self.input.case;
        self.rec.emit(&write::RunStarted {
            case: (&case.id).into(),
            run: self.input.run_index.into(),
            agent: self.input.agent.into(),
            dataset_line: (&case.digest).into(),
            profile: (&self.input.profile_digest).into(),
            tools: self.input.manifest.digest.as_ref().into(),
            recording: (&self.input.recording.digest).into(),
            sandbox: self.boundary.sandbox.state().into(),
            dataset: (&case.dataset).into(),
            runtime: Out::Absent,
            imported: Out::Absent,
            system: Out::Absent,
            declared_tools: Out::Absent,
            source: Out::Absent,
        })?;
        self.boundary.announce(self.rec)?;
        let mut outcome = None;
        for (turn, text) in case.turns.iter().enumerate() {
            let turn = u32::try_from(turn).unwrap_or(u32::MAX);
            self.rec.set_turn(Some(turn));
            self.rec.emit(&write::TurnStarted {
                turn: turn.into(),
                input: text.into(),
                source: Out::Absent,
                absent: Out::Absent,
            })?;
            self.expire_memory(turn)?;
            self.conversation.user(text).map_err(|source| WriteError::Canon {
                seq: self.rec.next_seq(),
                kind: Kind::TurnStarted,
                source,
            })?;
            if let Err(stop) = self.turn(turn)? {
                outcome = Some(stop);
                break;
            }
            if self.provider.waits() {
                self.rec.flush()?;
            } else {
                // a replayed turn waits on nothing outside the process: its lines may
                // wait for a later boundary's write
                self.rec.turn_ended()?;
            }
        }
        // the error belongs to the turn it happened in; run_completed to no turn
        let status = outcome.as_ref().map_or(RunStatus::Completed, |stop| stop.status);
        let kind = match status {
            RunStatus::ReplayExhausted => "replay_miss",
            RunStatus::ReplayDiverged => "replay_diverged",
            _ => "run_failed",
        };
        let written = outcome.as_ref().filter(|stop| !stop.logged).map(|stop| (kind, stop.error.as_str()));
        crate::agent::close_run(self.rec, written, status, case.turns.len(), self.tokens_used)?;
        let error = outcome.map(|stop| stop.error);
        Ok(RunSummary { status, error, warnings: self.warnings, refused: None })
    }

    /// One user turn: model calls until an answer without tool calls.
    fn turn(&mut self, turn: u32) -> Result<Result<(), Stop>, WriteError> {
        for step in 0..self.input.profile.max_steps_per_turn {
            let view = match self.memory_view.take() {
                Some(view) => view,
                None => {
                    let value = fold::memory_values(&self.memory);
                    let canonical = canon::to_canonical(&value).map_err(|source| WriteError::Canon {
                        seq: self.rec.next_seq(),
                        kind: Kind::ModelCalled,
                        source,
                    })?;
                    let tokens = approx_tokens(&value.to_string());
                    MemoryView { value, tokens, digest: digest::member(&canonical) }
                }
            };
            let window = self.compile_context(view.tokens)?;
            let hash =
                self.conversation.request_digest(&self.system_digest, &self.tools_digest, &view.digest, window.start);
            // the live provider (`stateval record`) renders the document digested here
            let compiled =
                if self.provider.wants_compiled() { Some(self.compiled(&view.value, window.start)?) } else { None };
            // kept until a memory event changes the memory
            self.memory_view = Some(view);
            let request = ModelRequest { turn, step, hash, compiled };
            let replayed = match self.provider.complete(&request) {
                Ok(r) => r,
                Err(ProviderError::Miss(miss)) => {
                    return Ok(Err(Stop {
                        status: RunStatus::ReplayExhausted,
                        error: miss.to_string(),
                        logged: false,
                    }));
                }
                Err(ProviderError::Live(error) | ProviderError::Unreadable(error)) => {
                    return Ok(Err(Stop { status: RunStatus::Failed, error, logged: false }));
                }
            };
            let position = replayed.position;
            // take only what the events need from the recorded response (not its
            // recorded request), and move the parts instead of cloning them again: a
            // response read from a recording file is the provider's to give away, one
            // of a recording held whole is copied
            let (usage, latency_ms) = (replayed.recorded.usage, replayed.recorded.latency_ms);
            let ModelResponse { content, tool_calls: recorded_calls, confidence } = match replayed.recorded {
                Cow::Owned(recorded) => recorded.response,
                Cow::Borrowed(recorded) => recorded.response.clone(),
            };
            if let Some(d) = replayed.divergence {
                self.rec.emit(&write::ReplayDiverged {
                    position: d.position.into(),
                    recorded_request_hash: d.recorded_hash.as_ref().into(),
                    actual_request_hash: (&d.actual_hash).into(),
                    reason: (&d.reason).into(),
                    pointers: Out::Absent,
                })?;
                let message = format!("replay diverged at position {}: {}", d.position, d.reason);
                match self.input.on_divergence {
                    OnDivergence::Fail => {
                        return Ok(Err(Stop { status: RunStatus::ReplayDiverged, error: message, logged: false }));
                    }
                    OnDivergence::Warn => self.warnings.push(message),
                }
            }
            self.rec.advance(latency_ms);
            self.tokens_used += usage.input_tokens + usage.output_tokens;
            let calls: Vec<(String, String, Value)> = recorded_calls
                .into_iter()
                .enumerate()
                .map(|(j, c)| {
                    let id = c.id.unwrap_or_else(|| ToolCall::default_id(turn, step, j));
                    (id, c.name, c.args)
                })
                .collect();
            // each call's arguments as canonical text, written once for the model_called
            // event, the proposal and the execution (an argument without one is left to
            // each event's writer, which says why)
            let args_texts: Vec<Option<String>> =
                calls.iter().map(|(_, _, args)| canon::to_canonical_string(args).ok()).collect();
            let tool_calls: Vec<write::LoggedCall> = calls
                .iter()
                .zip(&args_texts)
                .map(|((id, name, args), text)| write::LoggedCall {
                    id: id.into(),
                    name: name.into(),
                    args: text.as_deref().map_or(Out::Value(args), Out::Canonical),
                })
                .collect();
            // the calls' canonical bytes, written once for the event and the assistant
            // message alike (reading them back out of the event was 4 % of a run); a
            // call that cannot be written is left to the event's writer, which says why
            // room for the usual calls up front: grown from nothing, this buffer's
            // reallocations were 1.5 % of a replay's instructions
            let mut called_text = Vec::with_capacity(if tool_calls.is_empty() { 2 } else { 256 * tool_calls.len() });
            let called_text = match WriteArray::write(&tool_calls, &mut called_text) {
                Ok(()) => String::from_utf8(called_text).ok(),
                Err(_) => None,
            };
            self.rec.emit(&write::ModelCalled {
                request_hash: (&hash).into(),
                position: position.into(),
                response: Out::Object(&write::Response {
                    content: (&content).into(),
                    tool_calls: called_text.as_deref().map_or(Out::Array(&tool_calls), Out::Canonical),
                    confidence: confidence.map_or(Out::Absent, Out::Float),
                }),
                usage: Out::Object(&write::Usage {
                    input_tokens: usage.input_tokens.into(),
                    output_tokens: usage.output_tokens.into(),
                }),
                latency_ms: latency_ms.into(),
                api: Out::Absent,
                source: Out::Absent,
                absent: Out::Absent,
            })?;
            drop(tool_calls);
            // the assistant message carries the same calls as the event's response
            let called = called_text.as_deref().filter(|_| !calls.is_empty()).map(str::as_bytes);
            let next = self.rec.next_seq();
            self.conversation.assistant(&content, called).map_err(|source| WriteError::Canon {
                seq: next,
                kind: Kind::ModelCalled,
                source,
            })?;
            if calls.is_empty() {
                if self.nested {
                    self.answer = Some(content);
                } else {
                    self.rec.emit(&write::TurnCompleted {
                        turn: turn.into(),
                        response: (&content).into(),
                        absent: Out::Absent,
                    })?;
                }
                return Ok(Ok(()));
            }
            for ((call_id, tool, args), args_text) in calls.into_iter().zip(args_texts) {
                let (result, text) = self.call(&call_id, &tool, &args, args_text.as_deref())?;
                // a broken fixture fails the case; the model never sees its error
                if let Some(error) = self.boundary.fixture_error.take() {
                    return Ok(Err(Stop { status: RunStatus::Failed, error, logged: true }));
                }
                let seq = self.rec.next_seq();
                let added = match &text {
                    Some(text) => self.conversation.tool_result_written(&call_id, text),
                    None => self.conversation.tool_result(&call_id, &result),
                };
                added.map_err(|source| WriteError::Canon { seq, kind: Kind::ModelCalled, source })?;
            }
        }
        let limit = self.input.profile.max_steps_per_turn;
        Ok(Err(Stop {
            status: RunStatus::Failed,
            error: format!("turn {turn}: the model was still calling tools after {limit} steps (max_steps_per_turn)"),
            logged: false,
        }))
    }

    /// The request document [`Conversation::request_digest`] digests: memory, the
    /// messages from `start` on, system prompt and tools.
    fn compiled(&self, memory_view: &Value, start: usize) -> Result<Value, WriteError> {
        let seq = self.rec.next_seq();
        let parse =
            |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).map_err(|e| WriteError::Io(std::io::Error::other(e)));
        let messages = self.conversation.messages_from(start).map_err(|e| {
            WriteError::Io(std::io::Error::other(format!("event {seq}: the conversation does not read back: {e}")))
        })?;
        Ok(json!({"memory": memory_view, "messages": messages, "system": parse(&self.system)?,
                  "tools": parse(&self.tools)?}))
    }

    /// Fit the sections into the effective budget (see `context`): one
    /// `context_compiled` event per model call, recording every section's tokens, the
    /// messages sent and dropped, and each section cap that was exceeded.
    fn compile_context(&mut self, memory_tokens: u64) -> Result<context::Window, WriteError> {
        let config = &self.input.profile.context;
        let fixed = self.system_tokens + memory_tokens + self.tool_tokens;
        let history_budget = match (config.budget_tokens, config.history) {
            (Some(total), Some(cap)) => Some(total.saturating_sub(fixed).min(cap)),
            (Some(total), None) => Some(total.saturating_sub(fixed)),
            (None, cap) => cap,
        };
        let window = self.conversation.window(history_budget);
        let total = fixed + window.tokens;
        let mut over = Vec::new();
        for (name, tokens, cap) in [
            ("system", self.system_tokens, config.system),
            ("memory", memory_tokens, config.memory),
            ("tools", self.tool_tokens, config.tools),
        ] {
            if cap.is_some_and(|c| tokens > c) {
                over.push(name);
            }
        }
        self.rec.emit(&write::ContextCompiled {
            budget: config.budget_tokens.into(),
            total: total.into(),
            sections: Out::Object(&write::Sections {
                system: self.system_tokens.into(),
                memory: memory_tokens.into(),
                history: window.tokens.into(),
                tools: self.tool_tokens.into(),
            }),
            messages: (self.conversation.len() - window.start).into(),
            dropped: window.start.into(),
            over_section_budget: Out::Array(&over),
        })?;
        Ok(window)
    }

    /// Propose, decide, maybe approve, execute. Returns what the model sees as the result.
    /// Propose, decide and execute one call; its result, with the result's canonical
    /// text when the `tool_executed` event wrote it (the conversation takes that text
    /// rather than writing the result again).
    /// `args_text` is the arguments' canonical text, when they have one.
    fn call(
        &mut self,
        call_id: &str,
        tool: &str,
        args: &Value,
        args_text: Option<&str>,
    ) -> Result<(Value, Option<String>), WriteError> {
        let written_args = args_text.map_or(Out::Value(args), Out::Canonical);
        self.rec.emit(&write::ToolProposed { call_id: call_id.into(), tool: tool.into(), args: written_args })?;
        let class = if memory::is_builtin(tool) { memory::class(tool) } else { self.boundary.class(tool) };
        let taint_source = self.boundary.taint.source_of(args);
        if let Some(denied) = self.boundary.decide(self.rec, call_id, tool, class, args)? {
            return Ok((denied, None));
        }
        if memory::is_builtin(tool) {
            return Ok((self.memory_call(call_id, tool, args)?, None));
        }
        if tool == handoff::TOOL && !self.input.profile.handoffs.is_empty() {
            // the handoff is itself a tool call, executed once the target has answered
            let result = self.handoff(call_id, args, taint_source)?;
            let is_error = result.get("error").is_some();
            self.rec.emit(&instant_execution(call_id, tool, args, &result, is_error))?;
            return Ok((result, None));
        }
        let (answer, text) = self.boundary.execute_written(self.rec, call_id, tool, args, args_text)?;
        Ok((answer.result, text))
    }

    /// Hand a task to another agent profile. The target runs under its own policy,
    /// tools and approvals (it inherits no authority) but carries the caller's taint (it
    /// inherits every untrusted source the caller read, with the events that brought
    /// them); a target that is privileged or holds a financial or privileged tool
    /// refuses a payload carrying untrusted content. The target's answer is the call's
    /// result.
    fn handoff(&mut self, call_id: &str, args: &Value, source: Option<u64>) -> Result<Value, WriteError> {
        let tainted = source.is_some();
        // the event that introduced the payload's taint, named in a refusal
        let tainted_by = source.map(|seq| {
            let tool =
                self.rec.events().get(seq as usize).and_then(|e| e.data.member("tool").as_str()).unwrap_or_default();
            (seq, tool.into_owned())
        });
        let cause = tainted_by.as_ref().map(|(seq, tool)| format!(" (taint introduced by event {seq}, {tool})"));
        let cause = cause.unwrap_or_default();
        let to = args.get("to").and_then(Value::as_str).unwrap_or_default().to_string();
        let task = args.get("task").and_then(Value::as_str).unwrap_or_default().to_string();
        let peer = self.input.peers.get(to.as_str()).copied();
        let cross_agent = !crate::text::switches::off("cross-agent-taint");
        // a target that holds money or authority is a deputy, marked privileged or not
        let sensitive = |m: &Manifest| {
            m.tools.iter().any(|t| matches!(t.safety_class(), SafetyClass::Financial | SafetyClass::Privileged))
        };
        let refusal = if !self.input.profile.handoffs.contains(&to) {
            Some(format!("{to:?} is not among this agent's handoff targets"))
        } else if peer.is_none() {
            Some(format!("no agent profile named {to:?}"))
        } else if tainted && peer.is_some_and(|(p, _)| p.privileged) {
            Some(format!("the payload carries untrusted content and {to} is privileged{cause}"))
        } else if tainted && cross_agent && peer.is_some_and(|(_, m)| sensitive(m)) {
            Some(format!("the payload carries untrusted content and {to} holds financial or privileged tools{cause}"))
        } else {
            None
        };
        let payload_hash =
            canon::canonical_digest(canon::Context::Content, &json!(task)).map(|d| d.to_string()).unwrap_or_default();
        let by = tainted_by.as_ref().map(|(seq, tool)| write::TaintedBy { seq: (*seq).into(), tool: tool.into() });
        let seq = self.rec.emit(&write::Handoff {
            call_id: call_id.into(),
            from: self.input.agent.into(),
            to: (&to).into(),
            allowed: refusal.is_none().into(),
            payload_hash: (&payload_hash).into(),
            taint: tainted.into(),
            tainted_by: by.as_ref().map_or(Out::Absent, |by| Out::Object(by)),
            reason: refusal.as_ref().into(),
        })?;
        let (Some((profile, manifest)), None) = (peer, &refusal) else {
            if tainted {
                let detail = format!("handoff to {to} refused: {}", refusal.clone().unwrap_or_default());
                self.rec.emit(&write::SecurityFlagged {
                    class: "confused_deputy".into(),
                    severity: "high".into(),
                    source: seq.into(),
                    tool: Out::Absent,
                    detail: (&detail).into(),
                    request: Out::Absent,
                    call_id: Out::Absent,
                })?;
            }
            return Ok(json!({"error": format!("handoff refused: {}", refusal.unwrap_or_default())}));
        };
        let target = RunInput {
            case: self.input.case,
            run_index: self.input.run_index,
            agent: &to,
            profile,
            profile_digest: self.input.profile_digest,
            manifest,
            recording: self.input.recording,
            on_divergence: self.input.on_divergence,
            // the target may hand on to its own targets, among the same profiles
            peers: self.input.peers.clone(),
        };
        let turn = self.rec.turn().unwrap_or(0);
        let mut nested = Loop::new(&target, &mut *self.provider, &mut *self.rec)?;
        nested.nested = true;
        if cross_agent {
            // every agent down the chain carries everything its caller read
            nested.boundary.taint.inherit(&self.boundary.taint);
        } else if tainted {
            nested.boundary.taint.absorb(&json!(task), seq);
        }
        // grounding does not follow the payload: the target may direct effects only to
        // what grounded its caller
        nested.boundary.inherit_grounding(&mut self.boundary, nested.rec);
        nested.conversation.user(&task).map_err(|source| WriteError::Canon { seq, kind: Kind::Handoff, source })?;
        let outcome = nested.turn(turn)?;
        let answer = nested.answer.take();
        let warnings = std::mem::take(&mut nested.warnings);
        self.warnings.extend(warnings);
        Ok(match (outcome, answer) {
            (Ok(()), Some(answer)) => json!({"agent": to, "answer": answer}),
            (Err(stop), _) => json!({"error": format!("{to} did not finish: {}", stop.error)}),
            (Ok(()), None) => json!({"error": format!("{to} gave no answer")}),
        })
    }

    fn memory_call(&mut self, call_id: &str, tool: &str, args: &Value) -> Result<Value, WriteError> {
        let parsed = memory::parse(tool, args);
        let (result, is_error) = match &parsed {
            Err(message) => (json!({"error": message}), true),
            Ok(memory::MemoryCall::Write { .. }) => (json!({"ok": true}), false),
            Ok(memory::MemoryCall::Read { tier, key }) => {
                let value = self.memory.get(*tier).and_then(|m| m.get(*key)).map_or(Value::Null, |e| e.value.clone());
                (json!({"value": value}), false)
            }
        };
        let executed = self.rec.emit(&instant_execution(call_id, tool, args, &result, is_error))?;
        match parsed {
            Ok(memory::MemoryCall::Write { tier, key, value, confidence }) => {
                let supersedes = self.memory.get(tier).and_then(|m| m.get(key)).map(|e| e.source);
                let seq = self.rec.emit(&write::MemoryWritten {
                    tier: tier.into(),
                    key: key.into(),
                    value: value.into(),
                    confidence: confidence.into(),
                    supersedes: supersedes.into(),
                    source: executed.into(),
                })?;
                fold::apply_memory(&mut self.memory, self.rec.event(seq));
                self.memory_view = None;
            }
            Ok(memory::MemoryCall::Read { tier, key }) => {
                let entry = self.memory.get(tier).and_then(|m| m.get(key));
                self.rec.emit(&write::MemoryRead {
                    tier: tier.into(),
                    key: key.into(),
                    value: entry.map(|e| &e.value).into(),
                    source: entry.map(|e| e.source).into(),
                })?;
            }
            Err(_) => {}
        }
        Ok(result)
    }

    /// Episodic entries older than the profile's TTL (in turns) expire at turn start.
    fn expire_memory(&mut self, turn: u32) -> Result<(), WriteError> {
        let Some(ttl) = self.input.profile.memory.episodic_ttl_turns else {
            return Ok(());
        };
        let expired: Vec<(String, Value, u64)> = self
            .memory
            .get("episodic")
            .map(|m| {
                m.iter()
                    .filter(|(_, e)| e.turn.is_some_and(|t| t + ttl <= turn))
                    .map(|(k, e)| (k.clone(), e.value.clone(), e.source))
                    .collect()
            })
            .unwrap_or_default();
        for (key, value, source) in expired {
            let seq = self.rec.emit(&write::MemoryExpired {
                tier: "episodic".into(),
                key: (&key).into(),
                value: (&value).into(),
                source: source.into(),
            })?;
            fold::apply_memory(&mut self.memory, self.rec.event(seq));
            self.memory_view = None;
        }
        Ok(())
    }
}

/// `tool_executed` of a call the runtime answers itself at once (a memory tool, a
/// handoff): no fault, no time, no effect.
fn instant_execution<'a>(
    call_id: &'a str,
    tool: &'a str,
    args: &'a Value,
    result: &'a Value,
    is_error: bool,
) -> write::ToolExecuted<'a> {
    write::ToolExecuted {
        call_id: call_id.into(),
        tool: tool.into(),
        args: args.into(),
        result: result.into(),
        is_error: is_error.into(),
        fault: Out::Null,
        duration_ms: 0u64.into(),
        deduplicated: false.into(),
        effect: Out::Null,
        injected: Out::Absent,
        timeout_ms: Out::Absent,
        idempotency_key: Out::Absent,
        first_execution: Out::Absent,
        error_kind: Out::Absent,
        source: Out::Absent,
        args_raw: Out::Absent,
        args_error: Out::Absent,
        absent: Out::Absent,
    }
}

#[cfg(test)]
mod grounding_tests;
#[cfg(test)]
mod handoff_tests;
#[cfg(test)]
mod tests;
