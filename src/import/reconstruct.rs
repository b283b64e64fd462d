//! Incident reconstruction: an event log → a dataset case, a recording and fixture tool
//! responses that replay it, and the first divergence between a replay and the trace.
//!
//! [`build`] is pure: it reads the trace's events (an imported log, or any run's log)
//! and returns what `stateval reconstruct` writes — the case (the user turns, tag
//! `incident`, an exact `tool_sequence` expectation), the recording (each
//! `model_called` response with its `turn` / `step`, usage and latency), and a tool
//! manifest whose `responses` are keyed by the recorded arguments with the recorded
//! results (`is_error` kept, a protocol error as the response's `protocol_error`); a
//! tool the profile's manifest lacks gets the description
//! the trace declared but not its input schema (that was the production contract, not
//! today's, and a call failing it would change the replay). Gaps a replay needs filled
//! are filled visibly and listed in [`Incident::notes`]: an absent user input becomes a
//! marked placeholder, a turn that ended on tool calls gets an empty closing answer, a
//! call seen twice with the same arguments but different results keeps the first.
//!
//! [`first_divergence`] compares a replay with the trace by the project's one
//! comparison of logs, the golden diff ([`crate::golden::diff`]), the trace as the
//! golden. The two logs come from different producers, so it diffs their *path views*:
//! the events that decide or reveal the agent's path — turn starts, executed tools
//! (name, canonical arguments, whether they failed, a protocol error's kind), denials,
//! refused approvals, replay divergences and errors — and the final answer, each
//! reduced to those fields. Model calls and context events are left out: the
//! recording replays the model verbatim, so only the agent's handling of it can
//! differ, and that shows in the events compared. What the trace did not capture
//! cannot differ.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value, json};

use super::writer::WARNING_KIND;
use crate::canon::json_eq;
use crate::event::payload as p;
use crate::event::writer::LogWriter;
use crate::event::{Event, Kind};
use crate::golden::{self, Difference};

/// `error_kind` of a call that failed before it reached the tool.
const PROTOCOL: &str = "protocol";

/// The turn input written when the trace did not capture the user's message.
pub const ABSENT_INPUT: &str = "[stateval: the source trace did not capture this user message]";

/// Tool names a manifest accepts (schemas/tools.json).
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Tools the built-in runtime answers itself: never put in a fixture manifest.
const BUILTIN_TOOLS: [&str; 2] = [crate::runtime::memory::WRITE, crate::runtime::memory::READ];

/// What a reconstruction writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    /// The dataset case (one JSONL line).
    pub case: Value,
    /// The recording, one line per model call.
    pub recording: Vec<Value>,
    /// The fixture tool manifest.
    pub manifest: Value,
    /// Every gap that was filled or choice that was made, for the user.
    pub notes: Vec<String>,
    /// The tool sequence of the trace, in order.
    pub tool_sequence: Vec<String>,
}

/// Inputs to [`build`] besides the events.
pub struct Options<'a> {
    pub id: &'a str,
    pub agent: &'a str,
    /// The recording's path as the case names it (relative to the pipeline's base).
    pub recording_path: &'a str,
    /// Where the trace came from, for descriptions.
    pub source: &'a str,
    /// The agent profile's own manifest (as JSON), when it has one: its tool specs,
    /// state and defaults are kept, and the recorded responses come first.
    pub base_manifest: Option<Value>,
}

