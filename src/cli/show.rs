//! `stateval show LOG [--at-turn N]`: a readable timeline, and the state at turn N.
//! `stateval show LOG --html OUT`: the same log as one offline HTML page (timeline by
//! turn, the state after each turn), for a log with no run around it (an import).
//!
//! The log is verified first: a timeline of a log that was edited would present
//! tampered events as what happened, so a log that does not verify is refused (exit 2,
//! naming the first bad seq). The timeline has one line per event — seq, turn, virtual
//! time, kind, tool, verdict, and what changed (input, calls, results, memory writes
//! and expiries, errors). With `--at-turn N` it stops after turn N and prints the state
//! folded over that prefix: memory and the fixture sandbox, with the same folds
//! extractors use (`event::fold::apply_memory`, `apply_sandbox`). The log is streamed
//! twice (verify, then print), so memory does not grow with its size.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use super::{CliError, Exit};
use stateval::event::fold::{Memory, apply_memory, apply_sandbox};
use stateval::event::payload::{self as p, Json};
use stateval::event::reader::{ReadError, read_log, stream_envelopes, stream_log};
use stateval::event::{Event, Kind};
use stateval::report::html::markup::plain;
use stateval::report::{self, html};

#[derive(clap::Args)]
pub struct Args {
    /// Event log (JSONL), as `stateval run` or `stateval import` writes it.
    log: PathBuf,
    /// Stop after turn N (0-based) and print the memory and sandbox state at its end.
    #[arg(long = "at-turn", value_name = "N", conflicts_with = "html")]
    at_turn: Option<u32>,
    /// Write the log as one offline HTML page to OUT instead of printing the timeline.
    #[arg(long, value_name = "OUT")]
    html: Option<PathBuf>,
}

/// Longest text shown in a timeline cell before it is cut with "…".
const CELL: usize = 72;

pub fn run(args: Args) -> Result<Exit, CliError> {
    let shown = args.log.display().to_string();
    let refuse = |e: ReadError| match e {
        ReadError::Invalid { source, .. } => CliError::invalid(format!(
            "{shown}: refusing to show a log that does not verify: line {}: event seq {}: {}",
            source.line, source.seq, source.reason
        )),
        e @ ReadError::Io { .. } => CliError::invalid(e.to_string()),
    };
    if let Some(out) = &args.html {
        // one page holds every event anyway
        let verified = read_log(&args.log).map_err(refuse)?;
        let write = |w: &mut dyn std::io::Write| html::write_log(&shown, &verified.events, w);
        report::write_file(out, "html", write).map_err(|e| CliError::internal(e.to_string()))?;
        super::out(format!("report: {}", out.display()));
        return Ok(Exit::Pass);
    }
    // Two streamed passes, never the whole log in memory: the first verifies it and
    // learns its size, the second prints it and folds the state as it goes.
    let mut last_turn = None;
    let summary = stream_envelopes(&args.log, |e, _| last_turn = last_turn.max(e.turn)).map_err(refuse)?;
    if let Some(n) = args.at_turn {
        match last_turn {
            None => return Err(CliError::invalid(format!("--at-turn {n}: {shown} has no turns"))),
            Some(last) if n > last => {
                return Err(CliError::invalid(format!("--at-turn {n}: {shown} has turns 0 to {last}")));
            }
            _ => {}
        }
    }
    let head = summary.head.map_or_else(|| "none".to_string(), |h| h.to_string());
    let state = if summary.complete { "complete" } else { "incomplete: no run_completed" };
    super::out(format!("{shown}: {} events, head {head} ({state})", summary.events));
    super::out(format!(
        "{:>4}  {:>4}  {:>8}  {:<18} {:<16} {:<9} detail",
        "seq", "turn", "t(ms)", "kind", "tool", "verdict"
    ));
    let mut tools: BTreeMap<String, String> = BTreeMap::new();
    let mut memory = Memory::new();
    let mut sandbox = serde_json::json!({});
    let mut sandbox_error = None;
    let mut done = false;
    let printed = stream_log(&args.log, |e, _| {
        if done {
            return;
        }
        if let (Some(limit), Some(turn)) = (args.at_turn, e.turn)
            && turn > limit
        {
            done = true;
            return;
        }
        apply_memory(&mut memory, e);
        if sandbox_error.is_none()
            && let Err(err) = apply_sandbox(&mut sandbox, e)
        {
            sandbox_error = Some(err);
        }
        // any kind: the members many kinds share, by name
        let (call_id, tool) = (e.data.member("call_id").as_str(), e.data.member("tool").as_str());
        if let (Some(id), Some(tool)) = (&call_id, &tool) {
            tools.insert(id.to_string(), tool.to_string());
        }
        let tool = tool.or_else(|| call_id.and_then(|id| tools.get(id.as_ref())).map(|t| Cow::Borrowed(t.as_str())));
        let turn = e.turn.map_or_else(|| "-".to_string(), |t| t.to_string());
        super::out(format!(
            "{:>4}  {:>4}  {:>8}  {:<18} {:<16} {:<9} {}",
            e.seq,
            turn,
            e.t,
            e.kind.as_str(),
            tool.as_deref().unwrap_or(""),
            verdict(e),
            detail(e)
        ));
    });
    // the file changed between the passes
    printed.map_err(refuse)?;
    if let Some(n) = args.at_turn {
        if let Some(err) = sandbox_error {
            return Err(CliError::invalid(format!("{shown}: {err}")));
        }
        print_state(&memory, &sandbox, n);
    }
    Ok(Exit::Pass)
}

