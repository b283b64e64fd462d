//! One case run of an external agent: the session that owns its log.
//!
//! Everything that happens in the run arrives here as a message, one at a time, on one
//! thread: the agent's model calls and tool calls (from the server's handlers), its
//! protocol-fd and stdout lines and its exit (from the process's readers). The session is the single
//! writer of the run's log, so the log's order is the order the session handled them,
//! and that order is made deterministic:
//!
//! - a model call gets the next recorded response (replay by position, never live);
//! - tool calls of one model step take effect in the model's order: a call that arrives
//!   before an earlier proposed call of the same step is held until that call arrives,
//!   or until [`HOLD_MS`] pass with nothing arriving (an agent that runs calls one at a
//!   time, out of order, then has them applied in the order it made them);
//! - tool results the agent produced itself are read from its next model request.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::access::Credentials;
use super::neutral::{self, Rule};
use super::process::{self, AgentProcess, Channel, Output};
use super::protocol::{self, FromAgent};
use super::server::{Msg, Server, ToolAnswer};
use super::wire::{self, CallOut, Dialect, Reply, Stored, WireAnswer};
use crate::agent::boundary::ToolBoundary;
use crate::agent::{Recorder, RunInput, RunStatus, RunSummary};
use crate::canon::{self, Context};
use crate::dataset::recording::{ModelResponse, RecordedResponse};
use crate::event::Kind;
use crate::event::payload::{Out, write};
use crate::event::writer::WriteError;
use crate::pipeline::OnDivergence;
use crate::replay::{ModelProvider, ModelRequest, ProviderError};
use crate::secrets::Scrubber;

/// How long a tool call that arrived ahead of an earlier proposed call waits for it
/// when nothing else arrives: parallel calls of one step reach the server within
/// milliseconds of each other, even on a loaded machine; an agent that waits for the
/// held call's answer before it sends the next one is released after this. (A call
/// that arrives later than this still runs, after the one that was released.)
pub const HOLD_MS: u64 = 500;

/// How long a killed agent's stdout lines still on their way may take to arrive.
const LAST_OUTPUT_WAIT: Duration = Duration::from_millis(500);

/// How long an agent still at work when its run failed may take to act next (a
/// request, a protocol line, its exit) before its tree is killed ([`Session::settle`]).
const SETTLE_WAIT: Duration = Duration::from_millis(500);

/// Where a run's agent process runs and how it reaches stateval.
pub struct Launch<'a> {
    pub server: &'a Server,
    pub run_id: &'a str,
    pub command: &'a [String],
    pub cwd: PathBuf,
    /// How the agent is isolated ([`crate::isolation`]).
    pub confinement: &'a crate::isolation::Confinement,
    /// Stderr goes here (beside the log), or nowhere.
    pub stderr: Option<PathBuf>,
    /// The stateval binary, for `stateval mcp-stdio` (`STATEVAL_BIN`).
    pub binary: Option<PathBuf>,
    /// `stateval record`: model calls go to the live upstream and are recorded.
    pub record: Option<&'a RecordMode>,
    /// `stateval doctor`: every model request, normalised as digested, is kept here.
    pub requests: Option<&'a std::sync::Mutex<Vec<Value>>>,
}

/// What `stateval record` adds to a run: the upstream, and the recording it fills.
pub struct RecordMode {
    pub upstream: super::upstream::Upstream,
    /// Built-in cases: the vendor asked (`--upstream`; OpenAI when absent). An external
    /// agent's calls go to the vendor of the API it calls.
    pub provider: Option<super::upstream::Provider>,
    /// Built-in cases: the model asked (`--model`; [`super::live::default_model`]).
    pub model: Option<String>,
    /// The run's recorded responses, in call order.
    pub lines: std::sync::Mutex<Vec<RecordedResponse>>,
}

/// Why the run stopped early: a status, the `error` event's kind, a message.
struct Stop {
    status: RunStatus,
    kind: &'static str,
    message: String,
}