/// Build the case, recording and manifest that replay `events`. An error names the
/// event that cannot be replayed.
pub fn build(events: &[Event], opts: &Options) -> Result<Incident, String> {
    let mut notes = Vec::new();
    let mut turns: Vec<String> = Vec::new();
    let mut recording: Vec<Value> = Vec::new();
    // per turn: the steps recorded and whether the last one called tools
    let mut steps: Vec<(u32, bool)> = Vec::new();
    let mut calls: Vec<&Event> = Vec::new();
    // the text of a text-only response the model followed with more calls in its turn
    let mut interim: Option<(String, u64)> = None;
    for e in events {
        match e.kind {
            Kind::TurnStarted => {
                match e.view::<p::TurnStarted>().input.as_str() {
                    Some(s) => turns.push(s.into_owned()),
                    None => {
                        notes.push(format!(
                            "turn {}: the user message was not captured; the case uses the placeholder {ABSENT_INPUT:?}",
                            turns.len()
                        ));
                        turns.push(ABSENT_INPUT.to_string());
                    }
                }
                steps.push((0, false));
            }
            Kind::ModelCalled => {
                let Some((step, last_called)) = steps.last_mut() else {
                    return Err(format!("event seq {}: a model call before any turn cannot be replayed", e.seq));
                };
                let turn = turns.len() - 1;
                let mut line = recorded_response(e, turn, *step, &mut notes)?;
                let called = line["response"]["tool_calls"].as_array().is_some_and(|c| !c.is_empty());
                if let Some((text, at)) = interim.take() {
                    if called {
                        let joined = [text, line["response"]["content"].as_str().unwrap_or_default().to_string()]
                            .into_iter()
                            .filter(|t| !t.is_empty())
                            .collect::<Vec<_>>()
                            .join("\n\n");
                        line["response"]["content"] = json!(joined);
                        notes.push(format!(
                            "turn {turn}: the model answered at seq {at} and was called again in the same turn; the \
                             recording joins that text to its next response so the whole turn replays"
                        ));
                    } else {
                        // joined to the turn's answer it would change the answer to compare
                        notes.push(format!(
                            "turn {turn}: the model answered at seq {at} and again at seq {} without calling a tool; \
                             a replay answers once per turn, so the recording keeps the later answer",
                            e.seq
                        ));
                    }
                }
                if !called && events_after_in_turn(events, e) {
                    // a replay would end the turn at a text-only response: carry its text
                    // to the next response so the whole turn replays
                    interim = Some((line["response"]["content"].as_str().unwrap_or_default().to_string(), e.seq));
                    continue;
                }
                *last_called = called;
                recording.push(line);
                *step += 1;
            }
            Kind::ToolExecuted => calls.push(e),
            _ => {}
        }
    }
    if turns.is_empty() {
        return Err("the trace has no turn_started event: there is no user turn to replay".into());
    }
    // every turn must end with an answer, or the next turn's responses replay out of place
    let mut closed = Vec::with_capacity(recording.len() + steps.len());
    let mut by_turn: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for line in recording {
        by_turn.entry(line["turn"].as_u64().unwrap_or(0)).or_default().push(line);
    }
    for (turn, (step, last_called)) in steps.iter().enumerate() {
        closed.extend(by_turn.remove(&(turn as u64)).unwrap_or_default());
        if *step == 0 || *last_called {
            notes.push(format!(
                "turn {turn}: the trace has no model answer after {}; the recording closes the turn with an empty \
                 answer so later turns replay in place",
                if *step == 0 { "the user message" } else { "the last tool call" }
            ));
            closed.push(json!({"turn": turn, "step": step, "response": {"content": ""}}));
        }
    }
    let tool_sequence: Vec<String> =
        calls.iter().filter_map(|e| e.view::<p::ToolExecuted>().tool.as_str().map(Cow::into_owned)).collect();
    let manifest = manifest(events, &calls, opts, &mut notes)?;
    let case = json!({
        "id": opts.id,
        "description": format!("Incident reconstructed from {} by stateval reconstruct", opts.source),
        "tags": ["incident"],
        "agent": opts.agent,
        "turns": turns,
        "recordings": [opts.recording_path],
        "expect": [{"target": "tool_sequence", "matcher": {"exact": tool_sequence},
                    "description": "the incident's tool sequence, as the trace recorded it"}],
    });
    Ok(Incident { case, recording: closed, manifest, notes, tool_sequence })
}

/// Does another model call follow `e` in its turn?
fn events_after_in_turn(events: &[Event], e: &Event) -> bool {
    events
        .iter()
        .skip_while(|n| n.seq <= e.seq)
        .take_while(|n| n.kind != Kind::TurnStarted)
        .any(|n| n.kind == Kind::ModelCalled && n.turn == e.turn)
}

/// One recording line from a `model_called` event.
fn recorded_response(e: &Event, turn: usize, step: u32, notes: &mut Vec<String>) -> Result<Value, String> {
    let called: p::ModelCalled = e.view();
    let response: p::Response = called.response.view();
    let content = response.content.as_str().map(Cow::into_owned).unwrap_or_default();
    let mut calls = Vec::new();
    for (j, call) in response.tool_calls.items().into_iter().enumerate() {
        let name = call.member("name").as_str().unwrap_or_default();
        let name = name.as_ref();
        if !valid_tool_name(name) {
            return Err(format!(
                "event seq {}: tool name {name:?} cannot be a fixture tool (letters, digits, '_', '.', '-', at most 64)",
                e.seq
            ));
        }
        let args = call.member("args");
        let args = match args.value() {
            Value::Null => {
                notes.push(format!("event seq {}: the arguments of {name} were not captured; replayed as {{}}", e.seq));
                json!({})
            }
            // the arguments as the agent wrote them, copied into the recording
            object @ Value::Object(_) => object,
            other => {
                return Err(format!(
                    "event seq {}: the arguments of {name} are not a JSON object ({}); a recording replays object \
                     arguments only",
                    e.seq,
                    truncate(&other.to_string())
                ));
            }
        };
        let mut line = json!({"name": name, "args": args});
        if let Some(id) = call.member("id").as_str().filter(|s| !s.is_empty()) {
            line["id"] = json!(id);
        } else {
            line["id"] = json!(crate::dataset::recording::ToolCall::default_id(turn, step, j));
        }
        calls.push(line);
    }
    let mut out = json!({"turn": turn, "step": step, "response": {"content": content}});
    if !calls.is_empty() {
        out["response"]["tool_calls"] = Value::Array(calls);
    }
    if called.usage.raw().starts_with('{') {
        let usage: p::Usage = called.usage.view();
        let (input, output) = (usage.input_tokens.as_u64(), usage.output_tokens.as_u64());
        out["usage"] = json!({"input_tokens": input.unwrap_or(0), "output_tokens": output.unwrap_or(0)});
    }
    if let Some(ms) = called.latency_ms.as_u64() {
        out["latency_ms"] = json!(ms);
    }
    Ok(out)
}