fn print_state(memory: &Memory, sandbox: &Value, n: u32) {
    super::out(format!("\nstate at the end of turn {n}:"));
    if memory.is_empty() {
        super::out("memory: (empty)");
    } else {
        super::out("memory:");
        for (tier, keys) in memory {
            for (key, entry) in keys {
                let mut line =
                    format!("  {tier}.{key} = {}  (written at seq {}", compact_value(&entry.value), entry.source);
                if let Some(c) = entry.confidence {
                    line.push_str(&format!(", confidence {c}"));
                }
                if !entry.superseded.is_empty() {
                    let old: Vec<String> = entry.superseded.iter().map(compact_value).collect();
                    line.push_str(&format!(", supersedes {}", old.join(", ")));
                }
                super::out(format!("{line})"));
            }
        }
    }
    let pretty = serde_json::to_string_pretty(sandbox).unwrap_or_else(|_| sandbox.to_string());
    super::out("sandbox:");
    for line in pretty.lines() {
        super::out(format!("  {line}"));
    }
}

fn verdict(e: &Event) -> String {
    match e.kind {
        Kind::PolicyDecided => text(e.view::<p::PolicyDecided>().verdict, "?"),
        Kind::ToolWithheld => "withheld".into(),
        Kind::ApprovalResolved => match e.view::<p::ApprovalResolved>().approved.as_bool() {
            Some(true) => "approved".into(),
            Some(false) => "refused".into(),
            None => "?".into(),
        },
        Kind::ToolExecuted => {
            let d: p::ToolExecuted = e.view();
            // a result the agent produced itself went through none of stateval's sandbox:
            // it is what the agent said happened, never an execution stateval saw
            if d.source.as_str().as_deref() == Some("agent") {
                return match d.is_error.as_bool() {
                    Some(true) => "agent-err".into(),
                    _ => "by-agent".into(),
                };
            }
            match d.is_error.as_bool() {
                Some(true) => d.error_kind.as_str().map_or_else(|| "error".to_string(), |k| format!("{k}-err")),
                Some(false) => "ok".into(),
                None => "absent".into(),
            }
        }
        Kind::Handoff => match e.view::<p::Handoff>().allowed.as_bool() {
            Some(true) => "allowed".into(),
            _ => "blocked".into(),
        },
        Kind::RunCompleted => text(e.view::<p::RunCompleted>().status, "?"),
        Kind::GraderCalled => {
            let d: p::GraderCalled = e.view();
            match (d.error.as_str(), d.pass.as_bool()) {
                (Some(error), _) => error.into_owned(),
                (None, Some(true)) => "pass".into(),
                (None, _) => "fail".into(),
            }
        }
        Kind::JudgeCalled => {
            let d: p::JudgeCalled = e.view();
            match d.error.as_str() {
                Some(error) => error.into_owned(),
                None => compact(d.answer.member("score")),
            }
        }
        Kind::JudgeVerdict => {
            if e.view::<p::JudgeVerdict>().passed.as_bool() == Some(true) { "pass" } else { "fail" }.into()
        }
        _ => String::new(),
    }
}

