//! Extractors: pure functions from a run's events to the values assertions target.
//!
//! Tool calls are what was *executed* (`tool_executed`), in log order: graders judge
//! what the agent observably did, never what it proposed or narrated. Each root is
//! computed on demand, so a 300-turn run pays only for the targets it asserts.
//!
//! | target | value |
//! |---|---|
//! | `final_response` | response of the last completed turn |
//! | `turns[i].input` / `turns[i].response` | user input / final response of turn i |
//! | `tool_calls[i]` (`.name`, `.args`, `.result`, `.is_error`, `.fault`) | i-th executed call |
//! | `tool_results[i]` | its result |
//! | `tool_sequence` | names of executed calls, in order |
//! | `tools.proposed` | names of proposed calls, in order (executed or not) |
//! | `memory.<tier>.<key>` | final memory (a fold over the log) |
//! | `memory_at[<turn>].<tier>.<key>` | memory at the end of turn n |
//! | `memory_lifecycle.<tier>.<key>` | `{value, source, confidence, superseded: [{value, source, superseded_by}]}` |
//! | `policy.verdicts` | `[{turn, call_id, tool, verdict, rule}]`, plus `tainted_by: {seq, tool}` when the arguments were tainted, and for a call with sensitive arguments `grounded: {arg: {seq, source}}` and `ungrounded: {arg, value}` (agent::grounding) |
//! | `policy.denials` / `policy.escalations` | counts |
//! | `policy.verdict_at_turn[<n>]` | strongest verdict of turn n (deny > escalate > allow) |
//! | `context.max_total` / `context.budget_exceeded` | over `context_compiled` events (0/1) |
//! | `security.flags` | `[{class, severity, detail}]`; `security.flag_count` |
//! | `sandbox.<path>` | final fixture state |
//! | `usage.input_tokens` / `usage.output_tokens` / `usage.model_calls` | summed usage |
//! | `status` / `events.count` / `replay.divergences` | run status, event count (grading events not counted), divergences |
//! | `approvals` | `[{call_id, tool, route, approved, by, turn}]` (routes: auto, human, deny) |
//! | `recovery.*` | fault marks and the times derived from them (see [`recovery`]) |
//!
//! [`targets`] lists every target with its meaning (`stateval targets`).

pub mod envelope;
pub mod evidence;
pub mod recovery;
pub mod targets;

/// The target grammar is the dataset's (it checks every target when it loads).
use crate::dataset::target as path;

pub use evidence::evidence;
pub use recovery::recovery_input;

use serde_json::{Map, Value, json};

use crate::event::fold;
use crate::event::{Event, Kind, payload};
use path::Segment;

/// The value at `target` in a run's events, or `None` when it has none.
pub fn resolve(target: &str, events: &[Event]) -> Option<Value> {
    let segments = path::parse(target).ok()?;
    let Some(Segment::Key(head)) = segments.first() else {
        return None;
    };
    let (root_value, rest) = match head.as_str() {
        "memory_at" => {
            let Some(Segment::Index(turn)) = segments.get(1) else {
                return None;
            };
            let turn = u32::try_from(*turn).ok()?;
            (fold::memory_values(&fold::memory_at(events, Some(turn))), &segments[2..])
        }
        // `policy.denials` and its like read counts: copying every decision into
        // `verdicts` only to drop them was most of grading a long run
        "policy" if matches!(segments.get(1), Some(Segment::Key(k)) if k != "verdicts") => {
            (policy(events, false), &segments[1..])
        }
        other => (root(other, events)?, &segments[1..]),
    };
    path::walk(&root_value, rest).cloned()
}