/// The fixture manifest: recorded outcomes keyed by arguments, on top of the profile's.
fn manifest(events: &[Event], calls: &[&Event], opts: &Options, notes: &mut Vec<String>) -> Result<Value, String> {
    // the tools an imported log declared (any event first: only `run_started` has them),
    // copied into the manifest as the source wrote them
    let declared_tools = events.first().map_or(Value::Null, |e| e.data.member("declared_tools").value());
    let declared: BTreeMap<&str, &Value> =
        declared_tools.as_array().into_iter().flatten().filter_map(|t| Some((t.get("name")?.as_str()?, t))).collect();
    // tool → [(args, outcome, seq)], in call order
    let mut recorded: BTreeMap<String, Vec<(Value, Value, u64)>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let (mut unknown_error, mut absent_result) = (Vec::new(), Vec::new());
    for e in calls {
        let executed: p::ToolExecuted = e.view();
        let tool = executed.tool.as_str().map(Cow::into_owned).unwrap_or_default();
        if BUILTIN_TOOLS.contains(&tool.as_str()) {
            continue;
        }
        if !valid_tool_name(&tool) {
            return Err(format!("event seq {}: tool name {tool:?} cannot be a fixture tool", e.seq));
        }
        let args = match executed.args.value() {
            Value::Null => json!({}),
            object @ Value::Object(_) => object,
            other => {
                return Err(format!(
                    "event seq {}: the arguments of {tool} are not a JSON object ({}); fixtures are keyed by object \
                     arguments",
                    e.seq,
                    truncate(&other.to_string())
                ));
            }
        };
        let is_error = executed.is_error.as_bool();
        if is_error.is_none() {
            unknown_error.push(format!("{tool} (seq {})", e.seq));
        }
        if executed.result.is_null() && is_absent(e, "/result") {
            absent_result.push(format!("{tool} (seq {})", e.seq));
        }
        let result = executed.result.value();
        let mut outcome = json!({"result": result.clone(), "is_error": is_error.unwrap_or(false)});
        if executed.error_kind.as_str().as_deref() == Some(PROTOCOL) {
            // the call never reached the tool: the fixture answers with the same error
            match protocol_error(&result) {
                Some(error) => outcome = json!({"protocol_error": error}),
                None => notes.push(format!(
                    "event seq {}: {tool} failed with a protocol error whose error object has no integer code and \
                     string message ({}); its fixture answers with a tool error",
                    e.seq,
                    truncate(&result.to_string())
                )),
            }
        }
        let list = recorded.entry(tool.clone()).or_default();
        if !order.contains(&tool) {
            order.push(tool.clone());
        }
        match list.iter().find(|(a, _, _)| json_eq(a, &args)) {
            Some((_, first, first_seq)) if !json_eq(first, &outcome) => notes.push(format!(
                "event seq {}: {tool} was called again with the arguments of seq {first_seq} but got a different \
                 result; the fixture keys results by arguments and answers both with the first",
                e.seq
            )),
            Some(_) => {}
            None => list.push((args, outcome, e.seq)),
        }
    }
    if !unknown_error.is_empty() {
        notes.push(format!(
            "the trace does not say whether these calls failed: {}; their fixtures say they did not",
            unknown_error.join(", ")
        ));
    }
    if !absent_result.is_empty() {
        notes.push(format!(
            "the trace did not capture the results of: {}; their fixtures return null",
            absent_result.join(", ")
        ));
    }
    let mut manifest = opts.base_manifest.clone().unwrap_or_else(|| {
        json!({"description": format!("Fixture tool responses of incident {}, from {}", opts.id, opts.source), "tools": []})
    });
    let tools = manifest
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .ok_or("the profile's tool manifest has no tools array")?;
    for name in order {
        let responses: Vec<Value> = recorded[&name]
            .iter()
            .map(|(args, outcome, _)| {
                let mut r = Map::new();
                r.insert("args".into(), args.clone());
                if let Some(error) = outcome.get("protocol_error") {
                    r.insert("protocol_error".into(), error.clone());
                } else {
                    r.insert("result".into(), outcome["result"].clone());
                    r.insert("is_error".into(), outcome["is_error"].clone());
                }
                Value::Object(r)
            })
            .collect();
        match tools.iter_mut().find(|t| t.get("name").and_then(Value::as_str) == Some(name.as_str())) {
            Some(spec) => {
                // recorded answers first (the sandbox takes the first match), then the
                // profile's own for arguments the trace never used
                let own: Vec<Value> = spec
                    .get("responses")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|r| !responses.iter().any(|n| json_eq(&n["args"], r.get("args").unwrap_or(&Value::Null))))
                    .cloned()
                    .collect();
                // a recorded answer keeps the state effect the profile's answer for the
                // same arguments (else its default) has: the trace shows results, not
                // what the call did to the state, and the policy may read that state
                let theirs = spec.get("responses").and_then(Value::as_array).cloned().unwrap_or_default();
                let default_effect = spec.pointer("/default/effect").cloned();
                let responses: Vec<Value> = responses
                    .into_iter()
                    .map(|mut r| {
                        let effect = theirs
                            .iter()
                            .find(|t| json_eq(&r["args"], t.get("args").unwrap_or(&Value::Null)))
                            .and_then(|t| t.get("effect").cloned())
                            .or_else(|| default_effect.clone());
                        // a call that failed did nothing to the state
                        let failed = r["is_error"] == Value::Bool(true) || r.get("protocol_error").is_some();
                        if let (Some(effect), false, Value::Object(m)) = (effect, failed, &mut r) {
                            m.insert("effect".into(), effect);
                        }
                        r
                    })
                    .collect();
                spec["responses"] = Value::Array(responses.into_iter().chain(own).collect());
            }
            None => {
                if opts.base_manifest.is_some() {
                    notes.push(format!(
                        "tool {name} is not in the profile's manifest; it is added with the recorded responses"
                    ));
                }
                let spec = declared.get(name.as_str());
                let description = spec
                    .and_then(|t| t.get("description"))
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("Imported from {}", opts.source), str::to_string);
                let mut tool = json!({"name": name, "description": description, "responses": responses});
                // what the trace declared is kept; what it did not is said, not made up
                let mut guessed = Vec::new();
                match spec.and_then(|t| t.get("input_schema")).filter(|s| s.is_object()) {
                    Some(schema) => tool["input_schema"] = schema.clone(),
                    None => guessed.push("no input schema (any arguments are accepted)"),
                }
                match spec.and_then(|t| t.get("safety_class")).and_then(Value::as_str) {
                    Some(class) => tool["safety_class"] = json!(class),
                    None => guessed.push("no safety class (the manifest's default, read)"),
                }
                match spec.and_then(|t| t.get("trust")).and_then(Value::as_str) {
                    Some(trust) => tool["trust"] = json!(trust),
                    None => guessed.push("no trust level (the manifest's default, trusted)"),
                }
                // a destructive tool's targets are sensitive, and a request must ask for it
                if spec.and_then(|t| t.get("destructive")).and_then(Value::as_bool) == Some(true) {
                    tool["destructive"] = json!(true);
                }
                if let Some(by) = spec.and_then(|t| t.get("classified_by")).and_then(Value::as_str) {
                    notes.push(format!("tool {name}: safety class and trust read from {by}"));
                }
                if !guessed.is_empty() {
                    notes.push(format!(
                        "tool {name}: the trace declares {}; review the fixture before relying on policy rules for it",
                        guessed.join(", ")
                    ));
                }
                tools.push(tool);
            }
        }
    }
    Ok(manifest)
}