fn detail(e: &Event) -> String {
    let text = match e.kind {
        Kind::RunStarted => {
            let d: p::RunStarted = e.view();
            let case = text(d.case, "?");
            match d.imported.member("format").as_str() {
                Some(format) => format!("case {case}, imported from {format}: {}", plain(d.imported.member("file"))),
                None => format!("case {case}, agent {}", text(d.agent, "?")),
            }
        }
        Kind::TurnStarted => quoted(e.view::<p::TurnStarted>().input),
        Kind::ContextCompiled => {
            let d: p::ContextCompiled = e.view();
            format!("{} of {} tokens", plain(d.total), plain(d.budget))
        }
        Kind::ModelCalled => {
            let response: p::Response = e.view::<p::ModelCalled>().response.view();
            match response.tool_calls.items().len() {
                0 => quoted(response.content),
                n => format!("{} → {n} tool call(s)", quoted(response.content)),
            }
        }
        Kind::ToolProposed => compact(e.view::<p::ToolProposed>().args),
        Kind::PolicyDecided => {
            let d: p::PolicyDecided = e.view();
            format!("rule {}: {}", plain(d.rule), text(d.reason, ""))
        }
        Kind::ApprovalRequested => format!("route {}", text(e.view::<p::ApprovalRequested>().route, "?")),
        Kind::ApprovalResolved => format!("by {}", text(e.view::<p::ApprovalResolved>().by, "?")),
        Kind::ToolWithheld => {
            let d: p::ToolWithheld = e.view();
            format!("rule {} ({}): would have applied {}", plain(d.rule), text(d.by, "?"), compact(d.effect))
        }
        Kind::ToolExecuted => {
            let d: p::ToolExecuted = e.view();
            if d.source.as_str().as_deref() == Some("agent") {
                format!(
                    "{} → {} (run by the agent itself, not by stateval's sandbox)",
                    compact(d.args),
                    compact(d.result)
                )
            } else {
                format!("{} → {}", compact(d.args), compact(d.result))
            }
        }
        Kind::MemoryWritten => {
            let d: p::MemoryWritten = e.view();
            // `null` as an absent member read: no supersedes
            let supersedes = if d.supersedes.is_null() {
                String::new()
            } else {
                format!(" (supersedes seq {})", plain(d.supersedes))
            };
            format!("{}.{} = {}{supersedes}", text(d.tier, "?"), text(d.key, "?"), compact(d.value))
        }
        Kind::MemoryExpired => {
            let d: p::MemoryExpired = e.view();
            format!("{}.{} expired", text(d.tier, "?"), text(d.key, "?"))
        }
        Kind::MemoryRead => {
            let d: p::MemoryRead = e.view();
            format!("{}.{} → {}", text(d.tier, "?"), text(d.key, "?"), compact(d.value))
        }
        Kind::Handoff => {
            let d: p::Handoff = e.view();
            format!("{} → {}", plain(d.from), plain(d.to))
        }
        Kind::SecurityFlagged => {
            let d: p::SecurityFlagged = e.view();
            format!("{} ({}): {}", text(d.class, "?"), text(d.severity, "?"), text(d.detail, ""))
        }
        Kind::ReplayDiverged => text(e.view::<p::ReplayDiverged>().reason, ""),
        Kind::Error => {
            let d: p::Error = e.view();
            let at = d.at.as_str().map(|a| format!(" ({a})")).unwrap_or_default();
            format!("{}: {}{at}", text(d.kind, "error"), text(d.message, ""))
        }
        Kind::TurnCompleted => quoted(e.view::<p::TurnCompleted>().response),
        Kind::GraderCalled => {
            let d: p::GraderCalled = e.view();
            let command: Vec<_> = d.command.items().iter().filter_map(|part| part.as_str()).collect();
            let said = d.message.as_str().or_else(|| d.reason.as_str()).unwrap_or_default();
            format!("{}: `{}` {said}", text(d.target, "?"), command.join(" "))
        }
        Kind::JudgeCalled => {
            let d: p::JudgeCalled = e.view();
            format!("{}: judge {} sample {}", text(d.target, "?"), text(d.judge, "?"), plain(d.sample))
        }
        Kind::JudgeVerdict => {
            let d: p::JudgeVerdict = e.view();
            format!(
                "{}: judge {} votes {} → {} {}",
                text(d.target, "?"),
                text(d.judge, "?"),
                compact(d.votes),
                text(d.reduce, "?"),
                compact(d.value)
            )
        }
        Kind::RunCompleted => {
            let d: p::RunCompleted = e.view();
            format!("{} turns, {} tokens", plain(d.turns), plain(d.tokens))
        }
    };
    cut(&text)
}

/// A string member's text, or `otherwise` when it is absent or not a string.
fn text(value: Json<'_>, otherwise: &str) -> String {
    value.as_str().map_or_else(|| otherwise.to_string(), Cow::into_owned)
}

/// A string in quotes; null (not captured) as `(absent)`.
fn quoted(v: Json<'_>) -> String {
    match v.as_str() {
        _ if v.is_null() => "(absent)".to_string(),
        Some(s) => format!("\"{}\"", s.replace('\n', " ")),
        None => compact(v),
    }
}

/// A member as `serde_json` writes its tree (user JSON: arguments, results, values).
fn compact(v: Json<'_>) -> String {
    plain(v).into_owned()
}

/// A memory value as `serde_json` writes it.
fn compact_value(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(CELL) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
