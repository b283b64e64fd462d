//! What one event says, by kind: the `data` fields of [`Kind`] a reviewer reads —
//! inputs and answers, model calls (recording position, drift, usage), proposals,
//! verdicts, executions (faults, deduplication, effects), memory, handoffs, flags,
//! errors — with payloads cut to size and seq references as links.

use std::fmt::Write as _;

use serde_json::Value;

use super::markup::{self, PAYLOAD_LIMIT, Shown, esc, plain, present, shown, shown_json};
use super::timeline::Context;
use crate::event::payload::{self as p, Json};
use crate::event::{Event, Kind};

/// A payload: inline when short, else a block that scrolls.
pub fn payload(value: &Value) -> String {
    boxed(&shown(value, PAYLOAD_LIMIT))
}

/// [`payload`] of an event's member, read from its bytes.
fn member(value: Json<'_>) -> String {
    boxed(&shown_json(value, PAYLOAD_LIMIT))
}

fn boxed(s: &Shown) -> String {
    if s.cut.is_none() && s.text.len() <= 120 && !s.text.contains('\n') {
        format!("<code>{}</code>", s.html())
    } else {
        format!("<code class=\"payload\">{}</code>", s.html())
    }
}

fn badge(class: &str, text: &str) -> String {
    format!("<span class=\"b {class}\">{}</span>", esc(text))
}

fn code(v: Json<'_>) -> String {
    match v.as_str() {
        Some(s) => format!("<code>{}</code>", esc(&s)),
        None => format!("<code>{}</code>", markup::shown_json(v, 200).html()),
    }
}

