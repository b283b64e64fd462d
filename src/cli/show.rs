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

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use super::{CliError, Exit};
use stateval::event::fold::{Memory, apply_memory, apply_sandbox};
use stateval::event::reader::{ReadError, read_log, stream_envelopes, stream_log};
use stateval::event::{Event, Kind};
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
        if let (Some(id), Some(tool)) = (e.str("call_id"), e.str("tool")) {
            tools.insert(id.to_string(), tool.to_string());
        }
        let tool = e.str("tool").or_else(|| e.str("call_id").and_then(|id| tools.get(id)).map(String::as_str));
        let turn = e.turn.map_or_else(|| "-".to_string(), |t| t.to_string());
        super::out(format!(
            "{:>4}  {:>4}  {:>8}  {:<18} {:<16} {:<9} {}",
            e.seq,
            turn,
            e.t,
            e.kind.as_str(),
            tool.unwrap_or(""),
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
                let mut line = format!("  {tier}.{key} = {}  (written at seq {}", compact(&entry.value), entry.source);
                if let Some(c) = entry.confidence {
                    line.push_str(&format!(", confidence {c}"));
                }
                if !entry.superseded.is_empty() {
                    let old: Vec<String> = entry.superseded.iter().map(compact).collect();
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
        Kind::PolicyDecided => e.str("verdict").unwrap_or("?").to_string(),
        Kind::ApprovalResolved => match e.get("approved").as_bool() {
            Some(true) => "approved".into(),
            Some(false) => "refused".into(),
            None => "?".into(),
        },
        // a result the agent produced itself went through none of stateval's sandbox: it
        // is what the agent said happened, never an execution stateval saw
        Kind::ToolExecuted if e.str("source") == Some("agent") => match e.get("is_error").as_bool() {
            Some(true) => "agent-err".into(),
            _ => "by-agent".into(),
        },
        Kind::ToolExecuted => match e.get("is_error").as_bool() {
            Some(true) => e.str("error_kind").map_or_else(|| "error".to_string(), |k| format!("{k}-err")),
            Some(false) => "ok".into(),
            None => "absent".into(),
        },
        Kind::Handoff => match e.get("allowed").as_bool() {
            Some(true) => "allowed".into(),
            _ => "blocked".into(),
        },
        Kind::RunCompleted => e.str("status").unwrap_or("?").to_string(),
        Kind::GraderCalled => match (e.str("error"), e.get("pass").as_bool()) {
            (Some(error), _) => error.to_string(),
            (None, Some(true)) => "pass".into(),
            (None, _) => "fail".into(),
        },
        Kind::JudgeCalled => match e.str("error") {
            Some(error) => error.to_string(),
            None => compact(e.get("answer").get("score").unwrap_or(&Value::Null)),
        },
        Kind::JudgeVerdict => if e.get("passed").as_bool() == Some(true) { "pass" } else { "fail" }.into(),
        _ => String::new(),
    }
}

fn detail(e: &Event) -> String {
    let text = match e.kind {
        Kind::RunStarted => {
            let case = e.str("case").unwrap_or("?");
            match e.get("imported").get("format").and_then(Value::as_str) {
                Some(format) => format!("case {case}, imported from {format}: {}", e.get("imported")["file"]),
                None => format!("case {case}, agent {}", e.str("agent").unwrap_or("?")),
            }
        }
        Kind::TurnStarted => quoted(e.get("input")),
        Kind::ContextCompiled => format!("{} of {} tokens", e.get("total"), e.get("budget")),
        Kind::ModelCalled => {
            let response = e.get("response");
            let calls = response.get("tool_calls").and_then(Value::as_array).map_or(0, Vec::len);
            let content = response.get("content").unwrap_or(&Value::Null);
            match calls {
                0 => quoted(content),
                n => format!("{} → {n} tool call(s)", quoted(content)),
            }
        }
        Kind::ToolProposed => compact(e.get("args")),
        Kind::PolicyDecided => format!("rule {}: {}", e.get("rule"), e.str("reason").unwrap_or("")),
        Kind::ApprovalRequested => format!("route {}", e.str("route").unwrap_or("?")),
        Kind::ApprovalResolved => format!("by {}", e.str("by").unwrap_or("?")),
        Kind::ToolExecuted if e.str("source") == Some("agent") => format!(
            "{} → {} (run by the agent itself, not by stateval's sandbox)",
            compact(e.get("args")),
            compact(e.get("result"))
        ),
        Kind::ToolExecuted => format!("{} → {}", compact(e.get("args")), compact(e.get("result"))),
        Kind::MemoryWritten => {
            let supersedes = match e.get("supersedes") {
                Value::Null => String::new(),
                s => format!(" (supersedes seq {s})"),
            };
            format!(
                "{}.{} = {}{supersedes}",
                e.str("tier").unwrap_or("?"),
                e.str("key").unwrap_or("?"),
                compact(e.get("value"))
            )
        }
        Kind::MemoryExpired => format!("{}.{} expired", e.str("tier").unwrap_or("?"), e.str("key").unwrap_or("?")),
        Kind::MemoryRead => {
            format!("{}.{} → {}", e.str("tier").unwrap_or("?"), e.str("key").unwrap_or("?"), compact(e.get("value")))
        }
        Kind::Handoff => format!("{} → {}", e.get("from"), e.get("to")),
        Kind::SecurityFlagged => format!(
            "{} ({}): {}",
            e.str("class").unwrap_or("?"),
            e.str("severity").unwrap_or("?"),
            e.str("detail").unwrap_or("")
        ),
        Kind::ReplayDiverged => e.str("reason").unwrap_or("").to_string(),
        Kind::Error => {
            let at = e.str("at").map(|a| format!(" ({a})")).unwrap_or_default();
            format!("{}: {}{at}", e.str("kind").unwrap_or("error"), e.str("message").unwrap_or(""))
        }
        Kind::TurnCompleted => quoted(e.get("response")),
        Kind::GraderCalled => {
            let command =
                e.get("command").as_array().map(|c| c.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "));
            let said = e.str("message").or_else(|| e.str("reason")).unwrap_or("");
            format!("{}: `{}` {said}", e.str("target").unwrap_or("?"), command.unwrap_or_default())
        }
        Kind::JudgeCalled => format!(
            "{}: judge {} sample {}",
            e.str("target").unwrap_or("?"),
            e.str("judge").unwrap_or("?"),
            e.get("sample")
        ),
        Kind::JudgeVerdict => format!(
            "{}: judge {} votes {} → {} {}",
            e.str("target").unwrap_or("?"),
            e.str("judge").unwrap_or("?"),
            compact(e.get("votes")),
            e.str("reduce").unwrap_or("?"),
            compact(e.get("value"))
        ),
        Kind::RunCompleted => format!("{} turns, {} tokens", e.get("turns"), e.get("tokens")),
    };
    cut(&text)
}

/// A string in quotes; null (not captured) as `(absent)`.
fn quoted(v: &Value) -> String {
    match v {
        Value::Null => "(absent)".to_string(),
        Value::String(s) => format!("\"{}\"", s.replace('\n', " ")),
        other => compact(other),
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(CELL) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
