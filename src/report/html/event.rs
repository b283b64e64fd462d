//! What one event says, by kind: the `data` fields of [`Kind`] a reviewer reads —
//! inputs and answers, model calls (recording position, drift, usage), proposals,
//! verdicts, executions (faults, deduplication, effects), memory, handoffs, flags,
//! errors — with payloads cut to size and seq references as links.

use std::fmt::Write as _;

use serde_json::Value;

use super::markup::{self, PAYLOAD_LIMIT, esc, shown};
use super::timeline::Context;
use crate::event::{Event, Kind};

/// A payload: inline when short, else a block that scrolls.
pub fn payload(value: &Value) -> String {
    let s = shown(value, PAYLOAD_LIMIT);
    if s.cut.is_none() && s.text.len() <= 120 && !s.text.contains('\n') {
        format!("<code>{}</code>", s.html())
    } else {
        format!("<code class=\"payload\">{}</code>", s.html())
    }
}

fn badge(class: &str, text: &str) -> String {
    format!("<span class=\"b {class}\">{}</span>", esc(text))
}

fn code(v: &Value) -> String {
    match v.as_str() {
        Some(s) => format!("<code>{}</code>", esc(s)),
        None => format!("<code>{}</code>", markup::value_html(v, 200)),
    }
}

/// What happened, by kind (the `data` fields of [`Kind`]).
pub fn what(e: &Event, ctx: &Context) -> String {
    let g = |f: &str| e.get(f);
    match e.kind {
        Kind::RunStarted => {
            let imported = match g("imported").get("format").and_then(Value::as_str) {
                Some(format) => format!(" · imported from {}", esc(format)),
                None => String::new(),
            };
            format!("case {} · agent {} · run {}{imported}", code(g("case")), code(g("agent")), g("run"))
        }
        Kind::TurnStarted => payload(g("input")),
        Kind::ContextCompiled => {
            let sections = g("sections")
                .as_object()
                .map(|m| m.iter().map(|(k, v)| format!("{} {v}", esc(k))).collect::<Vec<_>>().join(", "));
            let over = matches!((g("total").as_u64(), g("budget").as_u64()), (Some(t), Some(b)) if t > b);
            let budget = g("budget").as_u64().map(|b| format!(" of {b}")).unwrap_or_default();
            format!(
                "{}{}{budget} tokens{}{}",
                if over { badge("fail", "over budget") } else { String::new() },
                g("total"),
                sections.map(|s| format!(" · {s}")).unwrap_or_default(),
                match g("dropped").as_u64() {
                    Some(n) if n > 0 => format!(" · {n} dropped"),
                    _ => String::new(),
                }
            )
        }
        Kind::ModelCalled => {
            let position = g("position").as_u64();
            let mut out = match position {
                Some(p) => badge("", &format!("position {p}")),
                None => String::new(),
            };
            if position.is_some_and(|p| ctx.drift.contains(&p)) {
                out.push_str(&badge("fail", "drift"));
            }
            let usage = g("usage");
            let _ = write!(
                out,
                "<span class=\"muted\">{} ms · {} → {} tokens</span>",
                g("latency_ms"),
                usage.get("input_tokens").unwrap_or(&Value::Null),
                usage.get("output_tokens").unwrap_or(&Value::Null)
            );
            let response = g("response");
            if let Some(c) = response.get("confidence") {
                let _ = write!(out, " <span class=\"muted\">· confidence {c}</span>");
            }
            if let Some(content) = response.get("content").filter(|c| c.as_str().is_none_or(|s| !s.is_empty())) {
                let _ = write!(out, "<div>{}</div>", payload(content));
            }
            for call in response.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let _ = write!(
                    out,
                    "<div>→ {} {}</div>",
                    code(call.get("name").unwrap_or(&Value::Null)),
                    payload(call.get("args").unwrap_or(&Value::Null))
                );
            }
            out
        }
        Kind::ToolProposed => format!(
            "{} {} <span class=\"muted\">call {}</span>",
            code(g("tool")),
            payload(g("args")),
            esc(&g("call_id").to_string())
        ),
        Kind::PolicyDecided => {
            let verdict = e.str("verdict").unwrap_or("?");
            let class = match verdict {
                "deny" => "fail",
                "escalate" => "warn",
                _ => "pass",
            };
            format!(
                "{}{} rule {} <span class=\"muted\">{}</span>",
                badge(class, verdict),
                code(g("tool")),
                code(g("rule")),
                esc(e.str("reason").unwrap_or_default())
            )
        }
        Kind::ApprovalRequested => format!("{} route {}", code(g("tool")), code(g("route"))),
        Kind::ApprovalResolved => {
            let (class, text) = match g("approved").as_bool() {
                Some(true) => ("pass", "approved"),
                Some(false) => ("fail", "refused"),
                None => ("warn", "unresolved"),
            };
            format!(
                "{}by {} <span class=\"muted\">call {}</span>",
                badge(class, text),
                code(g("by")),
                esc(&g("call_id").to_string())
            )
        }
        Kind::ToolExecuted => {
            let mut out = String::new();
            // a result the agent produced itself: what it said happened, not an execution
            // stateval's sandbox saw
            if g("source").as_str() == Some("agent") {
                out.push_str(&badge("warn", "run by the agent itself"));
            }
            if g("is_error").as_bool() == Some(true) {
                out.push_str(&badge("fail", "error"));
            }
            if let Some(fault) = g("fault").as_str() {
                let injected = g("injected").as_str().map(|i| format!(" ({i})")).unwrap_or_default();
                out.push_str(&badge("warn", &format!("fault {fault}{injected}")));
            }
            if g("deduplicated").as_bool() == Some(true) {
                out.push_str(&badge("warn", "deduplicated"));
            }
            let _ = write!(
                out,
                "{} {} → {} <span class=\"muted\">{} ms</span>",
                code(g("tool")),
                payload(g("args")),
                payload(g("result")),
                g("duration_ms")
            );
            if !g("effect").is_null() {
                let _ = write!(out, "<div class=\"muted\">effect {}</div>", payload(g("effect")));
            }
            out
        }
        Kind::MemoryWritten => {
            let supersedes =
                g("supersedes").as_u64().map(|s| format!(" <span class=\"muted\">supersedes {}</span>", ctx.link(s)));
            format!(
                "{}.{} = {}{}",
                code(g("tier")),
                code(g("key")),
                payload(g("value")),
                supersedes.unwrap_or_default()
            )
        }
        Kind::MemoryExpired => {
            let source =
                g("source").as_u64().map(|s| format!(" <span class=\"muted\">written at {}</span>", ctx.link(s)));
            format!("{}.{} expired{}", code(g("tier")), code(g("key")), source.unwrap_or_default())
        }
        Kind::MemoryRead => format!("{}.{} → {}", code(g("tier")), code(g("key")), payload(g("value"))),
        Kind::Handoff => {
            let allowed = g("allowed").as_bool() == Some(true);
            format!(
                "{}{} → {}{}",
                if allowed { badge("pass", "allowed") } else { badge("fail", "blocked") },
                code(g("from")),
                code(g("to")),
                if g("taint").is_null() {
                    String::new()
                } else {
                    format!(" <span class=\"muted\">taint</span> {}", payload(g("taint")))
                }
            )
        }
        Kind::SecurityFlagged => {
            let source = g("source").as_u64().map(|s| format!(" <span class=\"muted\">from {}</span>", ctx.link(s)));
            format!(
                "{}{} {}{}",
                badge("fail", e.str("severity").unwrap_or("?")),
                code(g("class")),
                esc(e.str("detail").unwrap_or_default()),
                source.unwrap_or_default()
            )
        }
        Kind::ReplayDiverged => format!(
            "position {} · recorded {} · actual {}",
            g("position"),
            code(g("recorded_request_hash")),
            code(g("actual_request_hash"))
        ),
        Kind::Error => format!(
            "{}{}{}",
            badge("fail", e.str("kind").unwrap_or("error")),
            esc(e.str("message").unwrap_or_default()),
            e.str("at").map(|a| format!(" <span class=\"muted\">at {}</span>", esc(a))).unwrap_or_default()
        ),
        Kind::TurnCompleted => payload(g("response")),
        Kind::GraderCalled | Kind::JudgeCalled | Kind::JudgeVerdict => {
            let verdict = match (g("error").as_str(), g("pass").as_bool().or(g("passed").as_bool())) {
                (Some(error), _) => badge("fail", error),
                (None, Some(true)) => badge("pass", "pass"),
                (None, Some(false)) => badge("fail", "fail"),
                (None, None) => String::new(),
            };
            let who = g("judge").as_str().map_or_else(|| code(g("command")), |j| code(&Value::String(j.to_string())));
            format!(
                "{verdict}{} {who} {}",
                code(g("target")),
                payload(e.data.tree().get("value").or(e.data.tree().get("reason")).unwrap_or(&Value::Null))
            )
        }
        Kind::RunCompleted => {
            let status = e.str("status").unwrap_or("?");
            let class = if status == "completed" { "pass" } else { "fail" };
            format!("{}{} turns · {} tokens", badge(class, status), g("turns"), g("tokens"))
        }
    }
}