/// A JSON-RPC error object as a fixture's `protocol_error`: an integer code, a string
/// message and, when present, data.
fn protocol_error(error: &Value) -> Option<Value> {
    let code = error.get("code")?.as_i64()?;
    let message = error.get("message")?.as_str()?;
    let mut out = json!({"code": code, "message": message});
    if let Some(data) = error.get("data").filter(|d| !d.is_null()) {
        out["data"] = data.clone();
    }
    Some(out)
}

/// Whether `e`'s data marks `pointer` as not captured (the `absent` member `stateval
/// import` writes), read without a tree.
fn is_absent(e: &Event, pointer: &str) -> bool {
    e.data.member("absent").items().iter().any(|p| p.as_str().as_deref() == Some(pointer))
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// One side of a divergence: an event of one of the two logs.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub seq: u64,
    pub turn: Option<u32>,
    pub kind: Kind,
    /// What the event says, briefly (`tool_executed transfer {"to":"bob"}`).
    pub summary: String,
}

impl fmt::Display for Marker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let turn = self.turn.map_or_else(|| "-".to_string(), |t| t.to_string());
        write!(f, "seq {} (turn {turn}, {}): {}", self.seq, self.kind, self.summary)
    }
}

/// Where a replay first left the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// The trace's event at that point, or the one in its place when the trace lacks
    /// the replay's event (`None`: the trace has nothing more in that turn).
    pub expected: Option<Marker>,
    /// The replay's event at that point, or the one in its place when the replay
    /// lacks the trace's event (`None`: the replay has nothing more in that turn).
    pub actual: Option<Marker>,
    /// The golden diff's first difference (the trace is the golden side), its seqs
    /// those of the two logs.
    pub difference: Difference,
}

