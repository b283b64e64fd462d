//! State as projections: folds over events. Memory, the fixture sandbox and approvals
//! are never stored anywhere else; extractors, `show`, the HTML report and tests all
//! rebuild them from here, whole (`*_at`) or one event at a time (`apply_*`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Event, Kind, payload};

/// One memory entry as the fold sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEntry {
    pub value: Value,
    pub confidence: Option<f64>,
    /// seq of the `memory_written` event that holds this value.
    pub source: u64,
    pub turn: Option<u32>,
    /// Values this entry replaced, oldest first (supersession keeps history).
    pub superseded: Vec<Value>,
    /// The earlier writes, oldest first: value, the write's seq, and the seq of the
    /// write that superseded it.
    pub history: Vec<Superseded>,
}

/// A memory value that a later write replaced; kept, not lost.
#[derive(Debug, Clone, PartialEq)]
pub struct Superseded {
    pub value: Value,
    pub source: u64,
    pub superseded_by: u64,
}

/// tier → key → entry.
pub type Memory = BTreeMap<String, BTreeMap<String, MemoryEntry>>;

/// Memory after every event with `turn <= at_turn` (all events when `None`).
pub fn memory_at(events: &[Event], at_turn: Option<u32>) -> Memory {
    let mut memory = Memory::new();
    for e in events {
        if let (Some(limit), Some(turn)) = (at_turn, e.turn)
            && turn > limit
        {
            break;
        }
        apply_memory(&mut memory, e);
    }
    memory
}

/// Apply one event to a memory projection (no-op for other kinds).
pub fn apply_memory(memory: &mut Memory, e: &Event) {
    match e.kind {
        Kind::MemoryWritten => {
            let written: payload::MemoryWritten = e.view();
            let (Some(tier), Some(key)) = (written.tier.as_str(), written.key.as_str()) else {
                return;
            };
            let slot = memory.entry(tier.into_owned()).or_default();
            let mut superseded = Vec::new();
            let mut history = Vec::new();
            if let Some(old) = slot.remove(&*key) {
                superseded = old.superseded;
                history = old.history;
                history.push(Superseded { value: old.value.clone(), source: old.source, superseded_by: e.seq });
                superseded.push(old.value);
            }
            slot.insert(
                key.to_string(),
                MemoryEntry {
                    value: written.value.value(),
                    confidence: written.confidence.as_f64(),
                    source: e.seq,
                    turn: e.turn,
                    superseded,
                    history,
                },
            );
        }
        Kind::MemoryExpired => {
            let expired: payload::MemoryExpired = e.view();
            let (Some(tier), Some(key)) = (expired.tier.as_str(), expired.key.as_str()) else {
                return;
            };
            if let Some(slot) = memory.get_mut(&*tier) {
                slot.remove(&*key);
                if slot.is_empty() {
                    memory.remove(&*tier);
                }
            }
        }
        _ => {}
    }
}

/// Every entry's lifecycle: `{tier: {key: {value, source, confidence, superseded: [{value,
/// source, superseded_by}]}}}`.
pub fn memory_lifecycle(memory: &Memory) -> Value {
    Value::Object(
        memory
            .iter()
            .map(|(tier, keys)| {
                let inner = keys
                    .iter()
                    .map(|(k, e)| {
                        let history: Vec<Value> = e
                            .history
                            .iter()
                            .map(|h| json!({"value": h.value, "source": h.source, "superseded_by": h.superseded_by}))
                            .collect();
                        (k.clone(), json!({"value": e.value, "source": e.source, "confidence": e.confidence, "superseded": history}))
                    })
                    .collect();
                (tier.clone(), Value::Object(inner))
            })
            .collect(),
    )
}

/// Memory as plain JSON: `{tier: {key: value}}`.
pub fn memory_values(memory: &Memory) -> Value {
    Value::Object(
        memory
            .iter()
            .map(|(tier, keys)| {
                let inner = keys.iter().map(|(k, e)| (k.clone(), e.value.clone())).collect();
                (tier.clone(), Value::Object(inner))
            })
            .collect(),
    )
}

/// Fixture sandbox state after every event with `turn <= at_turn`: the initial state
/// from `run_started.sandbox`, then each `tool_executed.effect` (RFC 6902 JSON Patch)
/// in order. An effect that does not apply is an error naming its event.
pub fn sandbox_at(events: &[Event], at_turn: Option<u32>) -> Result<Value, String> {
    let mut state = json!({});
    for e in events {
        if let (Some(limit), Some(turn)) = (at_turn, e.turn)
            && turn > limit
        {
            break;
        }
        apply_sandbox(&mut state, e)?;
    }
    Ok(state)
}

/// Apply one event to a sandbox projection (no-op for kinds that do not change it).
pub fn apply_sandbox(state: &mut Value, e: &Event) -> Result<(), String> {
    match e.kind {
        Kind::RunStarted => *state = e.view::<payload::RunStarted>().sandbox.value(),
        Kind::ToolExecuted => {
            let effect = e.view::<payload::ToolExecuted>().effect;
            if effect.is_null() {
                return Ok(());
            }
            let patch: json_patch::Patch = serde_json::from_value(effect.value())
                .map_err(|err| format!("event seq {}: effect is not a JSON Patch: {err}", e.seq))?;
            json_patch::patch(state, &patch)
                .map_err(|err| format!("event seq {}: effect does not apply: {err}", e.seq))?;
        }
        _ => {}
    }
    Ok(())
}