impl Stop {
    fn failed(kind: &'static str, message: String) -> Stop {
        Stop { status: RunStatus::Failed, kind, message }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Proposed by the model, not seen yet.
    Pending,
    /// Executed through stateval's tool endpoints.
    Executed,
    /// Its result came back from the agent itself.
    AgentRun,
    /// Passed over: a later call of the step was released without it.
    Skipped,
}

struct Proposal {
    call_id: String,
    name: String,
    args: Value,
    state: State,
}

struct Held {
    index: usize,
    reply: oneshot::Sender<ToolAnswer>,
}

pub struct Session<'a, 'p> {
    input: &'p RunInput<'a>,
    provider: &'p mut dyn ModelProvider,
    rec: &'p mut Recorder,
    boundary: ToolBoundary<'a>,
    rules: Vec<Rule>,
    launch: &'p Launch<'p>,
    rx: Receiver<Msg>,
    turn: u32,
    /// Model calls so far in this turn.
    step: u32,
    proposals: Vec<Proposal>,
    held: Vec<Held>,
    /// What Responses API exchanges stored, for `previous_response_id` and
    /// `item_reference`.
    stored: Stored,
    /// Record mode: our Responses ids → the upstream's.
    upstream_ids: BTreeMap<String, String>,
    scrubber: Scrubber,
    /// The agent has written a line on its protocol fd: from then on stdout is output.
    fd_spoke: bool,
    /// The agent's stdout and protocol fd have both closed (`Output::Closed` was read).
    output_closed: bool,
    /// stateval's answer to the last request it refused, scrubbed (`RunSummary::refused`).
    refused: Option<String>,
    unrequested: u32,
    tokens: u64,
    warnings: Vec<String>,
    /// Positions whose recorded request matched only under today's normalize rules.
    renormalized: Vec<usize>,
    stop: Option<Stop>,
    deadline: Instant,
}

impl<'a, 'p> Session<'a, 'p> {
    pub fn run(
        input: &'p RunInput<'a>,
        provider: &'p mut dyn ModelProvider,
        rec: &'p mut Recorder,
        launch: &'p Launch<'p>,
    ) -> Result<RunSummary, WriteError> {
        let (tx, rx) = std::sync::mpsc::channel();
        // fresh secrets per case run, so no agent can compute another's (access.rs)
        let credentials = Credentials::generate();
        let _registration = credentials.as_ref().ok().map(|c| launch.server.register(c, tx.clone()));
        let rules = Rule::compile(&input.profile.normalize).unwrap_or_default();
        let mut session = Session {
            input,
            provider,
            rec,
            boundary: ToolBoundary::new(input.case, input.run_index, input.profile, input.manifest, &[]),
            rules,
            launch,
            rx,
            turn: 0,
            step: 0,
            proposals: Vec::new(),
            held: Vec::new(),
            stored: Stored::default(),
            upstream_ids: BTreeMap::new(),
            scrubber: Scrubber::new(&input.profile.scrub),
            fd_spoke: false,
            output_closed: false,
            refused: None,
            unrequested: 0,
            tokens: 0,
            warnings: Vec::new(),
            renormalized: Vec::new(),
            stop: None,
            deadline: Instant::now() + Duration::from_millis(input.profile.external_timeout_ms()),
        };
        session.start()?;
        let credentials = match credentials {
            Ok(credentials) => credentials,
            Err(e) => {
                let stop = Stop::failed("agent_start", format!("no random source for the case run's secrets: {e}"));
                return session.finish(Some(stop));
            }
        };
        let env = session.environment(&launch.server.base_url(&credentials.token), &credentials.key);
        let stderr = launch.stderr.as_deref();
        // what the agent prints is kept without its own credentials too: they die with the
        // run, but its output reaches the failure's explanation and every report (its
        // requests keep the profile's scrubber alone: their digests must not move)
        let output = session.scrubber.clone().with_literals([credentials.token.as_str(), credentials.key.as_str()]);
        let process =
            AgentProcess::spawn(launch.command, &launch.cwd, &env, launch.confinement, stderr, &output, tx, Msg::Agent);
        let outcome = match process {
            Ok(mut process) => {
                let outcome = session.converse(&mut process);
                let unanswered = match &outcome {
                    Ok(Some(stop)) => session.settle(&process, stop),
                    _ => Vec::new(),
                };
                process.kill_tree();
                // answered (with an error) only now, when nothing is left to react to it
                drop(unanswered);
                session.keep_last_output(&process);
                outcome?
            }
            Err(e) => Some(Stop::failed("agent_start", format!("cannot start {}: {e}", launch.command.join(" ")))),
        };
        session.finish(outcome)
    }

    fn start(&mut self) -> Result<(), WriteError> {
        let input = self.input;
        let case = input.case;
        self.rec.emit(&write::RunStarted {
            case: (&case.id).into(),
            run: input.run_index.into(),
            agent: input.agent.into(),
            dataset_line: (&case.digest).into(),
            profile: (&input.profile_digest).into(),
            tools: input.manifest.digest.as_ref().into(),
            recording: (&input.recording.digest).into(),
            sandbox: self.boundary.sandbox.state().into(),
            dataset: (&case.dataset).into(),
            runtime: "external".into(),
            imported: Out::Absent,
            system: Out::Absent,
            declared_tools: Out::Absent,
            source: Out::Absent,
        })?;
        self.boundary.announce(self.rec)
    }