impl Divergence {
    /// The divergence is the final answer: every tool call reproduced.
    pub fn is_final_answer(&self) -> bool {
        self.difference.kind == Kind::TurnCompleted.as_str()
    }
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side =
            |m: &Option<Marker>| m.as_ref().map_or_else(|| "nothing more in this turn".into(), |m| m.to_string());
        write!(
            f,
            "{}\n  trace:  {}\n  replay: {}",
            golden::render::one_line(&self.difference),
            side(&self.expected),
            side(&self.actual)
        )
    }
}

fn marker(e: &Event) -> Marker {
    let summary = match e.kind {
        Kind::TurnStarted => format!("turn {}", e.turn.map_or_else(|| "?".into(), |t| t.to_string())),
        Kind::ToolExecuted => {
            let d: p::ToolExecuted = e.view();
            format!("{} {}", d.tool.as_str().as_deref().unwrap_or("?"), truncate(&d.args.value().to_string()))
        }
        Kind::PolicyDecided => {
            let d: p::PolicyDecided = e.view();
            format!("{} denied by rule {}", d.tool.as_str().as_deref().unwrap_or("?"), d.rule.value())
        }
        Kind::ApprovalResolved => {
            format!("approval refused by {}", e.view::<p::ApprovalResolved>().by.as_str().as_deref().unwrap_or("?"))
        }
        Kind::ReplayDiverged => e.view::<p::ReplayDiverged>().reason.as_str().map(Cow::into_owned).unwrap_or_default(),
        Kind::Error => {
            let d: p::Error = e.view();
            format!(
                "{}: {}",
                d.kind.as_str().as_deref().unwrap_or("error"),
                truncate(&d.message.as_str().unwrap_or_default())
            )
        }
        Kind::TurnCompleted => {
            format!("answer {}", truncate(&e.view::<p::TurnCompleted>().response.value().to_string()))
        }
        _ => String::new(),
    };
    Marker { seq: e.seq, turn: e.turn, kind: e.kind, summary }
}

/// The *path view* of an event: what of it a reconstruction must reproduce, or `None`
/// when the event is not compared. The trace and its replay come from different
/// producers (an imported log has no context events, other call ids, no times), so
/// the golden diff compares these views, not the logs: turn starts; executed tools
/// (name, arguments, whether they failed, and a protocol error's kind); denials,
/// refused approvals, replay divergences and errors (by kind). Fields a trace marks
/// absent are left out of its view. Model calls are left out: the recording replays
/// the model verbatim, so only the agent's handling of it can differ.
fn path_view(e: &Event) -> Option<Value> {
    // members of several kinds, by name
    let pick = |keys: &[&str]| {
        let mut m = Map::new();
        for k in keys {
            let v = e.data.member(k);
            if !v.is_null() && !is_absent(e, &format!("/{k}")) {
                m.insert((*k).to_string(), v.value());
            }
        }
        Value::Object(m)
    };
    Some(match e.kind {
        Kind::TurnStarted => json!({}),
        Kind::ToolExecuted => {
            let mut v = pick(&["tool", "args", "is_error"]);
            // a tool error is the default kind of a failure; a protocol error is told apart
            if e.view::<p::ToolExecuted>().error_kind.as_str().as_deref() == Some(PROTOCOL) {
                v["error_kind"] = json!(PROTOCOL);
            }
            v
        }
        Kind::PolicyDecided if e.view::<p::PolicyDecided>().verdict.as_str().as_deref() == Some("deny") => {
            pick(&["tool", "verdict"])
        }
        Kind::ApprovalResolved if e.view::<p::ApprovalResolved>().approved.as_bool() == Some(false) => {
            pick(&["approved"])
        }
        Kind::ReplayDiverged => json!({}),
        Kind::Error if e.view::<p::Error>().kind.as_str().as_deref() != Some(WARNING_KIND) => pick(&["kind"]),
        _ => return None,
    })
}