fn root(name: &str, events: &[Event]) -> Option<Value> {
    let of = |kind: Kind| events.iter().filter(move |e| e.kind == kind);
    Some(match name {
        "final_response" => of(Kind::TurnCompleted).next_back()?.view::<payload::TurnCompleted>().response.value(),
        "turns" => turns(events),
        "tool_calls" => Value::Array(
            of(Kind::ToolExecuted)
                .map(|e| {
                    let call: payload::ToolExecuted = e.view();
                    let mut out = Map::new();
                    out.insert("args".into(), call.args.value());
                    out.insert("fault".into(), call.fault.value());
                    out.insert("is_error".into(), call.is_error.value());
                    out.insert("name".into(), call.tool.value());
                    out.insert("result".into(), call.result.value());
                    out.insert("turn".into(), json!(e.turn));
                    Value::Object(out)
                })
                .collect(),
        ),
        "tool_results" => {
            Value::Array(of(Kind::ToolExecuted).map(|e| e.view::<payload::ToolExecuted>().result.value()).collect())
        }
        // `tool` is the last of the kind's members: read from the end, past nothing
        "tool_sequence" => Value::Array(of(Kind::ToolExecuted).map(|e| e.data.last_member("tool").value()).collect()),
        "tools" => {
            json!({"proposed": of(Kind::ToolProposed).map(|e| e.view::<payload::ToolProposed>().tool.value()).collect::<Vec<_>>()})
        }
        "memory" => fold::memory_values(&fold::memory_at(events, None)),
        "memory_lifecycle" => fold::memory_lifecycle(&fold::memory_at(events, None)),
        "policy" => policy(events, true),
        "context" => {
            let compiled: Vec<payload::ContextCompiled> = of(Kind::ContextCompiled).map(Event::view).collect();
            let max_total = compiled.iter().filter_map(|c| c.total.as_u64()).max().unwrap_or(0);
            let exceeded =
                compiled.iter().any(|c| matches!((c.total.as_u64(), c.budget.as_u64()), (Some(t), Some(b)) if t > b));
            json!({"max_total": max_total, "budget_exceeded": u8::from(exceeded), "compilations": compiled.len()})
        }
        "security" => {
            let flags: Vec<Value> = of(Kind::SecurityFlagged)
                .map(|e| {
                    let f: payload::SecurityFlagged = e.view();
                    json!({"class": f.class.value(), "severity": f.severity.value(), "detail": f.detail.value(), "turn": e.turn})
                })
                .collect();
            json!({"flag_count": flags.len(), "flags": flags})
        }
        "sandbox" => fold::sandbox_at(events, None).ok()?,
        "usage" => {
            let (mut input, mut output, mut calls) = (0u64, 0u64, 0u64);
            for e in of(Kind::ModelCalled) {
                let usage: payload::Usage = e.view::<payload::ModelCalled>().usage.view();
                input += usage.input_tokens.as_u64().unwrap_or(0);
                output += usage.output_tokens.as_u64().unwrap_or(0);
                calls += 1;
            }
            json!({"input_tokens": input, "output_tokens": output, "total_tokens": input + output, "model_calls": calls})
        }
        "status" => of(Kind::RunCompleted).next_back()?.view::<payload::RunCompleted>().status.value(),
        // what the agent did: grading events are written after it, so every assertion,
        // graded before or after them, sees the same count
        "events" => json!({"count": events.iter().filter(|e| !e.kind.is_grading()).count()}),
        "replay" => json!({"divergences": of(Kind::ReplayDiverged).count()}),
        "approvals" => {
            let mut requested: Vec<Value> = Vec::new();
            for e in events {
                match e.kind {
                    Kind::ApprovalRequested => {
                        let a: payload::ApprovalRequested = e.view();
                        requested.push(json!({"call_id": a.call_id.value(), "tool": a.tool.value(),
                                              "route": a.route.value(), "turn": e.turn}));
                    }
                    Kind::ApprovalResolved => {
                        let a: payload::ApprovalResolved = e.view();
                        let call = a.call_id.value();
                        if let Some(r) = requested.iter_mut().rev().find(|r| r["call_id"] == call) {
                            r["approved"] = a.approved.value();
                            r["by"] = a.by.value();
                        }
                    }
                    _ => {}
                }
            }
            Value::Array(requested)
        }
        "recovery" => recovery::root(events),
        _ => return None,
    })
}

