//! Evidence: which events an assertion's value came from.
//!
//! A failing check says `final_response: expected to contain "$9,999"`; a reviewer's
//! next question is *where in the log* that value was produced. [`evidence`] answers it
//! for each target root of [`super::resolve`] with the seqs of the events the value was
//! read from (the `turn_completed` of the last turn, the i-th `tool_executed`, the
//! memory write that holds a key, …), so reports can link a check to its events. It is
//! a separate pure function, not a by-product of resolving, so the extractors stay as
//! simple as the values they compute. A `recovery.*` value is derived from the faults
//! the run met, so it points at the faulted executions; `events.count` has no source.

use super::path::{self, Segment};
use crate::event::fold;
use crate::event::{Event, Kind, payload};

/// Most seqs returned for one target: a reviewer follows the first few, and a
/// `tool_sequence` over a 300-turn run should not list a thousand events.
pub const MAX_EVIDENCE: usize = 8;

/// The seqs of the events `target`'s value was read from, in log order (at most
/// [`MAX_EVIDENCE`]); empty when the value has no source event or the target is
/// malformed.
pub fn evidence(target: &str, events: &[Event]) -> Vec<u64> {
    let Ok(segments) = path::parse(target) else { return Vec::new() };
    let Some(Segment::Key(root)) = segments.first() else { return Vec::new() };
    let key = |i: usize| match segments.get(i) {
        Some(Segment::Key(k)) => Some(k.as_str()),
        _ => None,
    };
    let index = |i: usize| match segments.get(i) {
        Some(Segment::Index(n)) => Some(*n),
        _ => None,
    };
    let of = |kind: Kind| events.iter().filter(move |e| e.kind == kind);
    let seqs = |it: &mut dyn Iterator<Item = &Event>| it.map(|e| e.seq).take(MAX_EVIDENCE).collect::<Vec<_>>();
    let nth = |kind: Kind, n: Option<usize>| match n {
        Some(n) => of(kind).nth(n).map(|e| vec![e.seq]).unwrap_or_default(),
        None => seqs(&mut of(kind)),
    };
    match root.as_str() {
        "final_response" => of(Kind::TurnCompleted).next_back().map(|e| vec![e.seq]).unwrap_or_default(),
        "turns" => {
            let Some(turn) = index(1) else { return seqs(&mut of(Kind::TurnCompleted)) };
            let kind = if key(2) == Some("input") { Kind::TurnStarted } else { Kind::TurnCompleted };
            seqs(&mut of(kind).filter(|e| e.turn == u32::try_from(turn).ok()))
        }
        "tool_calls" | "tool_results" => nth(Kind::ToolExecuted, index(1)),
        "tool_sequence" => nth(Kind::ToolExecuted, None),
        "tools" => nth(Kind::ToolProposed, None),
        "memory" | "memory_lifecycle" | "memory_at" => {
            let (at, rest) = match (root.as_str(), index(1)) {
                ("memory_at", Some(turn)) => (u32::try_from(turn).ok(), 2),
                ("memory_at", None) => return Vec::new(),
                _ => (None, 1),
            };
            memory_source(events, at, &segments[rest..])
        }
        "policy" => {
            let decided = of(Kind::PolicyDecided);
            let with_verdict = |v: &'static str| {
                move |e: &&Event| e.view::<payload::PolicyDecided>().verdict.as_str().as_deref() == Some(v)
            };
            match (key(1), index(2)) {
                (Some("verdicts"), n @ Some(_)) => nth(Kind::PolicyDecided, n),
                (Some("verdict_at_turn"), Some(t)) => {
                    seqs(&mut decided.filter(|e| e.turn.map(|x| x as usize) == Some(t)))
                }
                (Some("denials"), _) => seqs(&mut decided.filter(with_verdict("deny"))),
                (Some("escalations"), _) => seqs(&mut decided.filter(with_verdict("escalate"))),
                _ => nth(Kind::PolicyDecided, None),
            }
        }
        "context" => {
            let compiled = of(Kind::ContextCompiled);
            match key(1) {
                Some("max_total") => compiled
                    .max_by_key(|e| (e.view::<payload::ContextCompiled>().total.as_u64(), std::cmp::Reverse(e.seq)))
                    .map(|e| vec![e.seq])
                    .unwrap_or_default(),
                Some("budget_exceeded") => seqs(&mut compiled.filter(|e| {
                    let c: payload::ContextCompiled = e.view();
                    matches!((c.total.as_u64(), c.budget.as_u64()), (Some(t), Some(b)) if t > b)
                })),
                _ => Vec::new(),
            }
        }
        "security" => match (key(1), index(2)) {
            (Some("flags"), n @ Some(_)) => nth(Kind::SecurityFlagged, n),
            _ => nth(Kind::SecurityFlagged, None),
        },
        "sandbox" => seqs(&mut events.iter().filter(|e| {
            e.kind == Kind::RunStarted
                || (e.kind == Kind::ToolExecuted && !e.view::<payload::ToolExecuted>().effect.is_null())
        })),
        "usage" => nth(Kind::ModelCalled, None),
        "status" => of(Kind::RunCompleted).next_back().map(|e| vec![e.seq]).unwrap_or_default(),
        "replay" => nth(Kind::ReplayDiverged, None),
        "approvals" => nth(Kind::ApprovalRequested, index(1)),
        // recovery is measured from the faults the run met: they are where to look
        "recovery" => seqs(&mut of(Kind::ToolExecuted).filter(|e| !e.view::<payload::ToolExecuted>().fault.is_null())),
        _ => Vec::new(),
    }
}