/// Apply an effect (an RFC 6902 patch) to a counterfactual state, where it may not
/// apply (a real call changed what a withheld one had changed first): then the state is
/// left as it was, and `false` says so. The boundary's shadow state and the attempt
/// grading's fold both apply withheld effects this way, so they agree.
pub fn apply_effect(state: &mut Value, effect: &Value) -> bool {
    let Ok(patch) = serde_json::from_value::<json_patch::Patch>(effect.clone()) else { return false };
    let mut next = state.clone();
    let applied = json_patch::patch(&mut next, &patch).is_ok();
    if applied {
        *state = next;
    }
    applied
}

/// One approval as the fold sees it: requested, and resolved or still pending.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub tool: Option<String>,
    pub route: Option<String>,
    /// seq of the `approval_requested` event.
    pub requested: u64,
    /// `Some(approved)` once resolved.
    pub approved: Option<bool>,
    pub by: Option<String>,
}

/// call id → approval, in call-id order.
pub type Approvals = BTreeMap<String, Approval>;

/// Apply one event to an approvals projection (no-op for other kinds). A resolution
/// without a request is kept too, so nothing the log says disappears.
pub fn apply_approval(approvals: &mut Approvals, e: &Event) {
    match e.kind {
        Kind::ApprovalRequested => {
            let requested: payload::ApprovalRequested = e.view();
            let Some(call) = requested.call_id.as_str() else { return };
            approvals.insert(
                call.into_owned(),
                Approval {
                    tool: requested.tool.as_str().map(Cow::into_owned),
                    route: requested.route.as_str().map(Cow::into_owned),
                    requested: e.seq,
                    approved: None,
                    by: None,
                },
            );
        }
        Kind::ApprovalResolved => {
            let resolved: payload::ApprovalResolved = e.view();
            let Some(call) = resolved.call_id.as_str() else { return };
            let entry = approvals.entry(call.into_owned()).or_insert(Approval {
                tool: None,
                route: None,
                requested: e.seq,
                approved: None,
                by: None,
            });
            entry.approved = resolved.approved.as_bool();
            entry.by = resolved.by.as_str().map(Cow::into_owned);
        }
        _ => {}
    }
}

/// Approvals as plain JSON: `{call_id: {tool, route, status: pending | approved |
/// refused, by}}`.
pub fn approvals_values(approvals: &Approvals) -> Value {
    Value::Object(
        approvals
            .iter()
            .map(|(call, a)| {
                let status = match a.approved {
                    None => "pending",
                    Some(true) => "approved",
                    Some(false) => "refused",
                };
                (call.clone(), json!({"tool": a.tool, "route": a.route, "status": status, "by": a.by}))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::writer::LogWriter;

    fn log(events: &[(Option<u32>, Kind, Value)]) -> Vec<Event> {
        let mut w = LogWriter::new(Vec::new());
        events.iter().map(|(turn, k, d)| w.append(*turn, 0, *k, d.clone()).unwrap()).collect()
    }

    #[test]
    fn memory_folds_writes_supersession_and_expiry_per_turn() {
        let events = log(&[
            (Some(0), Kind::MemoryWritten, json!({"tier": "semantic", "key": "payee", "value": "alice"})),
            (Some(1), Kind::MemoryWritten, json!({"tier": "semantic", "key": "payee", "value": "bob"})),
            (Some(1), Kind::MemoryWritten, json!({"tier": "episodic", "key": "note", "value": 1})),
            (Some(2), Kind::MemoryExpired, json!({"tier": "episodic", "key": "note"})),
        ]);
        let at0 = memory_at(&events, Some(0));
        assert_eq!(memory_values(&at0), json!({"semantic": {"payee": "alice"}}));
        let at1 = memory_at(&events, Some(1));
        assert_eq!(memory_values(&at1), json!({"episodic": {"note": 1}, "semantic": {"payee": "bob"}}));
        assert_eq!(at1["semantic"]["payee"].superseded, vec![json!("alice")]);
        let lifecycle = memory_lifecycle(&at1);
        assert_eq!(
            lifecycle["semantic"]["payee"]["superseded"],
            json!([{"value": "alice", "source": 0, "superseded_by": 1}])
        );
        assert_eq!(memory_values(&memory_at(&events, None)), json!({"semantic": {"payee": "bob"}}));
    }

    #[test]
    fn sandbox_state_is_the_initial_state_patched_by_tool_effects() {
        let events = log(&[
            (None, Kind::RunStarted, json!({"sandbox": {"ledger": []}})),
            (Some(0), Kind::ToolExecuted, json!({"effect": [{"op": "add", "path": "/ledger/-", "value": 100}]})),
            (Some(1), Kind::ToolExecuted, json!({"effect": null})),
            (Some(2), Kind::ToolExecuted, json!({"effect": [{"op": "add", "path": "/ledger/-", "value": 5}]})),
        ]);
        assert_eq!(sandbox_at(&events, Some(1)).unwrap(), json!({"ledger": [100]}));
        assert_eq!(sandbox_at(&events, None).unwrap(), json!({"ledger": [100, 5]}));
    }

    #[test]
    fn an_approval_is_pending_until_resolved() {
        let events = log(&[
            (Some(0), Kind::ApprovalRequested, json!({"call_id": "c1", "tool": "close", "route": "human"})),
            (Some(0), Kind::ApprovalResolved, json!({"call_id": "c1", "approved": false, "by": "human:ops"})),
            (Some(1), Kind::ApprovalRequested, json!({"call_id": "c2", "tool": "pay", "route": "human"})),
        ]);
        let mut approvals = Approvals::new();
        for e in &events {
            apply_approval(&mut approvals, e);
        }
        assert_eq!(
            approvals_values(&approvals),
            json!({"c1": {"tool": "close", "route": "human", "status": "refused", "by": "human:ops"},
                   "c2": {"tool": "pay", "route": "human", "status": "pending", "by": null}})
        );
    }
}