/// The final answer of `events`: the last `turn_completed`, when it closes the last
/// turn and its response was captured.
pub fn final_answer(events: &[Event]) -> Option<&Event> {
    let last_turn = events.iter().rev().find(|e| e.kind == Kind::TurnStarted)?.turn;
    let last = events.iter().rev().find(|e| e.kind == Kind::TurnCompleted)?;
    (last.turn == last_turn && !is_absent(last, "/response")).then_some(last)
}

/// The path view of a log, as a log the golden diff reads, with the event each view
/// event stands for. `answer` adds the final `turn_completed` (its response only).
fn view_log<'a>(events: &'a [Event], answer: Option<&'a Event>) -> Result<(Vec<Event>, Vec<&'a Event>), String> {
    let mut writer = LogWriter::new(std::io::sink());
    let (mut view, mut origin) = (Vec::new(), Vec::new());
    for e in events {
        let data = match path_view(e) {
            Some(data) => data,
            None if answer.is_some_and(|a| std::ptr::eq(a, e)) => {
                json!({"response": e.view::<p::TurnCompleted>().response.value()})
            }
            None => continue,
        };
        // times are the producers' own: the view has none
        view.push(writer.append(e.turn, 0, e.kind, data).map_err(|err| err.to_string())?);
        origin.push(e);
    }
    Ok((view, origin))
}