/// The write that holds `tier.key` at the end of turn `at` (all turns when `None`).
/// Keys may contain dots (`user.email`): the longest run that names a key wins, as in
/// [`path::walk`].
fn memory_source(events: &[Event], at: Option<u32>, rest: &[Segment]) -> Vec<u64> {
    let memory = fold::memory_at(events, at);
    let Some(Segment::Key(tier)) = rest.first() else {
        return Vec::new();
    };
    let Some(keys) = memory.get(tier) else { return Vec::new() };
    let words: Vec<&str> = rest[1..]
        .iter()
        .map_while(|s| match s {
            Segment::Key(k) => Some(k.as_str()),
            Segment::Index(_) => None,
        })
        .collect();
    (1..=words.len())
        .rev()
        .find_map(|n| keys.get(&words[..n].join(".")))
        .map(|entry| vec![entry.source])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::writer::LogWriter;
    use serde_json::{Value, json};

    fn log(events: &[(Option<u32>, Kind, Value)]) -> Vec<Event> {
        let mut w = LogWriter::new(Vec::new());
        events.iter().map(|(turn, k, d)| w.append(*turn, 0, *k, d.clone()).unwrap()).collect()
    }

    fn run() -> Vec<Event> {
        log(&[
            (None, Kind::RunStarted, json!({"sandbox": {"balance": 10}})), // 0
            (Some(0), Kind::TurnStarted, json!({"turn": 0, "input": "pay"})), // 1
            (Some(0), Kind::PolicyDecided, json!({"call_id": "c1", "verdict": "deny"})), // 2
            (Some(0), Kind::ToolExecuted, json!({"tool": "get", "effect": null})), // 3
            (Some(0), Kind::MemoryWritten, json!({"tier": "semantic", "key": "user.email", "value": "a@x"})), // 4
            (Some(0), Kind::TurnCompleted, json!({"turn": 0, "response": "one"})), // 5
            (Some(1), Kind::TurnStarted, json!({"turn": 1, "input": "again"})), // 6
            (
                Some(1),
                Kind::ToolExecuted,
                json!({"tool": "pay", "effect": [{"op": "replace", "path": "/balance", "value": 0}]}),
            ), // 7
            (Some(1), Kind::MemoryWritten, json!({"tier": "semantic", "key": "user.email", "value": "b@x"})), // 8
            (Some(1), Kind::TurnCompleted, json!({"turn": 1, "response": "two"})), // 9
            (None, Kind::RunCompleted, json!({"status": "completed"})),    // 10
        ])
    }

    #[test]
    fn the_final_response_comes_from_the_last_turn_completed() {
        assert_eq!(evidence("final_response", &run()), [9]);
        assert_eq!(evidence("turns[0].response", &run()), [5]);
        assert_eq!(evidence("turns[1].input", &run()), [6]);
    }

    #[test]
    fn the_ith_tool_call_is_the_ith_execution_and_the_sequence_is_all_of_them() {
        assert_eq!(evidence("tool_calls[1].args", &run()), [7]);
        assert_eq!(evidence("tool_results[0]", &run()), [3]);
        assert_eq!(evidence("tool_sequence", &run()), [3, 7]);
        assert!(evidence("tool_calls[5]", &run()).is_empty());
    }

    #[test]
    fn a_memory_key_comes_from_the_write_that_holds_it_at_that_turn() {
        // dotted key, superseded at turn 1: the final value is seq 8's, turn 0's is seq 4's
        assert_eq!(evidence("memory.semantic.user.email", &run()), [8]);
        assert_eq!(evidence("memory_at[0].semantic.user.email", &run()), [4]);
        assert!(evidence("memory.semantic.nope", &run()).is_empty());
    }

    #[test]
    fn denials_are_the_deny_verdicts_and_status_is_run_completed() {
        assert_eq!(evidence("policy.denials", &run()), [2]);
        assert_eq!(evidence("status", &run()), [10]);
        assert_eq!(evidence("sandbox.balance", &run()), [0, 7]);
    }

    #[test]
    fn recovery_values_come_from_the_faulted_executions() {
        let events = log(&[
            (Some(0), Kind::ToolExecuted, json!({"tool": "status", "fault": "timeout"})),
            (Some(0), Kind::ToolExecuted, json!({"tool": "status", "fault": null})),
        ]);
        assert_eq!(evidence("recovery.recovered", &events), [0]);
    }

    #[test]
    fn a_count_over_the_whole_log_or_a_malformed_target_has_no_evidence() {
        assert!(evidence("events.count", &run()).is_empty());
        assert!(evidence("a..b", &run()).is_empty());
    }
}