    /// The process's environment: the parent's without any credential or the signing
    /// key ([`crate::child_env`]; the profile's `env_passthrough` names exceptions),
    /// plus the replay endpoints and the case run's own API key (its SDKs send it with
    /// every request, which tells the server who sent it), then the profile's own
    /// variables.
    fn environment(&self, base: &str, key: &str) -> Vec<(String, String)> {
        let input = self.input;
        let mut env = crate::child_env::inherited(&input.profile.env_passthrough);
        let ours = [
            ("OPENAI_BASE_URL", format!("{base}/v1")),
            ("OPENAI_API_KEY", key.to_string()),
            ("ANTHROPIC_BASE_URL", base.to_string()),
            ("ANTHROPIC_API_KEY", key.to_string()),
            ("STATEVAL_MCP_URL", format!("{base}/mcp")),
            ("STATEVAL_TOOLS_URL", format!("{base}/tools")),
            ("STATEVAL_CASE", input.case.id.clone()),
            ("STATEVAL_RUN", input.run_index.to_string()),
            (process::PROTOCOL_FD_ENV, process::PROTOCOL_FD.to_string()),
            ("TZ", "UTC".into()),
            ("PYTHONHASHSEED", "0".into()),
        ];
        // frameworks' telemetry off by default: an exporter that retries at exit holds
        // the agent past its exit grace, and nothing of a replayed run is worth sending
        // (a profile's `env` turns one back on)
        env.extend(TELEMETRY_OFF.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env.extend(ours.into_iter().map(|(k, v)| (k.to_string(), v)));
        if let Some(bin) = &self.launch.binary {
            env.insert("STATEVAL_BIN".into(), bin.to_string_lossy().into_owned());
        }
        env.extend(input.profile.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.into_iter().collect()
    }

    /// Start, every turn, end. `Some(stop)` when the run failed.
    fn converse(&mut self, process: &mut AgentProcess) -> Result<Option<Stop>, WriteError> {
        let case = self.input.case;
        // a write failure means the agent is gone; its exit is reported by the reader
        let _ = process.send(&protocol::start(&case.id, self.input.run_index));
        for (turn, text) in case.turns.iter().enumerate() {
            let turn = u32::try_from(turn).unwrap_or(u32::MAX);
            self.turn = turn;
            self.step = 0;
            self.proposals.clear();
            self.rec.set_turn(Some(turn));
            self.rec.emit(&write::TurnStarted {
                turn: turn.into(),
                input: text.into(),
                source: Out::Absent,
                absent: Out::Absent,
            })?;
            let _ = process.send(&protocol::turn(turn, text));
            match self.until_answer(process)? {
                Ok(output) => {
                    self.rec.emit(&write::TurnCompleted {
                        turn: turn.into(),
                        response: (&output).into(),
                        absent: Out::Absent,
                    })?;
                    self.rec.flush()?;
                }
                Err(stop) => return Ok(Some(stop)),
            }
        }
        let _ = process.send(&protocol::end());
        Ok(self.until_exit(process)?.err())
    }

    /// Serve messages until the agent answers the current turn.
    fn until_answer(&mut self, process: &mut AgentProcess) -> Result<Result<String, Stop>, WriteError> {
        loop {
            let Some(msg) = self.next()? else {
                let limit = self.input.profile.external_timeout_ms();
                return Ok(Err(Stop::failed(
                    "agent_timeout",
                    format!("turn {}: no answer within timeout_ms = {limit}; the process tree was killed", self.turn),
                )));
            };
            match msg {
                Msg::Agent(Output::Line(channel, line)) => match self.protocol(process, channel, &line) {
                    None => {}
                    Some(Ok(FromAgent::TurnResult { turn, output })) if turn == self.turn => return Ok(Ok(output)),
                    Some(Ok(FromAgent::TurnResult { turn, .. })) => {
                        return Ok(Err(Stop::failed(
                            "agent_protocol",
                            format!("turn_result for turn {turn} while turn {} was asked", self.turn),
                        )));
                    }
                    Some(Err(e)) => return Ok(Err(Stop::failed("agent_protocol", e))),
                },
                Msg::Agent(Output::Unreadable(e)) => return Ok(Err(Stop::failed("agent_protocol", e))),
                Msg::Agent(Output::Closed) => {
                    self.output_closed = true;
                    let status = process.wait_exit(Duration::from_millis(500));
                    return Ok(Err(Stop::failed(
                        "agent_exited",
                        format!("the agent {} before answering turn {}", exited(status), self.turn),
                    )));
                }
                other => self.handle(other)?,
            }
            if let Some(stop) = self.stop.take() {
                return Ok(Err(stop));
            }
        }
    }

    /// The protocol message a line is, `None` for a stdout line that is output (then
    /// kept beside stderr). Every fd line is protocol; a stdout line is while the fd has
    /// carried nothing and it is a `turn_result` object ([`protocol::on_stdout`]).
    fn protocol(&mut self, process: &AgentProcess, channel: Channel, line: &str) -> Option<Result<FromAgent, String>> {
        match channel {
            Channel::Fd => {
                self.fd_spoke = true;
                Some(protocol::parse(line, protocol::FD_LINE))
            }
            Channel::Stdout if !self.fd_spoke && protocol::on_stdout(line) => {
                Some(protocol::parse(line, protocol::STDOUT_LINE))
            }
            Channel::Stdout => {
                process.keep_stdout(line);
                None
            }
        }
    }

    /// After a failure that stopped the run while the agent was still at work: wait, at
    /// most [`SETTLE_WAIT`], for its next act — a request, a protocol line, its exit —
    /// before its tree is killed. What it wrote before that act (typically the error it
    /// was just answered, logged on stderr) is then in its kept output on every run; a
    /// kill at once raced it, and the failure's explanation in the reports changed from
    /// one run of the same inputs to the next. A request that comes meanwhile is not
    /// answered: it is returned, to be dropped only once the tree is dead, so that the
    /// agent cannot react to it. Not after a timeout (the agent is not acting) or its exit.
    fn settle(&mut self, process: &AgentProcess, stop: &Stop) -> Vec<Msg> {
        let mut unanswered = Vec::new();
        if matches!(stop.kind, "agent_timeout" | "agent_slow_request") {
            return unanswered;
        }
        let deadline = Instant::now() + SETTLE_WAIT;
        while !self.output_closed {
            let Some(wait) = deadline.checked_duration_since(Instant::now()) else { break };
            match self.rx.recv_timeout(wait) {
                Ok(Msg::Agent(Output::Line(Channel::Stdout, line))) if self.fd_spoke || !protocol::on_stdout(&line) => {
                    process.keep_stdout(&line);
                }
                Ok(Msg::Agent(Output::Closed)) => self.output_closed = true,
                Ok(act) => {
                    unanswered.push(act);
                    break;
                }
                Err(_) => break,
            }
        }
        unanswered
    }

    /// After the agent's tree is killed: keep the stdout lines it wrote that were still
    /// on their way. Its stdout and protocol fd are read by two threads, so a line it
    /// printed before the one that ended the run (a protocol error, say) may arrive
    /// after it; without this, whether that line reached the kept output — and so the
    /// failure's explanation in every report — was a race. Waits at most
    /// [`LAST_OUTPUT_WAIT`] for the readers to close; protocol lines are not output.
    fn keep_last_output(&mut self, process: &AgentProcess) {
        let deadline = Instant::now() + LAST_OUTPUT_WAIT;
        while !self.output_closed {
            let Some(wait) = deadline.checked_duration_since(Instant::now()) else { return };
            match self.rx.recv_timeout(wait) {
                Ok(Msg::Agent(Output::Line(Channel::Stdout, line))) => {
                    if self.fd_spoke || !protocol::on_stdout(&line) {
                        process.keep_stdout(&line);
                    }
                }
                Ok(Msg::Agent(Output::Closed)) => self.output_closed = true,
                // the agent is gone: its requests and protocol lines go unanswered
                Ok(_) => {}
                Err(_) => return,
            }
        }
    }

    /// After `end`: the agent must exit 0 within the profile's `exit_grace_ms`.
    fn until_exit(&mut self, process: &mut AgentProcess) -> Result<Result<(), Stop>, WriteError> {
        let grace = self.input.profile.exit_grace_ms();
        self.deadline = self.deadline.min(Instant::now() + Duration::from_millis(grace));
        loop {
            match self.next()? {
                None => {
                    return Ok(Err(Stop::failed(
                        "agent_timeout",
                        format!(
                            "the agent did not exit within {grace} ms of \"end\" (exit_grace_ms); the process tree \
                             was killed"
                        ),
                    )));
                }
                Some(Msg::Agent(Output::Closed)) => {
                    self.output_closed = true;
                    let status = process.wait_exit(Duration::from_millis(grace));
                    return Ok(match status {
                        Some(s) if s.success() => Ok(()),
                        other => {
                            Err(Stop::failed("agent_exited", format!("the agent {} after \"end\"", exited(other))))
                        }
                    });
                }
                Some(Msg::Agent(Output::Line(channel, line))) => {
                    if self.protocol(process, channel, &line).is_some() {
                        let source = if channel == Channel::Fd { protocol::FD_LINE } else { protocol::STDOUT_LINE };
                        return Ok(Err(Stop::failed("agent_protocol", format!("{source} after \"end\": {line}"))));
                    }
                }
                Some(Msg::Agent(Output::Unreadable(e))) => return Ok(Err(Stop::failed("agent_protocol", e))),
                Some(other) => self.handle(other)?,
            }
            if let Some(stop) = self.stop.take() {
                return Ok(Err(stop));
            }
        }
    }

    /// The next message, releasing held tool calls when the agent goes quiet; `None`
    /// at the deadline.
    fn next(&mut self) -> Result<Option<Msg>, WriteError> {
        loop {
            let now = Instant::now();
            if now >= self.deadline {
                return Ok(None);
            }
            let mut wait = self.deadline - now;
            if !self.held.is_empty() {
                wait = wait.min(Duration::from_millis(HOLD_MS));
            }
            match self.rx.recv_timeout(wait) {
                Ok(msg) => return Ok(Some(msg)),
                Err(RecvTimeoutError::Timeout) if !self.held.is_empty() => self.release(true)?,
                Err(RecvTimeoutError::Timeout) => {}
                // the session holds a sender itself, so the channel cannot close
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            }
        }
    }

    fn handle(&mut self, msg: Msg) -> Result<(), WriteError> {
        match msg {
            Msg::Model { dialect, body, reply } => {
                let answer = self.model(dialect, &body)?;
                // a refusal that stops the run is its reason already
                if answer.status >= 400 && self.stop.is_none() {
                    self.refuse(format!(
                        "{} request → HTTP {}: {}",
                        dialect.api(),
                        answer.status,
                        error_text(&answer.body)
                    ));
                }
                let _ = reply.send(answer);
            }
            Msg::Refused { request, status, message } => self.refuse(format!("{request} → HTTP {status}: {message}")),
            Msg::ListTools { reply } => {
                let tools = self
                    .boundary
                    .offered()
                    .map(|t| json!({"name": t.name, "description": t.description,
                                    "input_schema": t.input_schema.clone().unwrap_or_else(|| json!({"type": "object"}))}))
                    .collect();
                let _ = reply.send(tools);
            }
            Msg::CallTool { name, args, reply } => self.tool(name, args, reply)?,
            Msg::Unserved { method, path } => {
                self.stop = Some(Stop::failed(
                    "unserved_endpoint",
                    format!(
                        "the agent called {method} {path}, which stateval does not serve (served: /v1/chat/completions, /v1/responses, /v1/messages, /v1/models, /mcp, /tools)"
                    ),
                ));
            }
            Msg::CrossCase { request, addressed } => {
                let detail = format!(
                    "the agent sent {request} with this case run's API key to the endpoints of {addressed}; refused"
                );
                self.refuse(format!("{request} → HTTP 403: {detail}"));
                self.rec.emit(&write::SecurityFlagged {
                    class: "cross_case".into(),
                    severity: "high".into(),
                    source: Out::Absent,
                    tool: Out::Absent,
                    detail: (&detail).into(),
                    request: (&request).into(),
                    call_id: Out::Absent,
                })?;
            }
            Msg::SlowBody { request, limit_ms } => {
                self.stop = Some(Stop::failed(
                    "agent_slow_request",
                    format!(
                        "the agent's request body did not arrive within {limit_ms} ms ({request}); the connection was dropped"
                    ),
                ));
            }
            Msg::Agent(_) => {}
        }
        Ok(())
    }

    fn model(&mut self, dialect: Dialect, body: &Value) -> Result<Reply, WriteError> {
        let request = match dialect.neutral(body, &self.stored) {
            Ok(r) => r,
            Err(e) => {
                let message = format!("cannot read the {} request: {e}", dialect.api());
                self.rec.emit(&write::Error {
                    kind: "bad_request".into(),
                    message: (&message).into(),
                    code: Out::Absent,
                    at: Out::Absent,
                    source: Out::Absent,
                })?;
                return Ok(dialect.error(400, "invalid_request_error", &message));
            }
        };
        // a new model call closes the step before it: release what was held, and
        // log the calls whose results the agent produced itself
        self.release(true)?;
        self.observe_agent_results(&request)?;
        let mut normalized = request.clone();
        neutral::normalize(&mut normalized, &self.rules);
        // secrets never reach a digest or a recording, in record and replay alike
        self.scrubber.value(&mut normalized);
        if let Some(requests) = self.launch.requests
            && let Ok(mut requests) = requests.lock()
        {
            requests.push(normalized.clone());
        }
        let seq = self.rec.next_seq();
        let hash = neutral::digest(&normalized).map_err(|source| WriteError::Canon {
            seq,
            kind: Kind::ModelCalled,
            source,
        })?;
        let (position, recorded, divergence) = match self.launch.record {
            Some(record) => match self.fetch(record, dialect, body, hash, &normalized) {
                Ok(fetched) => fetched,
                Err(message) => {
                    self.stop = Some(Stop::failed("upstream", message.clone()));
                    return Ok(dialect.error(502, "stateval_upstream", &message));
                }
            },
            None => {
                let model_request = ModelRequest { turn: self.turn, step: self.step, hash, compiled: None };
                // a request recorded before one of today's rules was added is normalised
                // again as the agent's is, so adding a rule needs no live re-record
                let (rules, scrubber) = (&self.rules, &self.scrubber);
                let renormalize = |stored: &Value| {
                    let mut again = stored.clone();
                    neutral::normalize(&mut again, rules);
                    scrubber.value(&mut again);
                    neutral::digest(&again).ok()
                };
                match self.provider.complete_renormalized(&model_request, &renormalize) {
                    Ok(r) => {
                        if r.renormalized {
                            self.renormalized.push(r.position);
                        }
                        (r.position, r.recorded.into_owned(), r.divergence)
                    }
                    Err(ProviderError::Miss(miss)) => {
                        let message = miss.to_string();
                        self.stop = Some(Stop {
                            status: RunStatus::ReplayExhausted,
                            kind: "replay_miss",
                            message: message.clone(),
                        });
                        return Ok(dialect.error(400, "stateval_replay_miss", &message));
                    }
                    Err(ProviderError::Live(message)) => {
                        self.stop = Some(Stop::failed("upstream", message.clone()));
                        return Ok(dialect.error(502, "stateval_upstream", &message));
                    }
                    Err(ProviderError::Unreadable(message)) => {
                        self.stop = Some(Stop::failed("recording", message.clone()));
                        return Ok(dialect.error(500, "stateval_recording", &message));
                    }
                }
            }
        };
        if let Some(d) = divergence {
            let pointers = recorded
                .request
                .as_ref()
                .map(|r| crate::replay::differences::differences(r, &normalized, 10))
                .unwrap_or_default();
            self.rec.emit(&write::ReplayDiverged {
                position: d.position.into(),
                recorded_request_hash: d.recorded_hash.as_ref().into(),
                actual_request_hash: (&d.actual_hash).into(),
                reason: (&d.reason).into(),
                pointers: Out::Array(&pointers),
            })?;
            let mut message = format!("replay diverged at position {}: {}", d.position, d.reason);
            if !pointers.is_empty() {
                message.push_str(&format!(" (differs at {})", pointers.join(", ")));
            }
            match self.input.on_divergence {
                OnDivergence::Fail => {
                    self.stop = Some(Stop {
                        status: RunStatus::ReplayDiverged,
                        kind: "replay_diverged",
                        message: message.clone(),
                    });
                    return Ok(dialect.error(400, "stateval_replay_diverged", &message));
                }
                OnDivergence::Warn => self.warnings.push(message),
            }
        }
        self.rec.advance(recorded.latency_ms);
        self.tokens += recorded.usage.input_tokens + recorded.usage.output_tokens;
        let (turn, step) = (self.turn, self.step);
        let calls: Vec<CallOut> = recorded
            .response
            .tool_calls
            .iter()
            .enumerate()
            .map(|(j, c)| CallOut {
                id: c.id.clone().unwrap_or_else(|| crate::dataset::recording::ToolCall::default_id(turn, step, j)),
                name: c.name.clone(),
                args: c.args.clone(),
            })
            .collect();
        let tool_calls: Vec<write::LoggedCall> = calls
            .iter()
            .map(|c| write::LoggedCall { id: (&c.id).into(), name: (&c.name).into(), args: (&c.args).into() })
            .collect();
        self.rec.emit(&write::ModelCalled {
            request_hash: (&hash).into(),
            position: position.into(),
            response: Out::Object(&write::Response {
                content: (&recorded.response.content).into(),
                tool_calls: Out::Array(&tool_calls),
                confidence: recorded.response.confidence.map_or(Out::Absent, Out::Float),
            }),
            usage: Out::Object(&write::Usage {
                input_tokens: recorded.usage.input_tokens.into(),
                output_tokens: recorded.usage.output_tokens.into(),
            }),
            latency_ms: recorded.latency_ms.into(),
            api: dialect.api().into(),
            source: Out::Absent,
            absent: Out::Absent,
        })?;
        drop(tool_calls);
        self.step += 1;
        self.proposals = calls
            .iter()
            .map(|c| Proposal {
                call_id: c.id.clone(),
                name: c.name.clone(),
                args: c.args.clone(),
                state: State::Pending,
            })
            .collect();
        let model = body.get("model").and_then(Value::as_str).unwrap_or(super::server::MODEL).to_string();
        let answer = WireAnswer {
            id: wire_id(self.launch.run_id, &self.input.case.id, self.input.run_index, position),
            created: wire::EPOCH + self.rec.now() / 1000,
            model,
            content: &recorded.response.content,
            tool_calls: calls,
            usage: recorded.usage,
        };
        if dialect == Dialect::Responses {
            self.stored.remember(&request, &answer);
        }
        Ok(dialect.render(&answer, body))
    }

    /// Record mode: the live upstream answers, and its answer becomes the next line of
    /// the run's recording (scrubbed), served to the agent exactly as replay will.
    fn fetch(
        &mut self,
        record: &RecordMode,
        dialect: Dialect,
        body: &Value,
        hash: crate::canon::Digest,
        normalized: &Value,
    ) -> Result<(usize, RecordedResponse, Option<crate::replay::Divergence>), String> {
        // the upstream never saw our item ids: it gets the items themselves
        let mut forwarded = if dialect == Dialect::Responses { self.stored.inline(body)? } else { body.clone() };
        // our response ids are not the upstream's: chain by the upstream's own
        if let Some(ours) = body.get("previous_response_id").and_then(Value::as_str) {
            let theirs = self.upstream_ids.get(ours).ok_or_else(|| format!("unknown previous_response_id {ours:?}"))?;
            forwarded["previous_response_id"] = json!(theirs);
        }
        let fetched = record.upstream.call(dialect, &forwarded).map_err(|e| self.scrubber.text(&e).unwrap_or(e))?;
        let mut response = ModelResponse { content: fetched.content, tool_calls: fetched.tool_calls, confidence: None };
        if let Some(clean) = self.scrubber.text(&response.content) {
            response.content = clean;
        }
        for call in &mut response.tool_calls {
            self.scrubber.value(&mut call.args);
        }
        let recorded = RecordedResponse {
            turn: Some(self.turn),
            step: Some(self.step),
            request_hash: Some(hash),
            request: Some(normalized.clone()),
            response,
            usage: fetched.usage,
            latency_ms: fetched.latency_ms,
        };
        let mut lines = record.lines.lock().map_err(|_| "recording lock poisoned".to_string())?;
        lines.push(recorded.clone());
        let position = lines.len() - 1;
        if let Some(theirs) = fetched.upstream_id {
            let ours = wire_id(self.launch.run_id, &self.input.case.id, self.input.run_index, position);
            self.upstream_ids.insert(format!("resp_{ours}"), theirs);
        }
        Ok((position, recorded, None))
    }

    /// Tool results in the request for calls stateval did not execute: the agent ran
    /// those tools itself (`tool_executed` with `source: "agent"`).
    fn observe_agent_results(&mut self, request: &Value) -> Result<(), WriteError> {
        for (call_id, content, is_error) in neutral::tool_results(request) {
            let Some(p) = self
                .proposals
                .iter_mut()
                .find(|p| p.call_id == call_id && matches!(p.state, State::Pending | State::Skipped))
            else {
                continue;
            };
            p.state = State::AgentRun;
            let (tool, args) = (p.name.clone(), p.args.clone());
            self.rec.emit(&write::ToolProposed {
                call_id: (&call_id).into(),
                tool: (&tool).into(),
                args: (&args).into(),
            })?;
            self.rec.emit(&write::ToolExecuted {
                call_id: (&call_id).into(),
                tool: (&tool).into(),
                args: (&args).into(),
                result: (&content).into(),
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
                source: "agent".into(),
                args_raw: Out::Absent,
                args_error: Out::Absent,
                absent: Out::Absent,
            })?;
        }
        Ok(())
    }

    /// A call through MCP or the plain-HTTP tools.
    fn tool(&mut self, name: String, args: Value, reply: oneshot::Sender<ToolAnswer>) -> Result<(), WriteError> {
        // a proposal passed over while the agent was quiet still matches when it comes
        let index = self.proposals.iter().position(|p| {
            matches!(p.state, State::Pending | State::Skipped) && p.name == name && canon::json_eq(&p.args, &args)
        });
        let Some(index) = index else {
            let answer = self.unrequested(&name, &args)?;
            let _ = reply.send(answer);
            return Ok(());
        };
        self.held.push(Held { index, reply });
        self.release(false)
    }

    /// Execute held calls whose earlier proposals are settled, in proposal order.
    /// `give_up`: the agent went quiet (or moved on), so proposals still pending before
    /// a held call are passed over.
    fn release(&mut self, give_up: bool) -> Result<(), WriteError> {
        self.held.sort_by_key(|h| h.index);
        while let Some(first) = self.held.first() {
            let index = first.index;
            let blocked = self.proposals[..index].iter().any(|p| p.state == State::Pending);
            if blocked && !give_up {
                break;
            }
            for p in &mut self.proposals[..index] {
                if p.state == State::Pending {
                    p.state = State::Skipped;
                }
            }
            let held = self.held.remove(0);
            let answer = self.execute(index)?;
            let _ = held.reply.send(answer);
        }
        Ok(())
    }

    fn execute(&mut self, index: usize) -> Result<ToolAnswer, WriteError> {
        let p = &mut self.proposals[index];
        p.state = State::Executed;
        let (call_id, tool, args) = (p.call_id.clone(), p.name.clone(), p.args.clone());
        self.rec.emit(&write::ToolProposed {
            call_id: (&call_id).into(),
            tool: (&tool).into(),
            args: (&args).into(),
        })?;
        if self.boundary.manifest().tool(&tool).is_none() {
            return self.flag_unrequested(&call_id, &tool, format!("tool {tool:?} is not in the manifest"));
        }
        let class = self.boundary.class(&tool);
        if let Some(denied) = self.boundary.decide(self.rec, &call_id, &tool, class, &args)? {
            return Ok(ToolAnswer { result: denied, is_error: true, protocol_error: None });
        }
        let answer = self.boundary.execute(self.rec, &call_id, &tool, &args)?;
        Ok(ToolAnswer { result: answer.result, is_error: answer.is_error, protocol_error: answer.protocol_error })
    }

    /// A call the model did not propose in its last step.
    fn unrequested(&mut self, tool: &str, args: &Value) -> Result<ToolAnswer, WriteError> {
        self.unrequested += 1;
        let call_id = format!("unrequested-{}-{}", self.turn, self.unrequested);
        self.rec.emit(&write::ToolProposed { call_id: (&call_id).into(), tool: tool.into(), args: args.into() })?;
        let detail = if self.boundary.manifest().tool(tool).is_none() {
            format!("tool {tool:?} is not in the manifest")
        } else {
            format!("the model did not propose this call of {tool} in its last step")
        };
        self.flag_unrequested(&call_id, tool, detail)
    }

    /// Keep `what` as the run's last refusal, scrubbed as everything kept is.
    fn refuse(&mut self, what: String) {
        self.refused = Some(self.scrubber.text(&what).unwrap_or(what));
    }

    fn flag_unrequested(&mut self, call_id: &str, tool: &str, detail: String) -> Result<ToolAnswer, WriteError> {
        self.refuse(format!("tool call {tool} → refused: {detail}"));
        let source = self.rec.next_seq() - 1;
        self.rec.emit(&write::SecurityFlagged {
            class: "unrequested_tool".into(),
            severity: "high".into(),
            source: source.into(),
            tool: tool.into(),
            detail: (&detail).into(),
            request: Out::Absent,
            call_id: call_id.into(),
        })?;
        Ok(ToolAnswer {
            result: json!({"error": format!("refused by stateval: {detail}")}),
            is_error: true,
            protocol_error: None,
        })
    }

    fn finish(mut self, outcome: Option<Stop>) -> Result<RunSummary, WriteError> {
        if !self.renormalized.is_empty() {
            let positions: Vec<String> = self.renormalized.iter().map(usize::to_string).collect();
            self.warnings.push(format!(
                "the recording predates the profile's normalize rules: position(s) {} matched once their stored \
                 request was normalised again; `stateval recording lint --fix {}` rewrites it",
                positions.join(", "),
                self.input.recording.source
            ));
        }
        let written = outcome.as_ref().map(|stop| (stop.kind, stop.message.as_str()));
        let status = outcome.as_ref().map_or(RunStatus::Completed, |stop| stop.status);
        crate::agent::close_run(self.rec, written, status, self.input.case.turns.len(), self.tokens)?;
        let error = outcome.map(|stop| stop.message);
        Ok(RunSummary { status, error, warnings: self.warnings, refused: self.refused })
    }
}

/// Wire ids (`chatcmpl-…`, `resp_…`, `msg_…`): from the run id, the case run and the
/// recording position, so they repeat exactly when the run does.
fn wire_id(run_id: &str, case: &str, k: usize, position: usize) -> String {
    let digest = canon::digest(Context::Content, format!("wire\0{run_id}\0{case}\0{k}\0{position}").as_bytes());
    digest.to_hex()[..24].to_string()
}

/// Telemetry switches of agent frameworks, set in every external agent's environment
/// unless its profile's `env` says otherwise (docs/agents.md lists them).
pub const TELEMETRY_OFF: [(&str, &str); 7] = [
    // OpenAI Agents SDK: its trace exporter retries at exit
    ("OPENAI_AGENTS_DISABLE_TRACING", "1"),
    // LangChain / LangGraph: LangSmith tracing, under both names it has had
    ("LANGCHAIN_TRACING_V2", "false"),
    ("LANGSMITH_TRACING", "false"),
    // Pydantic AI: Logfire
    ("LOGFIRE_SEND_TO_LOGFIRE", "false"),
    // every OpenTelemetry SDK (the AI SDK's spans included)
    ("OTEL_SDK_DISABLED", "true"),
    // the Console Do Not Track convention, which several CLIs and SDKs honour
    ("DO_NOT_TRACK", "1"),
    // Hugging Face libraries' usage pings
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
];

/// The message of an error answer (`error.message` in every dialect's error shape, or
/// `error` as a string), else its body as text; one line of at most 500 characters.
fn error_text(body: &[u8]) -> String {
    let value: Option<Value> = serde_json::from_slice(body).ok();
    let message = value.as_ref().and_then(|v| {
        let error = v.get("error")?;
        error.get("message").and_then(Value::as_str).or_else(|| error.as_str()).map(str::to_string)
    });
    let text = message.unwrap_or_else(|| String::from_utf8_lossy(body).into_owned()).replace('\n', " ");
    match text.char_indices().nth(500) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// `exited with status 3`, `was killed by a signal`, `closed its stdout and protocol fd`.
fn exited(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            _ => "exited".into(),
        },
        None => "closed its stdout and protocol fd".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_ids_are_derived_and_distinct() {
        assert_eq!(wire_id("r-1", "c", 0, 0), wire_id("r-1", "c", 0, 0));
        assert_ne!(wire_id("r-1", "c", 0, 0), wire_id("r-1", "c", 0, 1));
    }
}