fn turns(events: &[Event]) -> Value {
    let mut turns: Vec<Map<String, Value>> = Vec::new();
    for e in events {
        let Some(t) = e.turn.map(|t| t as usize) else { continue };
        match e.kind {
            Kind::TurnStarted | Kind::TurnCompleted => {
                if turns.len() <= t {
                    turns.resize_with(t + 1, Map::new);
                }
                let (field, value) = if e.kind == Kind::TurnStarted {
                    ("input", e.view::<payload::TurnStarted>().input.value())
                } else {
                    ("response", e.view::<payload::TurnCompleted>().response.value())
                };
                turns[t].insert(field.into(), value);
            }
            _ => {}
        }
    }
    Value::Array(turns.into_iter().map(Value::Object).collect())
}

/// The `policy` root; without `verdicts` its `verdicts` array is left empty (the counts
/// and `verdict_at_turn` are the same).
fn policy(events: &[Event], verdicts_too: bool) -> Value {
    let mut verdicts = Vec::new();
    let (mut denials, mut escalations) = (0u64, 0u64);
    let mut per_turn: Vec<Option<String>> = Vec::new();
    let rank = |v: &str| match v {
        "deny" => 2,
        "escalate" => 1,
        _ => 0,
    };
    for e in events.iter().filter(|e| e.kind == Kind::PolicyDecided) {
        // `verdict` is the last of the kind's members: the counts read it from the end
        let verdict = e.data.last_member("verdict");
        let verdict = verdict.as_str().unwrap_or_default();
        let verdict = &*verdict;
        match verdict {
            "deny" => denials += 1,
            "escalate" => escalations += 1,
            _ => {}
        }
        if let Some(t) = e.turn.map(|t| t as usize) {
            if per_turn.len() <= t {
                per_turn.resize(t + 1, None);
            }
            if per_turn[t].as_deref().is_none_or(|old| rank(verdict) > rank(old)) {
                per_turn[t] = Some(verdict.to_string());
            }
        }
        if !verdicts_too {
            continue;
        }
        let decided: payload::PolicyDecided = e.view();
        let mut entry = json!({"turn": e.turn, "call_id": decided.call_id.value(), "tool": decided.tool.value(),
                               "verdict": verdict, "rule": decided.rule.value()});
        // the event that introduced the taint a decision saw, when it saw one
        if !decided.tainted_by.is_null() {
            entry["tainted_by"] = decided.tainted_by.value();
        }
        // where a consequential argument came from, when the call had one
        for (field, value) in [("grounded", decided.grounded), ("ungrounded", decided.ungrounded)] {
            if !value.is_null() {
                entry[field] = value.value();
            }
        }
        verdicts.push(entry);
    }
    json!({
        "verdicts": verdicts,
        "denials": denials,
        "escalations": escalations,
        "verdict_at_turn": per_turn.into_iter().map(|v| v.map_or(Value::Null, Value::String)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod lean_policy_tests {
    use super::*;
    use crate::event::writer::LogWriter;

    #[test]
    fn a_policy_count_read_without_the_verdicts_is_the_one_read_from_the_whole_root() {
        let mut writer = LogWriter::new(Vec::new());
        let mut events = Vec::new();
        for (turn, verdict) in [(0, "allow"), (0, "deny"), (1, "escalate"), (1, "allow"), (3, "deny")] {
            let data = json!({"call_id": format!("c-{turn}"), "tool": "pay", "verdict": verdict, "rule": "r",
                              "tainted_by": if verdict == "deny" { json!(2) } else { Value::Null }});
            events.push(writer.append(Some(turn), 0, Kind::PolicyDecided, data).unwrap());
        }
        let whole = policy(&events, true);
        assert_eq!(whole["verdicts"].as_array().map(Vec::len), Some(5));
        for target in ["policy.denials", "policy.escalations", "policy.verdict_at_turn", "policy.verdict_at_turn[1]"] {
            let segments = path::parse(target).unwrap();
            assert_eq!(resolve(target, &events), path::walk(&whole, &segments[1..]).cloned(), "{target}");
        }
        assert_eq!(resolve("policy.denials", &events), Some(json!(2)));
        assert_eq!(resolve("policy.verdicts[4].tainted_by", &events), Some(json!(2)));
        assert_eq!(resolve("policy", &events), Some(whole));
    }
}