/// What happened, by kind (the `data` fields of [`Kind`]).
pub fn what(e: &Event, ctx: &Context) -> String {
    match e.kind {
        Kind::RunStarted => {
            let d: p::RunStarted = e.view();
            let imported = match d.imported.member("format").as_str() {
                Some(format) => format!(" · imported from {}", esc(&format)),
                None => String::new(),
            };
            format!("case {} · agent {} · run {}{imported}", code(d.case), code(d.agent), plain(d.run))
        }
        Kind::TurnStarted => member(e.view::<p::TurnStarted>().input),
        Kind::ContextCompiled => {
            let d: p::ContextCompiled = e.view();
            let sections = sections(d.sections);
            let over = matches!((d.total.as_u64(), d.budget.as_u64()), (Some(t), Some(b)) if t > b);
            let budget = d.budget.as_u64().map(|b| format!(" of {b}")).unwrap_or_default();
            format!(
                "{}{}{budget} tokens{}{}",
                if over { badge("fail", "over budget") } else { String::new() },
                plain(d.total),
                sections.map(|s| format!(" · {s}")).unwrap_or_default(),
                match d.dropped.as_u64() {
                    Some(n) if n > 0 => format!(" · {n} dropped"),
                    _ => String::new(),
                }
            )
        }
        Kind::ModelCalled => {
            let d: p::ModelCalled = e.view();
            let position = d.position.as_u64();
            let mut out = match position {
                Some(p) => badge("", &format!("position {p}")),
                None => String::new(),
            };
            if position.is_some_and(|p| ctx.drift.contains(&p)) {
                out.push_str(&badge("fail", "drift"));
            }
            let usage: p::Usage = d.usage.view();
            let _ = write!(
                out,
                "<span class=\"muted\">{} ms · {} → {} tokens</span>",
                plain(d.latency_ms),
                plain(usage.input_tokens),
                plain(usage.output_tokens)
            );
            let response: p::Response = d.response.view();
            if present(response.confidence) {
                let _ = write!(out, " <span class=\"muted\">· confidence {}</span>", plain(response.confidence));
            }
            let content = response.content;
            if present(content) && content.as_str().is_none_or(|s| !s.is_empty()) {
                let _ = write!(out, "<div>{}</div>", member(content));
            }
            for call in response.tool_calls.items() {
                let _ = write!(out, "<div>→ {} {}</div>", code(call.member("name")), member(call.member("args")));
            }
            out
        }
        Kind::ToolProposed => {
            let d: p::ToolProposed = e.view();
            format!("{} {} <span class=\"muted\">call {}</span>", code(d.tool), member(d.args), esc(&plain(d.call_id)))
        }
        Kind::PolicyDecided => {
            let d: p::PolicyDecided = e.view();
            let verdict = d.verdict.as_str();
            let verdict = verdict.as_deref().unwrap_or("?");
            let class = match verdict {
                "deny" => "fail",
                "escalate" | "would_deny" | "would_escalate" => "warn",
                _ => "pass",
            };
            format!(
                "{}{} rule {} <span class=\"muted\">{}</span>",
                badge(class, verdict),
                code(d.tool),
                code(d.rule),
                esc(&d.reason.as_str().unwrap_or_default())
            )
        }
        Kind::ApprovalRequested => {
            let d: p::ApprovalRequested = e.view();
            format!("{} route {}", code(d.tool), code(d.route))
        }
        Kind::ApprovalResolved => {
            let d: p::ApprovalResolved = e.view();
            let (class, text) = match d.approved.as_bool() {
                Some(true) => ("pass", "approved"),
                Some(false) => ("fail", "refused"),
                None => ("warn", "unresolved"),
            };
            format!(
                "{}by {} <span class=\"muted\">call {}</span>",
                badge(class, text),
                code(d.by),
                esc(&plain(d.call_id))
            )
        }
        Kind::ToolWithheld => {
            let d: p::ToolWithheld = e.view();
            format!(
                "{}{} by {} <span class=\"muted\">call {} · would have applied</span> {}",
                badge("warn", "withheld"),
                code(d.tool),
                code(d.rule),
                esc(&plain(d.call_id)),
                member(d.effect)
            )
        }
        Kind::ToolExecuted => {
            let d: p::ToolExecuted = e.view();
            let mut out = String::new();
            // a result the agent produced itself: what it said happened, not an execution
            // stateval's sandbox saw
            if d.source.as_str().as_deref() == Some("agent") {
                out.push_str(&badge("warn", "run by the agent itself"));
            }
            if d.is_error.as_bool() == Some(true) {
                out.push_str(&badge("fail", "error"));
            }
            if let Some(fault) = d.fault.as_str() {
                let injected = d.injected.as_str().map(|i| format!(" ({i})")).unwrap_or_default();
                out.push_str(&badge("warn", &format!("fault {fault}{injected}")));
            }
            if d.deduplicated.as_bool() == Some(true) {
                out.push_str(&badge("warn", "deduplicated"));
            }
            let _ = write!(
                out,
                "{} {} → {} <span class=\"muted\">{} ms</span>",
                code(d.tool),
                member(d.args),
                member(d.result),
                plain(d.duration_ms)
            );
            if !d.effect.is_null() {
                let _ = write!(out, "<div class=\"muted\">effect {}</div>", member(d.effect));
            }
            out
        }
        Kind::MemoryWritten => {
            let d: p::MemoryWritten = e.view();
            let supersedes =
                d.supersedes.as_u64().map(|s| format!(" <span class=\"muted\">supersedes {}</span>", ctx.link(s)));
            format!("{}.{} = {}{}", code(d.tier), code(d.key), member(d.value), supersedes.unwrap_or_default())
        }
        Kind::MemoryExpired => {
            let d: p::MemoryExpired = e.view();
            let source = d.source.as_u64().map(|s| format!(" <span class=\"muted\">written at {}</span>", ctx.link(s)));
            format!("{}.{} expired{}", code(d.tier), code(d.key), source.unwrap_or_default())
        }
        Kind::MemoryRead => {
            let d: p::MemoryRead = e.view();
            format!("{}.{} → {}", code(d.tier), code(d.key), member(d.value))
        }
        Kind::Handoff => {
            let d: p::Handoff = e.view();
            let allowed = d.allowed.as_bool() == Some(true);
            format!(
                "{}{} → {}{}",
                if allowed { badge("pass", "allowed") } else { badge("fail", "blocked") },
                code(d.from),
                code(d.to),
                if d.taint.is_null() {
                    String::new()
                } else {
                    format!(" <span class=\"muted\">taint</span> {}", member(d.taint))
                }
            )
        }
        Kind::SecurityFlagged => {
            let d: p::SecurityFlagged = e.view();
            let source = d.source.as_u64().map(|s| format!(" <span class=\"muted\">from {}</span>", ctx.link(s)));
            format!(
                "{}{} {}{}",
                badge("fail", d.severity.as_str().as_deref().unwrap_or("?")),
                code(d.class),
                esc(&d.detail.as_str().unwrap_or_default()),
                source.unwrap_or_default()
            )
        }
        Kind::ReplayDiverged => {
            let d: p::ReplayDiverged = e.view();
            format!(
                "position {} · recorded {} · actual {}",
                plain(d.position),
                code(d.recorded_request_hash),
                code(d.actual_request_hash)
            )
        }
        Kind::Error => {
            let d: p::Error = e.view();
            format!(
                "{}{}{}",
                badge("fail", d.kind.as_str().as_deref().unwrap_or("error")),
                esc(&d.message.as_str().unwrap_or_default()),
                d.at.as_str().map(|a| format!(" <span class=\"muted\">at {}</span>", esc(&a))).unwrap_or_default()
            )
        }
        Kind::TurnCompleted => member(e.view::<p::TurnCompleted>().response),
        Kind::GraderCalled | Kind::JudgeCalled | Kind::JudgeVerdict => {
            // three kinds alike: their members by name
            let g = |name: &str| e.data.member(name);
            let verdict = match (g("error").as_str(), g("pass").as_bool().or(g("passed").as_bool())) {
                (Some(error), _) => badge("fail", &error),
                (None, Some(true)) => badge("pass", "pass"),
                (None, Some(false)) => badge("fail", "fail"),
                (None, None) => String::new(),
            };
            let who = if g("judge").as_str().is_some() { code(g("judge")) } else { code(g("command")) };
            let said = if present(g("value")) { g("value") } else { g("reason") };
            format!("{verdict}{} {who} {}", code(g("target")), member(said))
        }
        Kind::RunCompleted => {
            let d: p::RunCompleted = e.view();
            let status = d.status.as_str();
            let status = status.as_deref().unwrap_or("?");
            let class = if status == "completed" { "pass" } else { "fail" };
            format!("{}{} turns · {} tokens", badge(class, status), plain(d.turns), plain(d.tokens))
        }
    }
}

/// `context_compiled.sections` as `name tokens, …`, as the tree listed it (`None` when
/// it is not an object). Its canonical members are in the tree's order and spelled as
/// its keys unless a key holds an escape or a character at or above U+E000; such a
/// foreign log is listed through the tree.
fn sections(sections: Json<'_>) -> Option<String> {
    let raw = sections.raw();
    if !raw.starts_with('{') {
        return None;
    }
    let listed: Vec<String> = if raw.contains('\\') || raw.bytes().any(|b| b >= 0xEE) {
        let tree = sections.value();
        tree.as_object()?.iter().map(|(k, v)| format!("{} {v}", esc(k))).collect()
    } else {
        p::object_members(raw).map(|(k, v)| format!("{} {}", esc(k), plain(Json::of(v)))).collect()
    };
    Some(listed.join(", "))
}