/// Where `actual` (a replay) first leaves `expected` (the trace), by the golden diff
/// ([`golden::diff`]) of their path views with the trace as the golden: `None` when
/// they agree — same turns, the same tools in the same order with canonically equal
/// arguments and the same failures, no denial, refusal, divergence or error on one
/// side only, and the same final answer when the trace captured it. What the trace
/// did not capture (arguments, whether a call failed, the answer) cannot differ.
pub fn first_divergence(expected: &[Event], actual: &[Event]) -> Result<Option<Divergence>, String> {
    let want = final_answer(expected);
    let (golden_view, golden_origin) = view_log(expected, want)?;
    let (actual_view, actual_origin) = view_log(actual, want.and_then(|_| final_answer(actual)))?;
    let mut diff = golden::diff(&golden_view, &actual_view);
    // a field the trace did not capture is left out of its view; the replay's value
    // there is its own, not a difference
    for d in &mut diff.differences {
        let Some(trace) = d.golden_seq.and_then(|s| golden_origin.get(s as usize)) else { continue };
        d.changes.retain(|c| {
            let uncaptured = c.golden.is_none()
                && c.path.strip_prefix("/data/").is_some_and(|k| !k.contains('/') && trace.data.member(k).is_null());
            !uncaptured
        });
    }
    diff.differences.retain(|d| d.class != golden::Class::PayloadChanged || !d.changes.is_empty());
    let Some(first) = diff.first_divergence() else { return Ok(None) };
    let origin = |seq: Option<u64>, of: &[&Event]| seq.and_then(|s| of.get(s as usize).map(|e| (*e).clone()));
    // an event one log has and the other lacks: the other's side shows what it has in
    // its place, the next difference of the same turn that it does have
    let in_place = |side: fn(&Difference) -> Option<u64>| {
        diff.differences.iter().skip_while(|d| !std::ptr::eq(*d, first)).filter(|d| d.turn == first.turn).find_map(side)
    };
    let golden_seq = first.golden_seq.or_else(|| in_place(|d| d.golden_seq));
    let actual_seq = first.actual_seq.or_else(|| in_place(|d| d.actual_seq));
    let (trace_event, replay_event) = (origin(golden_seq, &golden_origin), origin(actual_seq, &actual_origin));
    let mut difference = first.clone();
    let seq_of = |seq: Option<u64>, of: &[&Event]| seq.and_then(|s| of.get(s as usize).map(|e| e.seq));
    difference.golden_seq = seq_of(first.golden_seq, &golden_origin);
    difference.actual_seq = seq_of(first.actual_seq, &actual_origin);
    Ok(Some(Divergence {
        expected: trace_event.as_ref().map(marker),
        actual: replay_event.as_ref().map(marker),
        difference,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::writer::LogWriter;

    fn log(events: &[(Option<u32>, Kind, Value)]) -> Vec<Event> {
        let mut w = LogWriter::new(Vec::new());
        events.iter().map(|(turn, k, d)| w.append(*turn, 0, *k, d.clone()).unwrap()).collect()
    }

    fn trace() -> Vec<Event> {
        log(&[
            (None, Kind::RunStarted, json!({"declared_tools": [{"name": "lookup", "description": "Find a payee"}]})),
            (Some(0), Kind::TurnStarted, json!({"turn": 0, "input": "pay bob"})),
            (
                Some(0),
                Kind::ModelCalled,
                json!({"response": {"content": "", "tool_calls": [
                {"id": "c1", "name": "lookup", "args": {"who": "bob"}}, {"id": "c2", "name": "pay", "args": {"to": "bob"}}]}}),
            ),
            (
                Some(0),
                Kind::ToolExecuted,
                json!({"tool": "lookup", "args": {"who": "bob"}, "result": {"ok": 1}, "is_error": false}),
            ),
            (
                Some(0),
                Kind::ToolExecuted,
                json!({"tool": "pay", "args": {"to": "bob"}, "result": "limit", "is_error": true}),
            ),
            (Some(0), Kind::Error, json!({"kind": WARNING_KIND, "message": "turn 0 ends without a model answer"})),
            (Some(1), Kind::TurnStarted, json!({"turn": 1, "input": null, "absent": ["/input"]})),
            (Some(1), Kind::ModelCalled, json!({"response": {"content": "Done.", "tool_calls": []}})),
            (None, Kind::RunCompleted, json!({"status": "imported"})),
        ])
    }

    #[test]
    fn arguments_the_trace_did_not_capture_are_no_divergence() {
        let t = log(&[(
            Some(0),
            Kind::ToolExecuted,
            json!({"tool": "ping", "args": null, "absent": ["/args"], "result": null}),
        )]);
        let r = log(&[(Some(0), Kind::ToolExecuted, json!({"tool": "ping", "args": {}, "result": null}))]);
        assert_eq!(first_divergence(&t, &r), Ok(None));
        let other = log(&[(Some(0), Kind::ToolExecuted, json!({"tool": "pong", "args": {}, "result": null}))]);
        let d = first_divergence(&t, &other).unwrap().unwrap();
        assert!(matches!(d.difference.class, golden::Class::ToolCallMissing | golden::Class::ToolCallExtra), "{d}");
    }

    fn opts() -> Options<'static> {
        Options { id: "inc-1", agent: "incident", recording_path: "r.jsonl", source: "t.json", base_manifest: None }
    }

    #[test]
    fn a_trace_becomes_a_case_a_recording_closed_per_turn_and_keyed_fixtures() {
        let incident = build(&trace(), &opts()).unwrap();
        assert_eq!(incident.case["turns"], json!(["pay bob", ABSENT_INPUT]));
        assert_eq!(incident.tool_sequence, ["lookup", "pay"]);
        // turn 0 ended on tool calls: an empty answer closes it before turn 1's response
        let positions: Vec<(u64, u64)> =
            incident.recording.iter().map(|l| (l["turn"].as_u64().unwrap(), l["step"].as_u64().unwrap())).collect();
        assert_eq!(positions, [(0, 0), (0, 1), (1, 0)]);
        let pay = &incident.manifest["tools"][1];
        assert_eq!(pay["responses"][0], json!({"args": {"to": "bob"}, "result": "limit", "is_error": true}));
        assert_eq!(incident.manifest["tools"][0]["description"], json!("Find a payee"));
        assert!(incident.notes.iter().any(|n| n.contains("placeholder")), "{:?}", incident.notes);
    }

    #[test]
    fn recorded_answers_keep_the_state_effect_of_the_profiles_answer() {
        let base = json!({"tools": [{"name": "pay", "description": "Pay",
            "responses": [{"args": {"to": "bob"}, "result": "ok", "effect": [{"op": "add", "path": "/paid/-", "value": "bob"}]}],
            "default": {"result": "ok", "effect": [{"op": "add", "path": "/other", "value": 1}]}}]});
        let mut o = opts();
        o.base_manifest = Some(base);
        let incident = build(&trace(), &o).unwrap();
        let pay = incident.manifest["tools"].as_array().unwrap().iter().find(|t| t["name"] == "pay").unwrap();
        // the trace's pay failed ("limit"): a failed call keeps no effect
        assert_eq!(pay["responses"][0]["result"], json!("limit"));
        assert_eq!(pay["responses"][0].get("effect"), None);
        // lookup is not in the profile's manifest: added as recorded
        let lookup = incident.manifest["tools"].as_array().unwrap().iter().find(|t| t["name"] == "lookup").unwrap();
        assert_eq!(lookup["responses"][0].get("effect"), None);
        // a pay that succeeded keeps the profile's effect for its arguments
        let ok = log(&[
            (None, Kind::RunStarted, json!({})),
            (Some(0), Kind::TurnStarted, json!({"turn": 0, "input": "pay bob"})),
            (
                Some(0),
                Kind::ModelCalled,
                json!({"response": {"content": "", "tool_calls": [{"id": "c", "name": "pay", "args": {"to": "bob"}}]}}),
            ),
            (
                Some(0),
                Kind::ToolExecuted,
                json!({"tool": "pay", "args": {"to": "bob"}, "result": "sent", "is_error": false}),
            ),
            (Some(0), Kind::ModelCalled, json!({"response": {"content": "Paid.", "tool_calls": []}})),
        ]);
        let incident = build(&ok, &o).unwrap();
        let pay = &incident.manifest["tools"][0];
        assert_eq!(pay["responses"][0]["result"], json!("sent"));
        assert_eq!(pay["responses"][0]["effect"], json!([{"op": "add", "path": "/paid/-", "value": "bob"}]));
    }

    #[test]
    fn identical_paths_do_not_diverge_and_a_denial_is_named_where_it_happens() {
        let t = trace();
        assert_eq!(first_divergence(&t, &t), Ok(None));
        let replay = log(&[
            (None, Kind::RunStarted, json!({})),
            (Some(0), Kind::TurnStarted, json!({"turn": 0})),
            (Some(0), Kind::ToolExecuted, json!({"tool": "lookup", "args": {"who": "bob"}, "is_error": false})),
            (Some(0), Kind::PolicyDecided, json!({"tool": "pay", "verdict": "deny", "rule": "limits"})),
        ]);
        let d = first_divergence(&t, &replay).unwrap().unwrap();
        let shown = d.to_string();
        // the golden diff names the trace's pay as missing where the replay denied it
        assert_eq!(d.difference.class, golden::Class::ToolCallMissing, "{shown}");
        let expected = d.expected.unwrap();
        assert_eq!((expected.seq, expected.turn, expected.kind), (4, Some(0), Kind::ToolExecuted));
        assert!(shown.contains("seq 4") && shown.contains("pay"), "{shown}");
    }

    #[test]
    fn a_different_final_answer_is_a_divergence_and_an_uncaptured_one_is_not() {
        let with = |answer: Value| {
            log(&[
                (Some(0), Kind::TurnStarted, json!({"turn": 0})),
                (Some(0), Kind::ToolExecuted, json!({"tool": "f", "args": {}, "is_error": false})),
                (Some(0), Kind::TurnCompleted, answer),
            ])
        };
        let trace = with(json!({"turn": 0, "response": "Paid."}));
        assert_eq!(first_divergence(&trace, &with(json!({"turn": 0, "response": "Paid."}))), Ok(None));
        let d = first_divergence(&trace, &with(json!({"turn": 0, "response": "Sorry."}))).unwrap().unwrap();
        assert!(d.is_final_answer(), "{d}");
        assert!(d.to_string().contains("/data/response"), "{d}");
        let uncaptured = with(json!({"turn": 0, "response": null, "absent": ["/response"]}));
        assert_eq!(first_divergence(&uncaptured, &with(json!({"turn": 0, "response": ""}))), Ok(None));
    }

    #[test]
    fn a_protocol_error_is_not_a_tool_error() {
        let call = |data: Value| log(&[(Some(0), Kind::ToolExecuted, data)]);
        let trace = call(json!({"tool": "f", "args": {}, "is_error": true, "error_kind": "protocol"}));
        let as_tool = call(json!({"tool": "f", "args": {}, "is_error": true}));
        let d = first_divergence(&trace, &as_tool).unwrap().unwrap();
        assert!(d.to_string().contains("/data/error_kind"), "{d}");
        assert_eq!(first_divergence(&trace, &trace), Ok(None));
        // a tool error's kind is the default: "tool" in an import, unwritten in a replay
        let tool = call(json!({"tool": "f", "args": {}, "is_error": true, "error_kind": "tool"}));
        assert_eq!(first_divergence(&tool, &as_tool), Ok(None));
    }

    #[test]
    fn different_arguments_are_a_divergence_but_key_order_is_not() {
        let a = log(&[(Some(0), Kind::ToolExecuted, json!({"tool": "f", "args": {"a": 1, "b": 2}}))]);
        let b = log(&[(Some(0), Kind::ToolExecuted, json!({"tool": "f", "args": {"b": 2, "a": 1.0}}))]);
        let c = log(&[(Some(0), Kind::ToolExecuted, json!({"tool": "f", "args": {"a": 2, "b": 2}}))]);
        assert_eq!(first_divergence(&a, &b), Ok(None));
        let d = first_divergence(&a, &c).unwrap().unwrap();
        assert_eq!(d.difference.class, golden::Class::PayloadChanged);
        assert!(d.to_string().contains("/data/args/a"), "{d}");
    }

    #[test]
    fn arguments_that_are_not_an_object_cannot_be_replayed() {
        let t = log(&[
            (Some(0), Kind::TurnStarted, json!({"input": "x"})),
            (Some(0), Kind::ModelCalled, json!({"response": {"tool_calls": [{"name": "f", "args": "{oops"}]}})),
        ]);
        let err = build(&t, &opts()).unwrap_err();
        assert!(err.contains("event seq 1") && err.contains("not a JSON object"), "{err}");
    }
}
